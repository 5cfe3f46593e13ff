"""Reacting to what a person notices (someone free to talk, a new event at their place).

Three choices, as in Generative Agents: carry on with the plan, react (do something else
now, which re-plans the rest of the hour from the current time), or start a conversation
(the answer's detail is the opening line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import context
from simulation.cognition.converse import check_line
from simulation.cognition.schemas import clip, react_model
from simulation.core import Focus, Purpose

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

CONTINUE, REACT, TALK = "continue", "react", "talk"


@dataclass
class Reaction:
    decision: str
    detail: str
    call_id: int | None


def _salutation(hour: int) -> str:
    return "Good morning" if hour < 12 else "Good afternoon" if hour < 18 else "Good evening"


async def react(me: AgentState, mind: Mind, focus: Focus) -> Reaction:
    other = mind.person(focus.other) if focus.other is not None else None
    event = focus.event
    model = react_model(other is not None)
    if other is not None:
        example = model(decision=TALK, detail=clip(f"{_salutation(mind.now.hour)}, {other.first_name}!", 120))
        query = f"{other.persona.name} {mind.doing(other)}"
    else:
        example = model(decision=CONTINUE, detail="")
        query = event.text if event else ""
    if event is not None:
        query = f"{event.text} {query}".strip()
    ctx = await context(me, mind, query, Purpose.REACT)
    tie = mind.tie(me.id, other.id) if other else None
    msgs = prompts.messages(
        me.system_prompt, "react.j2", **ctx, event=event.text if event else "",
        other=other.persona if other else None, other_first=other.first_name if other else "",
        other_doing=mind.doing(other) if other else "", relationship=tie.view if tie else "",
        example=example.model_dump_json(),
    )
    answer = await mind.ask(me, msgs, model, default=model(decision=CONTINUE, detail=""), purpose=Purpose.REACT,
                            max_tokens=64,
                            check=lambda v: check_line(v.detail, []) if v.decision in (TALK, REACT) else None)
    value = answer.value
    return Reaction(value.decision, value.detail.strip(), answer.call_id)
