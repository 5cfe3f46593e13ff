"""Reacting to what a person notices (someone free to talk, a new event at their place).

Three choices, as in Generative Agents: carry on with the plan, react (do something else now,
which re-plans the rest of the hour from the current time), or start a conversation. The choice
is a scored one, like a conversation's move (``converse.choose_move``): the options are listed
in an order shuffled per person and moment, the model's probabilities over their numbers are
read, calibrated (``cognition.calibrate``), and the talk option's odds are scaled by the
person's lean to talk to this one (``cognition.sociability``: extraversion, whether they know
and like them); the choice is drawn with the question's own seed (``converse.draw``; the most
probable one under ``cognition.choices: argmax``). The talk option names the news the person
has not yet told the other, if any: a reason to talk is part of the choice. The prompt shows no example answer, so
the decision is the model's, not a copy of the prompt's; two seeds of a run can make different
people talk.

Only a reaction asks a second question: what the person does instead (free text). Someone who
chose to talk says nothing yet: their opening line is the conversation's first move, chosen
from what they have to offer (greet, share news, invite, ask) in the converse phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.aims import news_text, untold_news
from simulation.cognition.context import context
from simulation.cognition.converse import check_line, choose_number, shuffled
from simulation.cognition.schemas import ReactDetail, clip
from simulation.cognition.sociability import talk_odds
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
    """The llm_calls row that decided (the detail's, for a reaction)."""


LABELS = {CONTINUE: "carry on", TALK: "start a conversation with", REACT: "stop and"}
"""How each choice's words begin on the menu (what a test double recognises an option by)."""


REASON_CHARS = 120
"""How much of the news a person would bring up is shown with the talk option."""


def options(other_first: str | None, doing: str, event: bool, reason: str = "") -> dict[str, str]:
    """The choices as the person's menu lists them (decision -> its words); ``reason``: the news
    the person has not yet told the other, which the talk option names ("... about this: ...")."""
    out = {CONTINUE: f"{LABELS[CONTINUE]} {doing}" if doing else f"{LABELS[CONTINUE]} with the plan"}
    if other_first is not None:
        out[TALK] = f"{LABELS[TALK]} {other_first}" + (f" about this: {reason}" if reason else "")
    out[REACT] = f"{LABELS[REACT]} respond to what is happening" if event and other_first is None else \
        f"{LABELS[REACT]} do something else now"
    return out


async def react(me: AgentState, mind: Mind, focus: Focus) -> Reaction:
    other = mind.person(focus.other) if focus.other is not None else None
    event = focus.event
    if other is not None:
        query = f"{other.persona.name} {mind.doing(other)}"
    else:
        query = event.text if event else ""
    if event is not None:
        query = f"{event.text} {query}".strip()
    ctx = await context(me, mind, query, Purpose.REACT)
    tie = mind.tie(me.id, other.id) if other else None
    situation = dict(
        ctx, event=event.text if event else "", other=other.persona if other else None,
        other_first=other.first_name if other else "", other_doing=mind.doing(other) if other else "",
        relationship=tie.view if tie else "",
    )
    news = untold_news(me, mind, other.id) if other else []
    reason = clip(news_text(news[0], mind), REASON_CHARS) if news else ""
    menu = options(other.first_name if other else None, ctx["doing"], event is not None, reason)
    decisions = list(menu)
    order = shuffled(len(decisions), f"react/{me.id}/{mind.now.isoformat()}/{focus.other or ''}")
    shown = [decisions[i] for i in order]
    msgs = prompts.messages(me.system_prompt, "react.j2", **situation, options=[menu[d] for d in shown])
    lean = talk_odds(me.persona.big_five, tie, mind.settings.talk_prior) if other else 1.0
    pick, call_id = await choose_number(me, mind, msgs, len(shown), default=shown.index(CONTINUE) + 1,
                                        purpose=Purpose.REACT, template="react.j2",
                                        factors=[lean if d == TALK else 1.0 for d in shown])
    decision = shown[pick]
    if decision != REACT:
        return Reaction(decision, "", call_id)
    msgs = prompts.messages(me.system_prompt, "react_detail.j2", **situation)
    default = ReactDetail.model_construct(detail="")  # unused: without a usable answer the plan goes on
    answer = await mind.ask(me, msgs, ReactDetail, default=default, purpose=Purpose.REACT, max_tokens=48,
                            check=lambda v: check_line(v.detail, []))
    if not answer.ok:  # nothing usable to do instead: the plan goes on
        return Reaction(CONTINUE, "", answer.call_id)
    return Reaction(REACT, answer.value.detail.strip(), answer.call_id)
