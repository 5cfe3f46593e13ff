"""Reading a fact's details out of text (kept, mixed, changed, lost), and scoring probe answers with it,
strictly: a hedge does not cancel a detail, a right value beside a wrong one is not right, a failed
answer is failed."""

from __future__ import annotations

from datetime import date

import pytest

from simulation.provenance.details import (CHANGED, KEPT, LOST, MIXED, Detail, DetailReader, place_aliases,
                                           times_said)
from simulation.provenance.probes import score_answer

PLACES = {"hobbs_cafe": ("Hobbs Cafe", "cafe"), "rose_and_crown": ("The Rose and Crown Pub", "bar"),
          "town_square": ("Town Square", "square"), "okafor_house": ("The Okafor House", "home"),
          "haddad_house": ("The Haddad House", "home")}
PLACE = Detail("place", "place", "hobbs_cafe", ("Hobbs",))
DAY = Detail("day", "date", "2023-02-14", ("Valentine's Day",))
TIME = Detail("time", "time", "17:00-19:00")
MONDAY = date(2023, 2, 13)
QUESTION = "Do you know of a Valentine's Day party? Where and when?"


@pytest.fixture(scope="module")
def reader():
    return DetailReader(place_aliases(PLACES))


def test_place_aliases_name_a_place_by_a_noun_only_it_has():
    aliases = place_aliases(PLACES)
    assert "\x00cafe" in aliases["hobbs_cafe"] and "\x00pub" in aliases["rose_and_crown"]
    assert "Rose and Crown Pub" in aliases["rose_and_crown"] and "Rose and Crown" in aliases["rose_and_crown"]
    assert "Okafor" not in aliases["okafor_house"]  # one word left: a surname names a person as much as a house
    assert not any(a.startswith("\x00") for a in aliases["okafor_house"])  # "house", "home": two places each


@pytest.mark.parametrize("text, place, day, time", [
    ("I'm throwing a party at Hobbs Cafe tomorrow from five to seven", KEPT, KEPT, KEPT),
    ("There's a party at her cafe on February 14, 5pm to 7pm", KEPT, KEPT, KEPT),
    ("Come to the party at the pub at 8pm on the 15th", CHANGED, CHANGED, CHANGED),
    ("Party at Hobbs on Tuesday at 6", KEPT, KEPT, KEPT),
    ("A Valentine’s Day party, starting at 17:00", LOST, KEPT, KEPT),
    ("There's a party somewhere, I think", LOST, LOST, LOST),
    ("The party is on Wednesday evening at the Town Square", CHANGED, CHANGED, LOST),
    ("from 4 to 6pm at the cafe", KEPT, LOST, MIXED),  # 4pm is before the party: not all right
    ("I have 2 to 3 people coming today", LOST, CHANGED, LOST),
])
def test_details_kept_mixed_changed_lost(reader, text, place, day, time):
    assert (reader.read(text, PLACE, MONDAY), reader.read(text, DAY, MONDAY), reader.read(text, TIME, MONDAY)) \
        == (place, day, time)


def test_tomorrow_and_today_depend_on_when_it_was_said(reader):
    assert reader.read("the party is tomorrow", DAY, MONDAY) == KEPT
    assert reader.read("the party is tomorrow", DAY, date(2023, 2, 14)) == CHANGED
    assert reader.read("the party is tonight", DAY, date(2023, 2, 14)) == KEPT
    assert reader.read("the party is tomorrow", DAY, None) == LOST


@pytest.mark.parametrize("text, detail, state", [
    # place: the fact's place and another place of the town
    ("At Hobbs Cafe or the Rose and Crown", PLACE, MIXED),
    ("It's at the cafe, or maybe the pub", PLACE, MIXED),
    ("Hobbs, then Town Square", PLACE, MIXED),
    ("At Hobbs Cafe, the cafe on the corner", PLACE, KEPT),  # two names of the right place: only right values
    ("At the Rose and Crown", PLACE, CHANGED),
    # date: the right date, weekday or relative day and another one
    ("On February 14 or the 15th", DAY, MIXED),
    ("Tuesday or Wednesday", DAY, MIXED),
    ("Valentine's Day, or was it the 13th?", DAY, MIXED),
    ("It's tomorrow, not today", DAY, MIXED),
    ("Tuesday the 14th, tomorrow", DAY, KEPT),
    ("The first time I heard, it was for the 14th", DAY, KEPT),  # "the first time" is no day of the month
    # time: a time inside 17:00-19:00 and one whose every reading lies outside it
    ("at 9am or 5pm", TIME, MIXED),
    ("at 5pm, or at 8", TIME, MIXED),  # "at 8": 08:00 or 20:00, both outside
    ("at 6, until 7pm", TIME, KEPT),  # "6": 06:00 or 18:00, one inside
    ("from 5 to 8pm", TIME, MIXED),  # the party is over at seven
])
def test_a_right_value_beside_a_wrong_one_is_mixed(reader, text, detail, state):
    assert reader.read(text, detail, MONDAY) == state


def test_a_single_time_does_not_read_the_end_of_a_range(reader):
    start = Detail("time", "time", "17:00")
    assert reader.read("from 5 to 7pm", start, MONDAY) == KEPT  # a party at five may go on to seven
    assert reader.read("from 3 to 5pm", start, MONDAY) == CHANGED
    assert reader.read("at 5pm or 9pm", start, MONDAY) == MIXED


