"""Reading a fact's details out of text (kept, lost, changed), and scoring probe answers with it."""

from __future__ import annotations

from datetime import date

import pytest

from simulation.provenance.details import CHANGED, KEPT, LOST, Detail, DetailReader, place_aliases, times_said
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
    assert "Rose and Crown Pub" in aliases["rose_and_crown"]
    assert not any(a.startswith("\x00") for a in aliases["okafor_house"])  # "house", "home": two places each


@pytest.mark.parametrize("text, place, day, time", [
    ("I'm throwing a party at Hobbs Cafe tomorrow from five to seven", KEPT, KEPT, KEPT),
    ("There's a party at her cafe on February 14, 5pm to 7pm", KEPT, KEPT, KEPT),
    ("Come to the party at the pub at 8pm on the 15th", CHANGED, CHANGED, CHANGED),
    ("Party at Hobbs on Tuesday at 6", KEPT, KEPT, KEPT),
    ("A Valentine’s Day party, starting at 17:00", LOST, KEPT, KEPT),
    ("There's a party somewhere, I think", LOST, LOST, LOST),
    ("The party is on Wednesday evening at the Town Square", CHANGED, CHANGED, LOST),
    ("from 4 to 6pm at the cafe", KEPT, LOST, KEPT),
    ("I have 2 to 3 people coming today", LOST, CHANGED, LOST),
])
def test_details_kept_lost_changed(reader, text, place, day, time):
    assert (reader.read(text, PLACE, MONDAY), reader.read(text, DAY, MONDAY), reader.read(text, TIME, MONDAY)) \
        == (place, day, time)


def test_tomorrow_and_today_depend_on_when_it_was_said(reader):
    assert reader.read("the party is tomorrow", DAY, MONDAY) == KEPT
    assert reader.read("the party is tomorrow", DAY, date(2023, 2, 14)) == CHANGED
    assert reader.read("the party is tonight", DAY, date(2023, 2, 14)) == KEPT
    assert reader.read("the party is tomorrow", DAY, None) == LOST


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
])
def test_probe_answers_are_scored_deterministically(reader, answer, aware, verdict):
    result = score_answer(reader, answer, QUESTION, (PLACE, DAY, TIME), MONDAY, aware)
    assert result.verdict == verdict
    assert "day" not in result.details  # the question gives the day away ("Valentine's Day"): not scored
