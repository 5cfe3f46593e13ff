"""The director (``cognition.director``): at the top of a game hour it nudges the story beat furthest
behind, by a thought whispered to someone who could carry it and an offer they answer (go and find
the one who has not heard; go to the gathering), at most ``nudges_per_day`` a day; on a scripted
run its nudges are events and whispered memories, a yes sends the person out, and a run without it
has none."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import datetime

import pytest
from conftest import MINIMAL, step_run
from fake_mind import FakeMind

from simulation.agents import AgentState
from simulation.cognition.director import Director
from simulation.cognition.plan import plan_steps
from simulation.core import Happening, MemoryKind, Provenance, Source, Status
from simulation.rundb import connect_ro
from simulation.rundb.behaviour import behaviour
from simulation.scenario.story import Beat, Story

START = datetime(2023, 2, 13, 7, 0)


@pytest.fixture(scope="module")
def personas():
    from simulation.scenario import load

    return {rp.persona.id: rp for rp in load(MINIMAL).people}


def _mind(personas, story: Story, hour: int, minute: int = 0) -> FakeMind:
    """ann at the cafe, aware of the party (her own news, seeded); bob at home; cat (a copy of bob) at
    home; ann's ties: warm to cat, none to bob. The run started at 07:00 (10-minute ticks)."""
    ann, bob = personas["ann"], personas["bob"]
    cat = bob.persona.model_copy(update={"id": "cat", "name": "Cat Cooper"})
    people = {
        "ann": AgentState(id="ann", persona=ann.persona, home=ann.home, place="cafe", status=Status.IDLE),
        "bob": AgentState(id="bob", persona=bob.persona, home=bob.home, place="home_a", status=Status.IDLE),
        "cat": AgentState(id="cat", persona=cat, home=bob.home, place="home_a", status=Status.IDLE),
    }
    now = START.replace(hour=hour, minute=minute)
    for p in people.values():
        p.plan_day = now.date()  # each has planned the day (someone who has not is not asked)
    mind = FakeMind(people, now=now, tick=int((now - START).total_seconds() // 600),
                    aware_of={"party": {"ann"}}, facts={"party": ("party", "Ann is throwing a party at the cafe.")})
    mind.settings = dataclasses.replace(mind.settings, story=story)
    mind.social.seed("ann", "cat", "an old friend")
    mind.social.after_conversation("ann", "cat", 0.6, "an old friend")
    party = mind.remember("ann", MemoryKind.SEED, "Ann is throwing a party at the cafe.",
                          Provenance(Source.SEEDED, fact="party"))
    people["ann"].news.append(party.id)
    return mind


YES = {"go": lambda options, default: [1.0, 0.0]}
NO = {"go": lambda options, default: [0.0, 1.0]}


SPREAD = Beat(id="spread", fact="party", people="all", by="2023-02-13 08:30")


def test_a_lagging_reach_beat_gets_a_carrier_and_a_name(personas):
    """At 08:00 two of three should know by a steady pace to 08:30; one does: ann is told that the
    person she is closest to has not heard, and learns nothing new herself."""
    mind = _mind(personas, Story(beats=[SPREAD], director=True), hour=8)
    mind.run(Director())
    assert mind.whispered == [("ann", "Cat Cooper has not heard about the party yet.", None,
                               {"beat": "spread", "why": "cat has not heard it"})]
    thought = mind.memories("ann").nodes[-1]
    assert thought.provenance.source == "directed", "the director's words never count as awareness"
    assert len(mind.person("ann").news) == 1, "a reason to tell, not news of its own"
    assert [a.person for a in mind.asked if a.purpose == "go"] == ["ann"], "and an offer she answers"


def test_a_carrier_who_says_yes_goes_to_find_them_and_one_who_says_no_carries_on(personas):
    """The offer is the seek question about cat, where cat usually is: yes queues the rest of the hour
    looking for her at home_a (a seek event naming the beat); no leaves ann's hour alone."""
    went = _mind(personas, Story(beats=[SPREAD], director=True), hour=8)
    went.answers = dict(YES)
    went.person("ann").status = Status.ACTING  # busy with an activity: the errand replaces it
    went.run(Director())
    ann = went.person("ann")
    question = next(a for a in went.asked if a.purpose == "go").messages[-1]["content"]
    assert "Does Ann go there now to find Cat and tell them?" in question
    assert ann.seeking is not None and ann.seeking.person == "cat"
    assert [(s.place, s.minutes) for s in ann.steps] == [("home_a", 60)] and ann.status == Status.IDLE
    assert [(who, kind) for who, kind, _ in went.recorded] == [("ann", "seek")]
    stayed = _mind(personas, Story(beats=[SPREAD], director=True), hour=8)
    stayed.answers = dict(NO)
    stayed.run(Director())
    assert stayed.person("ann").seeking is None and not stayed.person("ann").steps and not stayed.recorded
    assert len(stayed.whispered) == 1, "the nudge was made either way"


def test_only_on_the_hour_and_not_past_the_days_limit(personas):
    director = Director()
    story = Story(beats=[SPREAD.model_copy(update={"by": datetime(2023, 2, 13, 11, 0)})], director=True,
                  nudges_per_day=1)  # behind at 09:00 (1.5 of 3 expected, 1 aware) and at 10:00 (2.25)
    for hour, minute in ((8, 10), (9, 0), (10, 0)):
        mind = _mind(personas, story, hour, minute)
        mind.places["park"] = "Park"
        mind.person("ann").place = "park"  # not where cat usually is at 09:00 (the cafe): a trip to make
        mind.run(director)
        assert len(mind.whispered) == (1 if (hour, minute) == (9, 0) else 0), (hour, minute)
    assert director.used == {"2023-02-13": 1}


def test_nobody_behind_schedule_and_the_director_off_make_no_nudge(personas):
    early = _mind(personas, Story(beats=[SPREAD], director=True), hour=7)  # nothing expected yet
    early.run(Director())
    off = _mind(personas, Story(beats=[SPREAD], director=False), hour=8)
    off.run(Director())
    assert early.whispered == [] and off.whispered == []


def test_a_fact_nobody_knows_is_whispered_to_the_best_connected(personas):
    mind = _mind(personas, Story(beats=[SPREAD], director=True), hour=8)
    mind.aware_of = {"party": set()}
    mind.run(Director())
    assert mind.whispered == [("ann", "Ann is throwing a party at the cafe.", "party",
                               {"beat": "spread", "why": "nobody in the town knows it"})]
    assert mind.memories("ann").nodes[-1].provenance.source == "whispered", "the fact itself, as a whisper"
    assert mind.person("ann").news


def test_a_gathering_offers_someone_elsewhere_to_go_inside_its_window(personas):
    """Before the window nobody is asked; in it, bob (the first free one elsewhere; ann is there, so one
    more is enough) gets the thought and the question, and on yes spends the rest of the hour at the
    cafe and the hours after it until the gathering ends (10:00-11:00), then his day goes on."""
    meet = Beat(id="meet", place="cafe", count=2, after="2023-02-13 09:00", by="2023-02-13 11:00")
    story = Story(beats=[meet], director=True)
    too_early = _mind(personas, story, hour=8)
    too_early.run(Director())
    mind = _mind(personas, story, hour=9)
    mind.answers = dict(YES)
    mind.run(Director())
    assert too_early.whispered == [] and too_early.asked == []
    assert [(who, text) for who, text, _, _ in mind.whispered] == [("bob", "Bob feels like going to Cafe now.")]
    question = next(a for a in mind.asked if a.purpose == "go").messages[-1]["content"]
    assert question.startswith("Does Bob go to Cafe now and stay until 11:00?")
    bob = mind.person("bob")
    assert [(s.place, s.minutes) for s in bob.steps] == [("cafe", 60)]
    assert {h: (b.activity, b.place) for h, b in bob.hours.items()} == \
        {9: ("spending time at Cafe", "cafe"), 10: ("spending time at Cafe", "cafe")}, \
        "his day resumes at 11:00, when the gathering is over"
    bob.replan = "looking at the cakes"  # a reaction later in the hour re-plans it: then the cafe again
    after = asyncio.run(plan_steps(bob, mind))[-1]
    assert (after.place, after.call_id) == ("cafe", bob.hours[9].call_id) and after.call_id is not None, \
        "the hour goes on at the cafe, tied to his yes"
    stayed = _mind(personas, story, hour=9)
    stayed.answers = dict(NO)
    stayed.run(Director())
    assert not stayed.person("bob").steps and 10 not in stayed.person("bob").hours


def test_a_gathering_past_bedtime_asks_until_bedtime_and_nobody_is_pulled_away_from_one(personas):
    """A gathering that goes on into the next day asks bob to stay until his bedtime, as the yes keeps;
    and once his hour is for the cafe, the director does not send him off on the news either."""
    meet = Beat(id="meet", place="cafe", count=2, after="2023-02-13 09:00", by="2023-02-14 11:00")
    spread = SPREAD.model_copy(update={"by": datetime(2023, 2, 13, 12, 0)})
    mind = _mind(personas, Story(beats=[meet], director=True), hour=9)
    mind.answers = dict(YES)
    mind.run(Director())
    bob = mind.person("bob")
    bedtime = bob.persona.routine.sleep.strftime("%H:%M")
    question = next(a for a in mind.asked if a.purpose == "go").messages[-1]["content"]
    assert question.startswith(f"Does Bob go to Cafe now and stay until {bedtime}?")
    assert max(bob.hours) == int(bedtime[:2]) - 1
    held = _mind(personas, Story(beats=[meet, spread], director=True), hour=10)
    held.person("ann").place = "park"
    held.places["park"] = "Park"
    held.person("ann").hours = {10: bob.hours[10]}  # ann's hour is for the cafe now
    held.run(Director())
    assert all(who != "ann" for who, _, _, _ in held.whispered), "not asked to carry the news away from it"


def test_a_gathering_asks_first_whoever_knows_what_is_on_there_and_says_so(personas):
    """bob comes first by id, but cat knows of the tasting at the cafe now: cat is asked, and the
    thought gives her reason, which is nothing new to her."""
    meet = Beat(id="meet", place="cafe", count=2, after="2023-02-13 09:00", by="2023-02-13 11:00")
    mind = _mind(personas, Story(beats=[meet], director=True), hour=9)
    tasting = Happening("tasting", "cafe", START.replace(hour=9), START.replace(hour=11), "cake tasting")
    mind.happenings = lambda person_id: [tasting] if person_id == "cat" else []
    mind.run(Director())
    assert [(who, text) for who, text, _, _ in mind.whispered] == \
        [("cat", "Cat feels like going to Cafe now, for the cake tasting.")]


def test_every_lagging_beat_gets_its_turn(personas):
    """The gathering is further behind than the news at 09:00 and is nudged first; at 10:00 both still
    lag, and the news, not yet nudged, has its turn."""
    meet = Beat(id="meet", place="cafe", count=3, after="2023-02-13 09:00", by="2023-02-13 12:00")
    spread = SPREAD.model_copy(update={"by": datetime(2023, 2, 13, 12, 0)})
    story = Story(beats=[spread, meet], director=True, nudges_per_day=1)
    director = Director()
    beats = []
    for hour in (9, 10):
        mind = _mind(personas, story, hour)
        mind.places["park"] = "Park"
        mind.person("ann").place = "park"
        director.used = {}  # one a day, two days' worth: the turn, not the limit, is under test
        mind.run(director)
        beats += [data["beat"] for _, _, _, data in mind.whispered]
    assert beats == ["meet", "spread"]


def test_an_hour_asks_as_many_as_each_beat_is_short_round_by_round(personas):
    """At 10:00 the gathering of bob and cat has nobody there (two short) and the news is one person
    behind its pace (1.8 of 3 expected, ann alone aware): the gathering, further behind, asks first,
    then the news has its turn (ann goes to find cat), then the gathering asks again; the day's limit
    stops them where it falls, and nobody is asked twice in one hour."""
    meet = Beat(id="meet", place="cafe", people=["bob", "cat"], after="2023-02-13 09:00", by="2023-02-13 12:00")
    spread = SPREAD.model_copy(update={"by": datetime(2023, 2, 13, 12, 0)})
    asked = {}
    for limit in (5, 2):
        mind = _mind(personas, Story(beats=[spread, meet], director=True, nudges_per_day=limit), hour=10)
        mind.places["park"] = "Park"
        mind.person("ann").place = "park"
        director = Director()
        mind.run(director)
        asked[limit] = [(who, data["beat"]) for who, _, _, data in mind.whispered]
        assert director.used == {"2023-02-13": len(asked[limit])}
    assert asked[5] == [("bob", "meet"), ("ann", "spread"), ("cat", "meet")]
    assert asked[2] == asked[5][:2]


def test_a_fact_nobody_knows_is_whispered_once_in_an_hour(personas):
    """Two behind, but the fact itself goes to one person: from then on someone knows it, and a carrier
    is asked at the next hour."""
    mind = _mind(personas, Story(beats=[SPREAD], director=True, nudges_per_day=5), hour=8)
    mind.aware_of = {"party": set()}
    mind.run(Director())
    assert len(mind.whispered) == 1


def test_nobody_asleep_or_in_the_crowd_is_nudged_and_a_reached_gathering_is_left_alone(personas):
    meet = Beat(id="meet", place="cafe", count=2, after="2023-02-13 08:00", by="2023-02-13 10:00")
    director = Director()
    mind = _mind(personas, Story(beats=[meet], director=True), hour=8)
    mind.person("bob").status = Status.SLEEPING
    mind.person("cat").crowd = True
    mind.run(director)
    assert mind.whispered == [], "bob is asleep and cat is of the background crowd"
    mind = _mind(personas, Story(beats=[meet], director=True), hour=8)
    mind.person("bob").place = "cafe"  # two at the cafe inside the window: reached
    mind.run(director)
    mind = _mind(personas, Story(beats=[meet], director=True), hour=9)  # bob has gone home again
    mind.run(director)
    assert mind.whispered == [] and director.reached == ["meet"]


def test_what_it_used_and_whom_it_nudged_survive_a_resume(personas):
    story = Story(beats=[SPREAD], director=True, nudges_per_day=2)
    first = Director()
    _mind(personas, story, hour=8).run(first)
    resumed = Director()
    resumed.restore(first.state())
    assert resumed.state() == first.state() == {"used": {"2023-02-13": 1}, "nudged": [["spread", "ann"]],
                                                "reached": []}
    mind = _mind(personas, story, hour=8)  # the same hour again: behind, and one nudge of two left
    mind.run(resumed)
    assert mind.whispered == [], "ann, the only one aware, was nudged for this beat already"


def _story_run(make_run, scripted, flagship, beat: Beat, director: bool, ticks: int):
    """A finished scripted run of the small flagship with one beat, the director on or off."""
    sc = flagship.scenario.model_copy(deep=True)
    sc.story = Story(beats=[beat], director=director)
    run = step_run(make_run(scripted, ticks=ticks, loaded=flagship.model_copy(update={"scenario": sc})))
    run.close()
    return run


def test_a_scripted_run_records_the_nudges(make_run, scripted, flagship):
    """The small flagship, scripted, with a beat that everyone knows of the party by 08:30 and the
    director on: at 08:00 the beat is behind, and the nudge is a ``nudge`` event and a whispered
    thought of an aware person, who is offered the errand (a ``go`` call) and, saying yes as the
    scripted backend does, sets out to find the one named (a ``seek`` event for the beat); the same
    run without the director has none."""
    everyone = Beat(id="everyone", fact="party", people="all", by="2023-02-13 08:30")
    runs = {director: _story_run(make_run, scripted, flagship, everyone, director, 7) for director in (True, False)}
    con = connect_ro(runs[True].run_dir / "run.db")
    nudges = con.execute("select sim_time, agent_id, text, data from events where run_id = ? and kind = 'nudge'",
                         [runs[True].run_id]).fetchall()
    whispered = con.execute("select agent_id, text from memories where run_id = ? and source = 'directed'",
                            [runs[True].run_id]).fetchall()
    read = con.execute("select count(*) from fact_memories f join memories m on m.id = f.memory_id "
                       "where m.source = 'directed'").fetchone()[0]
    metrics = behaviour(con, runs[True].run_id)
    offers = con.execute("select id, agent_id, sim_time from llm_calls where run_id = ? and purpose = 'go'",
                         [runs[True].run_id]).fetchall()
    trips = con.execute("select agent_id, sim_time, data from events where run_id = ? and kind = 'seek' "
                        "and json_extract(data, '$.beat') is not null", [runs[True].run_id]).fetchall()
    con.close()
    assert [(a, t) for _, a, t in offers] == [("isabella_rodriguez", "2023-02-13 08:00")]
    assert [(a, t, json.loads(d)["beat"], json.loads(d)["llm_call_id"]) for a, t, d in trips] == \
        [("isabella_rodriguez", "2023-02-13 08:00", "everyone", offers[0][0])]
    assert nudges[0][2].startswith(next(p.persona.name for p in flagship.people
                                        if p.persona.id == json.loads(trips[0][2])["other"]))
    assert [(t, a) for t, a, _, _ in nudges] == [("2023-02-13 08:00", "isabella_rodriguez")]
    assert nudges[0][2].endswith("has not heard about the Valentine's Day party yet.")
    assert [tuple(w) for w in whispered] == [(nudges[0][1], nudges[0][2])]
    assert metrics["story.nudges"] == 1
    assert read == 0, "the nudge names the party, but is not read as the person learning it"
    con = connect_ro(runs[False].run_dir / "run.db")
    assert con.execute("select count(*) from events where kind = 'nudge'").fetchone()[0] == 0
    con.close()


def test_a_scripted_gathering_is_reached_by_those_who_said_yes_and_stayed(make_run, scripted, flagship):
    """The small flagship, scripted (every offer answered yes), with a beat of two people at the library
    between 08:00 and 09:30: at 08:00 nobody is there and two are asked, both go, and on the next hour
    they are still there (the yes kept 09:00-09:30 for it), so the beat is reached; without the
    director only the one whose day takes her there is, and it is not."""
    gather = Beat(id="readers", place="ville_library", count=2, after="2023-02-13 08:00", by="2023-02-13 09:30")
    outcome = {}
    for director in (True, False):
        run = _story_run(make_run, scripted, flagship, gather, director, 16)
        con = connect_ro(run.run_dir / "run.db")
        asked = [a for (a,) in con.execute("select agent_id from llm_calls where run_id = ? and purpose = 'go' "
                                           "and sim_time = '2023-02-13 08:00' order by agent_id", [run.run_id])]
        at_nine = {a for (a,) in con.execute(
            "select agent_id from agent_states where run_id = ? and sim_time = '2023-02-13 09:10' "
            "and place = 'ville_library'", [run.run_id])}
        outcome[director] = (asked, at_nine, behaviour(con, run.run_id)["story.readers.reached"])
        con.close()
    asked, at_nine, reached = outcome[True]
    assert len(asked) == 2 and set(asked) <= at_nine, "both went, and were still there in the next hour"
    assert reached == 1.0
    assert outcome[False][0] == [] and outcome[False][2] == 0.0
    assert not set(asked) & outcome[False][1], "without the offer, their day takes them elsewhere"


def test_someone_who_said_they_would_stay_is_not_asked_to_go_and_find_someone(personas):
    """ann has news cat has not heard from her (the seek question's case), but her hour is one she
    agreed to spend at the park: the seek question is not asked; the same hour from her own plan, it is."""
    from simulation.cognition.seek import seek
    from simulation.core import HourBlock

    outcomes = {}
    for agreed in (7, None):
        mind = _mind(personas, Story(), hour=10)
        mind.places["park"] = "Park"
        ann = mind.person("ann")
        ann.place = "park"
        ann.hours = {10: HourBlock(10, "spending time at Park", "park", agreed)}
        asyncio.run(seek(ann, mind))
        outcomes[agreed] = [a.purpose for a in mind.asked]
    assert outcomes[7] == [] and "seek" in outcomes[None]