def test_a_place_inside_a_longer_place_name_is_not_read_on_its_own():
    reader = DetailReader(place_aliases({"square": ("Town Square", "square"),
                                         "market": ("Town Square Market", "market")}))
    market = Detail("place", "place", "market")
    assert reader.read("at the Town Square Market", market, MONDAY) == KEPT
    assert reader.read("at the Town Square Market", Detail("place", "place", "square"), MONDAY) == CHANGED
    assert reader.read("at the Town Square, by the Town Square Market", market, MONDAY) == MIXED


def test_months_are_whole_words(reader):
    assert reader.read("I have 5 marbles", DAY, MONDAY) == LOST


def test_times_said():
    assert times_said("at 9 in the morning") == [{540}]
    assert times_said("at noon") == [{720}]
    assert {1020} in times_said("5pm sharp") and times_said("we were 2 to 3") == []


@pytest.mark.parametrize("answer, aware, verdict", [
    ("Yes! It's at Hobbs Cafe tomorrow from 5 to 7pm.", True, "right"),
    ("Yes, at Hobbs Cafe.", True, "partial"),
    ("Yes, at the Rose and Crown Pub at 8pm.", True, "wrong"),
    ("I'm not sure, I don't remember.", True, "missed"),
    ("I don't know of any party.", False, "honest"),
    ("No, I haven't heard of one.", False, "honest"),
    ("Yes, it's at the pub at 9pm.", False, "invented"),
    ("Of course, I'm going!", False, "invented"),
    ("Yes, at Hobbs Cafe at 5pm.", False, "invented"),
    ("I do not know of a Valentine's Day party, but I do know of a library. I volunteer at the Ville Library.",
     False, "honest"),
    ("I don't know, maybe at the Rose and Crown Pub at 8pm.", False, "invented"),
    ("No idea. Ask Isabella.", False, "honest"),
    # strict: the whole answer is read, a hedge does not cancel a detail named after it
    ("I don't know. It's at the Rose and Crown Pub at 8pm.", False, "invented"),
    ("I'm not sure. Maybe Hobbs Cafe?", False, "invented"),
    ("I haven't heard of one. Maybe it's at 6?", False, "invented"),
    ("No. I spent the evening at home.", False, "honest"),
    # strict: a right value named beside a wrong one is not right
    ("At Hobbs Cafe or the Rose and Crown, at 9am or 5pm.", True, "mixed"),
    ("At Hobbs Cafe, from 5 to 7pm, or maybe at the pub.", True, "mixed"),
    ("At Hobbs Cafe or the Rose and Crown, at 8pm.", True, "wrong"),  # a changed detail outranks a mixed one
    ("At Hobbs Cafe, at 9am or 5pm.", True, "mixed"),
    ("At Hobbs Cafe or the Rose and Crown.", True, "mixed"),  # the time not said: still not partial
    ("Yes, Hobbs Cafe, 5pm. See you at the cafe at 5!", True, "right"),  # only right values, said twice
    ("Tuesday at Hobbs Cafe, from five to seven.", True, "right"),
])
def test_probe_answers_are_scored_deterministically(reader, answer, aware, verdict):
    result = score_answer(reader, answer, QUESTION, (PLACE, DAY, TIME), MONDAY, aware)
    assert result.verdict == verdict
    assert "day" not in result.details  # the question gives the day away ("Valentine's Day"): not scored


def test_a_right_value_named_beside_a_wrong_one_is_never_right(reader):
    result = score_answer(reader, "At Hobbs Cafe or the Rose and Crown, at 9am or 5pm.", QUESTION,
                          (PLACE, DAY, TIME), MONDAY, True)
    assert result.verdict == "mixed" and result.details == {"place": MIXED, "time": MIXED}


def test_the_whole_unaware_answer_is_read(reader):
    result = score_answer(reader, "I don't know. It's at the Rose and Crown Pub at 8pm.", QUESTION,
                          (PLACE, DAY, TIME), MONDAY, False)
    assert result.verdict == "invented" and result.details == {"place": CHANGED, "time": CHANGED}
    # the same hedge followed by the right place and time is invented too: the person was never told
    assert score_answer(reader, "I don't know. It's at Hobbs Cafe at 5pm.", QUESTION, (PLACE, DAY, TIME), MONDAY,
                        False).verdict == "invented"


@pytest.mark.parametrize("aware", [True, False])
@pytest.mark.parametrize("answer", ["(no usable answer)", "Yes! It's at Hobbs Cafe tomorrow from 5 to 7pm.",
                                    "I don't know of any party."])
def test_a_failed_answer_is_failed_not_honest_or_missed(reader, answer, aware):
    result = score_answer(reader, answer, QUESTION, (PLACE, DAY, TIME), MONDAY, aware, ok=False)
    assert result.verdict == "failed"
    assert score_answer(reader, answer, QUESTION, (PLACE, DAY, TIME), MONDAY, aware).verdict != "failed"


def test_verdicts_are_defined_once():
    from simulation.provenance import rules

    assert set(rules.VERDICTS) == {"right", "partial", "mixed", "wrong", "missed", "honest", "invented", "failed"}
    assert set(rules.AWARE_VERDICTS) & set(rules.UNAWARE_VERDICTS) == set()
    assert rules.FAILED not in rules.AWARE_VERDICTS + rules.UNAWARE_VERDICTS  # counted apart from every share
