"""Deciding: what a person who thinks this tick does next.

On waking, the day's plan (chosen from a menu, ``plan.daily_plan``; the background crowd's is
their usual day, asked of nobody: ``plan.usual_day``); on noticing something
(``me.focus``), a reaction — carry on, do something else now (which drops what was queued
for the hour), or start a conversation (a drawn choice: ``react``); and with nothing queued for
the hour, whether to go and find someone to tell them news (``seek``: a drawn choice, asked only
of a person with news someone they know has not heard from them), else the hour's activity (no
question). Someone who finds whom they set out to tell starts the conversation without a second
question. People who chose to talk open their
conversations together after everyone has decided (``finish``), in id order, so who gets to
talk to whom does not depend on which answer came back first; the opener's first line is said
in the converse phase that follows, as a move like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cognition.phase import Phase
from simulation.cognition.plan import daily_plan, plan_steps, usual_day
from simulation.cognition.react import REACT, TALK, react
from simulation.cognition.seek import seek
from simulation.core import EventKind, Status

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind


class Decide(Phase):
    name = "decide"
    reads = frozenset({"deciding"})

    def __init__(self) -> None:
        self.intents: dict[str, tuple[str, int | None]] = {}
        """Who wants to talk: initiator -> (the other, the llm_calls id that decided it)."""

    def select(self, mind: Mind) -> list[AgentState]:
        self.intents = {}
        return [mind.person(i) for i in mind.notes.deciding]

    async def run(self, me: AgentState, mind: Mind) -> None:
        if me.status == Status.WAKING:
            if me.crowd or not mind.settings.planning:
                usual_day(me, mind)
            else:
                await daily_plan(me, mind)
            me.status = Status.IDLE
        focus = me.focus
        if focus is not None:
            if focus.other is not None:
                me.stopped_for.append(mind.now)
            if focus.other is not None and focus.other == me.sought(mind.now):
                # found whom they set out to tell: the choice to talk was made then (cognition/seek.py)
                self.intents[me.id] = (focus.other, me.seeking.call_id if me.seeking else None)
                me.seeking = None
                me.steps.clear()  # the search is over: after the talk, the hour's own activity
                me.steps_key = None
                if me.status == Status.ACTING:
                    me.status, me.action = Status.IDLE, None
                return
            reaction = await react(me, mind, focus)
            if reaction.decision == TALK and focus.other is not None:
                self.intents[me.id] = (focus.other, reaction.call_id)
                return  # the hour's steps can wait until after the conversation
            if reaction.decision == REACT:
                mind.record(me, EventKind.REACTION, f"{me.persona.name}: {reaction.detail}",
                            {"event_id": focus.event.id if focus.event else None, "other": focus.other,
                             "llm_call_id": reaction.call_id})
                me.interrupt(reaction.detail)
        if me.status == Status.IDLE and not me.has_steps(mind.now) and not await seek(me, mind):
            await plan_steps(me, mind)

    def finish(self, mind: Mind) -> None:
        for initiator in sorted(self.intents):
            other, call_id = self.intents[initiator]
            mind.start_conversation(mind.person(initiator), mind.person(other), call_id)
