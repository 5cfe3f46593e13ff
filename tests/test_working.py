"""A person's working memory (``cognition.working``, ``cognition.live_context``): their questions
share a growing prefix, so the backend evaluates only what is new."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta

import pytest
from conftest import MINIMAL
from fake_mind import FakeMind

from simulation.agents import AgentState
from simulation.cognition import prompts
from simulation.cognition.context import context
from simulation.cognition.working import WORKING_LINES, WORKING_SHARE
from simulation.core import MemoryKind, Provenance, Source, Status
from simulation.llm.types import PIECE_BREAK, plain

MORNING = datetime(2023, 2, 13, 9, 0)


@pytest.fixture(scope="module")
def personas():
    from simulation.scenario import load

    return {rp.persona.id: rp for rp in load(MINIMAL).people}


def _mind(personas, live: bool) -> FakeMind:
    people = {pid: AgentState(id=pid, persona=rp.persona, home=rp.home, workplace=rp.workplace, place="cafe",
                              status=Status.IDLE, system_prompt=f"You are {rp.persona.name}.")
              for pid, rp in personas.items() if pid in ("ann", "bob")}
    mind = FakeMind(people, now=MORNING)
    mind.settings = dataclasses.replace(mind.settings, live_context=live)
    return mind


def _note(mind: FakeMind, text: str) -> int:
    return mind.remember("ann", MemoryKind.OBSERVATION, text, Provenance(Source.PERCEIVED), importance=3).id


def _ask(mind: FakeMind) -> list[dict[str, str]]:
    ann = mind.person("ann")
    ctx = asyncio.run(context(ann, mind, "anything", "react"))
    return prompts.messages(ann.system_prompt, "react.j2", **ctx, event="", other=None, options=["carry on", "talk"])


def test_off_each_question_shows_its_own_retrieval_in_the_situation(personas):
    mind = _mind(personas, live=False)
    _note(mind, "Ann saw the baker open up.")
    msgs = _ask(mind)
    assert len(msgs) == 3 and "Ann saw the baker open up." in msgs[1]["content"]
    assert mind.person("ann").working == []


def test_a_later_question_shares_the_earlier_text_and_adds_only_what_is_new(personas):
    """The working memory opens the situation message, one batch per earlier question, each
    ending in a piece break: the next question's message starts with the same text up to the last
    break, so the backend reuses it and evaluates only the new batch and the situation."""
    mind = _mind(personas, live=True)
    _note(mind, "Ann saw the baker open up.")
    _note(mind, "Ann bought bread.")
    first = _ask(mind)
    assert len(first) == 3  # system, working memory and situation, question
    assert first[1]["content"].count("<memories>") == 1 and first[1]["content"].count(PIECE_BREAK) == 1
    shown, _, situation = first[1]["content"].rpartition(PIECE_BREAK)
    assert "Ann bought bread." in shown and "Ann bought bread." not in situation
    mind.now += timedelta(minutes=10)
    _note(mind, "Ann heard the mill will close.")
    second = _ask(mind)
    assert second[0] == first[0] and second[1]["content"].startswith(shown + PIECE_BREAK)
    batch, _, _ = second[1]["content"][len(shown) + 1:].partition(PIECE_BREAK)
    assert "the mill will close" in batch and "Ann bought bread." not in batch, "a memory is shown once a day"
    mind.now += timedelta(minutes=10)
    third = _ask(mind)
    assert third[1]["content"].rpartition(PIECE_BREAK)[0] == second[1]["content"].rpartition(PIECE_BREAK)[0], \
        "nothing new: no new batch"
    assert PIECE_BREAK not in plain(third)[1]["content"], "no model ever reads the break"


def test_a_new_day_and_a_full_working_memory_start_afresh(personas):
    mind = _mind(personas, live=True)
    for i in range(WORKING_LINES):
        _note(mind, f"Ann noticed thing {i}.")
        _ask(mind)
    ann = mind.person("ann")
    assert sum(len(b) for b in ann.working) == WORKING_LINES
    _note(mind, "Ann noticed one thing too many.")
    _ask(mind)
    assert len(ann.working) == 1 and len(ann.working[0]) <= 5, "over the cap: this question's retrieval alone"
    mind.now += timedelta(days=1)
    _ask(mind)
    assert ann.working_day == mind.now.date() and len(ann.working) == 1


def test_the_working_memory_keeps_to_its_share_of_the_context_window(personas):
    """Long memories start it afresh before their lines pass ``WORKING_SHARE`` of the window, so a
    prompt still has room for the persona, the situation, the question and the answer."""
    mind = _mind(personas, live=True)
    ann = mind.person("ann")
    budget_chars = WORKING_SHARE * mind.settings.context_tokens * 3
    restarts = 0
    for i in range(30):
        _note(mind, f"Ann heard a long story number {i}: " + "the mill, the river and the old bridge, " * 4)
        before = len(ann.working)
        _ask(mind)
        restarts += len(ann.working) < before
        shown = sum(len(mind.memory(m).text) + 16 for batch in ann.working for m in batch)
        assert shown <= budget_chars
    assert restarts > 0


def test_the_working_memory_is_kept_with_the_person(personas):
    """It is part of the stored state, so a resumed run renders the same prompts."""
    mind = _mind(personas, live=True)
    _note(mind, "Ann saw the baker open up.")
    _ask(mind)
    ann = mind.person("ann")
    stored = AgentState.model_validate({**ann.model_dump(), "id": ann.id, "persona": ann.persona, "home": ann.home})
    assert stored.working == ann.working and stored.working_day == ann.working_day
