"""The cognition phases one by one, over a fake ``Mind`` (tests/fake_mind.py): no model, run.db,
embedder or LLM, so each test takes milliseconds and says exactly what "the model" answered."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import datetime

import pytest
from conftest import MINIMAL
from fake_mind import FakeMind

from simulation.agents import AgentState
from simulation.cognition import DEFAULT, PHASES, Phase, default_phases, phase_class
from simulation.cognition.converse import Converse, Recap
from simulation.cognition.decide import Decide
from simulation.cognition.importance import RateImportance
from simulation.cognition.perceive import Perceive
from simulation.cognition.reflect import Reflect
from simulation.core import Action, Aim, MemoryKind, Move, PlanItem, Provenance, Source, Status
from simulation.llm.types import asked
from simulation.world.conversations import Conversation

SEEN = Provenance(Source.PERCEIVED)

MORNING = datetime(2023, 2, 13, 9, 0)


@pytest.fixture(scope="module")
def personas():
    from simulation.scenario import load

    return {rp.persona.id: rp for rp in load(MINIMAL).people}


def person(rp, **state) -> AgentState:
    return AgentState(id=rp.persona.id, persona=rp.persona, home=rp.home, workplace=rp.workplace,
                      place=state.pop("place", "cafe"), system_prompt=f"You are {rp.persona.name}.", **state)


@pytest.fixture
def mind(personas) -> FakeMind:
    ann = person(personas["ann"], status=Status.IDLE)
    bob = person(personas["bob"], status=Status.IDLE)
    return FakeMind({"ann": ann, "bob": bob}, now=MORNING)


def test_the_default_list_is_todays_tick_in_order():
    assert [p.name for p in default_phases()] == list(DEFAULT) == [
        "perceive", "importance", "decide", "converse", "recap", "reflect"]
    assert set(PHASES) == {*DEFAULT, "director", "mood"}  # run when a scenario asks for them


def test_a_story_with_a_director_runs_it_first(flagship):
    from simulation.cognition.director import Director
    from simulation.cognition.phases import scenario_phases
    from simulation.scenario.story import Story

    sc = flagship.scenario.model_copy(update={"story": Story(director=True)})
    directed = flagship.model_copy(update={"scenario": sc})
    assert [p.name for p in scenario_phases(None, directed)] == ["director", *DEFAULT]
    assert [p.name for p in scenario_phases(["perceive", "decide", "director"], directed)] == \
        ["perceive", "decide", "director"], "a list that names it keeps it where it is"
    assert not any(isinstance(p, Director) for p in scenario_phases(None, flagship))
    moody = flagship.model_copy(update={"scenario": sc.model_copy(update={
        "cognition": sc.cognition.model_copy(update={"moods": True})})})
    assert [p.name for p in scenario_phases(None, moody)] == ["director", "perceive", "importance", "decide",
                                                               "converse", "recap", "mood", "reflect"]


def test_perceive_notes_who_is_here_and_who_thinks(mind):
    ran = mind.run(Perceive())
    assert ran == ["ann", "bob"]
    ann = mind.person("ann")
    assert ann.perceived.people == ["bob"]
    assert [n.text for n in mind.memories("ann").nodes] == ["Bob Brown is looking around at Cafe"]
    assert mind.memories("ann").nodes[0].importance == 1.0, "someone idle is trivial: no rating needed"
    assert ann.focus is not None and ann.focus.other == "bob"
    assert mind.notes.deciding == ["ann", "bob"]


def test_perceive_skips_the_sleeping_and_a_busy_person_does_not_think(mind):
    mind.person("bob").status = Status.SLEEPING
    ann = mind.person("ann")
    ann.status = Status.ACTING
    ann.action = Action("baking", "cafe", 30, ends=datetime(2023, 2, 13, 9, 30))
    mind.run(Perceive())
    assert ann.perceived.people == [] and mind.notes.deciding == []
    assert not mind.asked


def test_importance_rates_each_of_a_thinking_persons_memories_by_probability(mind):
    for i in range(4):
        mind.remember("ann", MemoryKind.OBSERVATION, f"thing {i}", SEEN)
    mind.notes.deciding = ["ann", "bob"]
    ratings = iter([9.0, 1.0, 5.5, 5.0])
    mind.answers["importance"] = lambda options, default: next(ratings)
    assert mind.run(RateImportance()) == ["ann"], "bob has nothing to rate"
    assert [a.purpose for a in mind.asked] == ["importance"] * 4, "one scored question per memory"
    assert ["<memory>\nthing 0\n</memory>" in a.messages[-1]["content"] for a in mind.asked] == [
        True, False, False, False]
    assert [n.importance for n in mind.memories("ann").nodes] == [9, 1, 5.5, 5]
    assert not mind.memories("ann").unrated


def test_importance_waits_until_enough_memories_are_unrated(mind):
    mind.remember("ann", MemoryKind.OBSERVATION, "one thing", SEEN)
    mind.notes.deciding = ["ann"]
    assert mind.run(RateImportance()) == [] and not mind.asked


def test_a_waking_person_chooses_the_day_from_a_menu_then_does_the_hours_activity(mind):
    from simulation.core import Happening

    ann = mind.person("ann")
    ann.status = Status.WAKING
    mind.notes.deciding = ["ann"]
    mind.known = [Happening("party", "cafe", datetime(2023, 2, 13, 17), datetime(2023, 2, 13, 19))]
    seen = {}

    def plan(schema, default):
        seen["numbers"] = schema.model_json_schema()["$defs"]["PlanChoice"]["properties"]["choice"]["enum"]
        seen["default"] = default
        return {"plan": [{"hour": 9, "choice": number["resting at home (Home A)"]},
                         {"hour": 17, "choice": number["going to the party at Cafe (usually 17:00)"]}]}

    number = {}
    mind.answers["plan"] = plan
    original = mind.ask

    async def ask(me, messages, *args, **kw):  # read the numbered menu off the prompt first
        import re

        number.update({label: int(n) for n, label in re.findall(r"^(\d+)\. (.+)$", messages[-1]["content"], re.M)})
        return await original(me, messages, *args, **kw)

    mind.ask = ask
    mind.run(Decide())
    assert [a.purpose for a in mind.asked] == ["plan"], "the hours and their steps need no question"
    assert "resting at home (Home A)" in number and seen["numbers"] == list(range(1, len(number) + 1))
    assert [(i.hour, i.activity, i.place) for i in ann.plan] == [
        (9, "resting at home", "home_a"), (10, "taking a walk", "cafe"), (17, "going to the party at Cafe", "cafe"),
        (19, "having dinner and relaxing", "home_a")], "the usual day with the chosen changes in it"
    assert ann.status == Status.IDLE and ann.hours[9].activity == "resting at home"
    assert [(a.text, a.place, a.minutes) for a in ann.steps] == [("resting at home", "home_a", 60)]
    assert mind.plans and mind.plans[0][2] is True
    assert any(n.kind == "plan" for n in mind.memories("ann").nodes)
    assert [(i["hour"], i["choice"]) for i in seen["default"].model_dump()["plan"]][0][0] == 9, \
        "the default is the usual day, from now"
    assert "going to the party at Cafe (usually 17:00)" in number


def test_choosing_to_talk_opens_a_conversation_after_everyone_decided(mind):
    mind.run(Perceive())
    mind.answers["react"] = mind.choosing("start a conversation")
    mind.run(Decide())
    assert [c.participants for c in mind.open_conversations()] == [("ann", "bob")], \
        "both wanted to talk: the first in id order opens, the other is no longer free"
    conv = mind.open_conversations()[0]
    assert conv.lines == [] and conv.next_speaker == "ann", "the opener speaks first, in the converse phase"
    assert mind.person("ann").status == mind.person("bob").status == Status.TALKING
    prompt = mind.asked[0].messages[-1]["content"]
    assert "Example" not in prompt and "start a conversation with Bob" in prompt, "a choice, with no answer shown"
    mind.answers["aim"] = mind.choosing("greet")
    mind.answers["utterance"] = lambda schema, default: {"say": "Morning, Bob! Fresh bread today."}
    mind.run(Converse())
    assert conv.lines == [("ann", "Morning, Bob! Fresh bread today.")] and conv.moves[0].aim == Aim.GREET


def test_the_reaction_is_drawn_from_the_models_probabilities_with_the_questions_seed(mind):
    from simulation.cognition.react import LABELS, react
    from simulation.llm.client import Rating

    mind.run(Perceive())
    ann = mind.person("ann")
    listed: list[list[str]] = []
    seed = 0

    async def rating(me, messages, options, values, *, default, purpose):
        listed.append(re.findall(r"^\d+\. (.*)$", messages[-1]["content"], re.MULTILINE))
        return Rating(1.0, [0.2, 0.5, 0.3], True, call_id=1, seed=seed)

    mind.ask_rating = rating
    mind.answers["react"] = lambda schema, default: {"detail": "helping Bob carry flour"}

    def decide(s: int) -> str:
        nonlocal seed
        seed = s
        return asyncio.run(react(ann, mind, ann.focus)).decision

    assert {decide(s) for s in range(40)} == {"continue", "react", "talk"}, "each choice falls to some seed"
    assert len({decide(7) for _ in range(3)}) == 1, "one seed, one draw: a run replays"
    mind.settings = dataclasses.replace(mind.settings, choices="argmax")
    decision = decide(7)
    assert listed[-1][1].startswith(LABELS[decision]), "argmax takes the most probable option"


def test_the_talk_option_names_untold_news_and_an_outgoing_person_talks_more_often(mind):
    """A reason to talk is part of the choice, and the person's lean (extraversion, the tie) scales
    the odds the model gives it (cognition.sociability): over many seeds an outgoing Ann stops to
    talk more often than a reserved one, from the same flat probabilities."""
    from simulation.cognition.react import react
    from simulation.llm.client import Rating

    mind.run(Perceive())
    ann = mind.person("ann")
    news = mind.remember("ann", MemoryKind.THOUGHT, "The bakery burned down last night.",
                         Provenance(Source.WHISPERED), importance=8)
    ann.news.append(news.id)
    listed: list[list[str]] = []
    seed = 0

    async def rating(me, messages, options, values, *, default, purpose):
        listed.append(re.findall(r"^\d+\. (.*)$", messages[-1]["content"], re.MULTILINE))
        return Rating(2.0, [1 / 3] * 3, True, call_id=1, seed=seed)

    mind.ask_rating = rating
    mind.answers["react"] = lambda schema, default: {"detail": "tidying the counter"}

    def talks(extraversion: float) -> int:
        nonlocal seed
        ann.persona = ann.persona.model_copy(update={"big_five": ann.persona.big_five.model_copy(
            update={"extraversion": extraversion})})
        count = 0
        for seed in range(200):
            count += asyncio.run(react(ann, mind, ann.focus)).decision == "talk"
        return count

    outgoing, reserved = talks(0.95), talks(0.05)
    assert "start a conversation with Bob about this: The bakery burned down last night." in listed[0]
    assert outgoing > 1.5 * reserved, (outgoing, reserved)
    mind.settings = dataclasses.replace(mind.settings, talk_prior=0.0)
    assert talks(0.95) == talks(0.05), "without the lean, only the model's probabilities count"


def test_reacting_to_something_else_takes_half_an_hour_then_the_hour_goes_on(mind):
    mind.run(Perceive())
    ann = mind.person("ann")
    ann.steps, ann.steps_key = [Action("sweeping", "cafe", 20)], (MORNING.date(), 9)
    mind.answers["react"] = lambda asked, default: ({"detail": "helping Bob carry flour"} if isinstance(asked, type)
                                                    else mind.choosing("stop and")(asked, default))
    mind.notes.deciding = ["ann"]
    mind.run(Decide())
    assert ("ann", "reaction", "Ann Archer: helping Bob carry flour") in mind.recorded
    assert [a.purpose for a in mind.asked] == ["react", "react"], "the choice, what instead; re-planned unasked"
    assert [(a.text, a.place, a.minutes) for a in ann.steps] == [
        ("helping Bob carry flour", "cafe", 30), ("taking it easy", "cafe", 30)]


def conversation(mind: FakeMind) -> Conversation:
    ann, bob = mind.person("ann"), mind.person("bob")
    conv = mind.start_conversation(ann, bob, None)
    mind.say(conv, ann, "Hello Bob!", None, Move(Aim.GREET))
    conv.next_speaker = "bob"
    return conv


def test_converse_gives_the_next_speaker_a_move_and_a_line_and_ends_on_goodbye(mind):
    mind.settings = dataclasses.replace(mind.settings, max_conversation_turns=8)
    mind.person("bob").plan = [PlanItem(hour=10, activity="baking bread", place="cafe")]
    conv = conversation(mind)
    mind.answers["aim"] = mind.choosing("greet")
    mind.answers["utterance"] = lambda schema, default: {"say": "Hi Ann, the usual please."}
    assert mind.run(Converse()) == ["bob"]
    assert [a.purpose for a in mind.asked] == ["aim", "utterance"], "the move is chosen, then the words"
    assert "1. " in mind.asked[0].messages[-1]["content"] and "greet Ann" in mind.asked[0].messages[-1]["content"]
    assert "- Ann greeted Bob." in asked(mind.asked[1].messages), "the conversation so far, as moves"
    assert "Now Bob greets Ann." in mind.asked[1].messages[-1]["content"]
    assert conv.lines[-1] == ("bob", "Hi Ann, the usual please.") and conv.next_speaker == "ann"
    assert [m.aim for m in conv.moves] == [Aim.GREET, Aim.GREET]
    assert mind.notes.talking == ["ann", "bob"] and mind.notes.conversations == 1
    mind.answers["aim"] = mind.choosing("ask")
    mind.answers["utterance"] = lambda schema, default: {"say": "Busy day ahead of you?"}
    mind.run(Converse())
    assert conv.moves[-1] == Move(Aim.ASK, "plans")
    mind.answers["utterance"] = lambda schema, default: {"say": "Baking all morning, then deliveries."}
    mind.run(Converse())
    assert conv.moves[-1].aim == Aim.ANSWER and "Bob's plans" in conv.moves[-1].topic, "a question is answered"
    mind.answers["aim"] = mind.choosing("say goodbye")
    mind.answers["utterance"] = lambda schema, default: {"say": "Here you go, see you tomorrow."}
    mind.run(Converse())
    assert conv.ended_reason == "goodbye" and not mind.open_conversations()
    assert conv.moves[-1].aim == Aim.END


def test_converse_ends_at_the_turn_limit_with_a_goodbye(mind):
    for pid in ("ann", "bob"):
        news = mind.remember(pid, MemoryKind.THOUGHT, "The market opens at noon.", Provenance(Source.WHISPERED))
        mind.person(pid).news.append(news.id)
    conv = conversation(mind)
    lines = iter(["Two", "Three", "Four", "Five"])
    mind.answers["aim"] = mind.choosing("greet", "reply", "tell")
    mind.answers["utterance"] = lambda schema, default: {"say": f"Line {next(lines)}: the market opens at noon!"}
    while mind.open_conversations():
        mind.run(Converse())
    assert conv.turns == mind.settings.max_conversation_turns and conv.ended_reason == "turn limit"
    assert conv.moves[-1].aim == Aim.END, "the last line the limit allows is a goodbye"


def test_a_repeated_line_is_not_said(mind):
    conv = conversation(mind)
    mind.answers["aim"] = mind.choosing("greet")
    mind.answers["utterance"] = lambda schema, default: {"say": "Hello Bob!"}
    mind.run(Converse())
    assert conv.lines[-1][1].startswith("Sorry Ann"), "the echo is rejected: the safe default ends it"
    assert conv.moves[-1].aim == Aim.END and conv.ended_reason == "goodbye"


def test_a_line_that_does_not_do_its_move_is_said_as_a_reply(mind):
    conv = conversation(mind)
    mind.answers["aim"] = mind.choosing("ask")
    mind.answers["utterance"] = lambda schema, default: {"say": "Lovely weather."}
    mind.run(Converse())
    assert conv.lines[-1][1] == "Lovely weather." and conv.moves[-1].aim == Aim.REPLY, \
        "a question without a question mark asks nothing: it is a reply"
    assert conv.ended_reason is None


def test_recap_both_sides_remember_and_the_tie_changes(mind):
    conv = conversation(mind)
    mind.end_conversation(conv, "goodbye")
    mind.answers["recap"] = lambda schema, default: {"summary": "We talked about bread.", "view": "Friendly.",
                                                    "feeling": 5, "importance": 6}
    assert mind.run(Recap()) == ["ann", "bob"]
    for pid, other in (("ann", "bob"), ("bob", "ann")):
        last = mind.memories(pid).nodes[-1]
        assert last.kind == "conversation" and "We talked about bread." in last.text and last.importance == 6
        tie = mind.tie(pid, other)
        assert tie is not None and tie.view == "Friendly." and tie.sentiment > 0
    assert mind.run(Recap()) == [], "each ended conversation is recapped once"


def test_reflect_is_due_past_the_threshold_for_those_who_thought(mind):
    for i in range(5):
        mind.remember("ann", MemoryKind.OBSERVATION, f"important thing {i}", SEEN, importance=8)
        mind.remember("bob", MemoryKind.OBSERVATION, f"important thing {i}", SEEN, importance=8)
    mind.notes.deciding = ["ann"]
    mind.answers["questions"] = lambda schema, default: {"questions": ["What?", "Why?", "Who?"]}
    mind.answers["insights"] = lambda schema, default: {"insights": [{"insight": "Things matter.", "evidence": [1]}]}
    assert mind.run(Reflect()) == ["ann"], "bob did not think this tick"
    made = [n for n in mind.memories("ann").nodes if n.kind == "reflection"]
    assert len(made) == 3 and all(n.depth == 1 and n.evidence for n in made)
    assert mind.memories("ann").since_reflection == 0
    assert mind.recorded[-1][:2] == ("ann", "reflection")


def test_a_phase_is_named_by_the_scenario_or_imported():
    assert phase_class("reflect") is Reflect
    assert phase_class("simulation.cognition.reflect:Reflect") is Reflect
    for bad, why in (("dream", "unknown phase"), ("simulation.nowhere:X", "cannot import"),
                     ("simulation.core:Action", "not a Phase")):
        with pytest.raises(ValueError, match=why):
            phase_class(bad)


class Gossip(Phase):
    """A phase of one's own: everyone at the cafe thinks of the news (no LLM)."""

    name = "gossip"

    def due(self, me, mind):
        return me.place == "cafe" and me.status != Status.SLEEPING

    async def run(self, me, mind):
        mind.remember(me.id, MemoryKind.THOUGHT, "There is a rumour about a party.", Provenance(Source.WHISPERED))


def test_a_phase_of_ones_own_runs_over_the_fake(mind):
    assert mind.run(Gossip()) == ["ann", "bob"]
    assert mind.memories("bob").nodes[-1].text == "There is a rumour about a party."


def test_chosen_changes_go_into_the_usual_day_and_the_usual_day_resumes_after_them():
    from simulation.cognition.menu import Option
    from simulation.cognition.plan import day_with_changes

    usual = [PlanItem(hour=7, activity="breakfast", place="home"), PlanItem(hour=9, activity="work", place="shop"),
             PlanItem(hour=18, activity="dinner", place="home")]
    walk = Option("a walk in the park", "park", None, "a walk in the park")
    party = Option("going to the party at Cafe", "cafe", 17, "going to the party at Cafe", until=19)
    breakfast = Option("breakfast", "home", 7, "breakfast")
    day = day_with_changes(usual, [(21, breakfast), (10, walk), (3, party), (12, walk)], bed=22)
    assert [(i.hour, i.activity) for i in day] == [
        (7, "breakfast"), (9, "work"), (10, "a walk in the park"), (11, "work"), (12, "a walk in the park"),
        (13, "work"), (17, "going to the party at Cafe"), (19, "dinner")], \
        "a habit stays at its hour; a happening at its own hour until it is over; the usual day resumes"
    assert day_with_changes(usual, [(23, walk), (5, walk)], bed=22) == usual, "nothing after bedtime or before now"


def test_the_routine_plan_follows_the_persons_habits(personas):
    from simulation.cognition.plan import routine_plan
    from simulation.formats.persona import Routine

    rp = personas["ann"]
    habits = Routine.model_validate({
        "wake": "07:00", "sleep": "22:00", "day": [
            {"at": "07:00", "activity": "breakfast at the cafe", "place": "cafe"},
            {"at": "09:00", "activity": "working", "place": "work"},
            {"at": "18:00", "activity": "drinks", "place": "pub"},
            {"at": "21:00", "activity": "reading in bed", "place": "home"},
            {"at": "23:00", "activity": "late show", "place": "home"}]})
    me = AgentState(id="ann", persona=rp.persona.model_copy(update={"routine": habits}), home=rp.home,
                    workplace="office", place=rp.home, system_prompt="You are Ann.")
    plan = routine_plan(me, 10, "square")
    assert [(i.hour, i.activity, i.place) for i in plan] == [
        (10, "working", "office"), (18, "drinks", "pub"), (21, "reading in bed", me.home)], \
        "the habit in force starts now; work and home are the person's own; nothing after bedtime"
    me.workplace = None
    assert routine_plan(me, 7, "square")[1].place == "square", "no workplace: work happens at the hub"


def test_a_person_stops_for_someone_at_most_reactions_per_hour_times_then_again_next_hour(mind):
    from simulation.cognition.perceive import focus

    mind.settings = dataclasses.replace(mind.settings, reactions_per_hour=2)
    ann = mind.person("ann")
    mind.answers["react"] = mind.choosing("carry on")
    for minute in (0, 10, 20):
        mind.now = MORNING.replace(minute=minute)
        ann.last_seen.clear()  # someone new each tick, as in a crowded place
        mind.run(Perceive())
        mind.run(Decide())
    assert [a.purpose for a in mind.asked if a.person == "ann"].count("react") == 2, "the third stop is over the cap"
    assert ann.stopped_for == [MORNING, MORNING.replace(minute=10)]
    mind.now = MORNING.replace(hour=10)
    ann.last_seen.clear()
    mind.run(Perceive())
    assert ann.focus is not None and ann.focus.other == "bob", "a new hour, a new allowance"
    mind.run(Decide())
    assert ann.stopped_for == [MORNING.replace(hour=10)], "last hour's stops are forgotten"
