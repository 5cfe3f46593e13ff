"""Prompt rendering for rewards: this package's templates, with the evaluation's beside them.

The judge's system message is the evaluation judge's (``judge_system.j2``: instructions plus the
persona), and a peer's is the evaluation's role-play system message (``agent_system.j2``), so
every judgement about one persona shares one system message (a saved llama.cpp prefix state).
The same safety rules hold: scenes, lines, critiques and persona text are data inside delimited
blocks, and every value passes through ``neutralise`` so no text can forge a delimiter.
"""

from __future__ import annotations

from typing import Any

from simulation.evaluation.prompts import persona_context
from simulation.formats import templating
from simulation.scenario import Persona


def render(template: str, **context: Any) -> str:
    """Rewards' own templates, and the evaluation's (the judge and role-play system messages)."""
    return templating.render(("simulation.rewards", "simulation.evaluation"), template, **context)


def judge_messages(persona: Persona, template: str, **context: Any) -> list[dict[str, str]]:
    """The evaluation judge's system message about ``persona``, then one question."""
    ctx = persona_context(persona)
    return [{"role": "system", "content": render("judge_system.j2", **ctx)},
            {"role": "user", "content": render(template, **ctx, **context)}]


def peer_messages(persona: Persona, template: str, **context: Any) -> list[dict[str, str]]:
    """A town agent (critic or scorer) in character: its persona as system message, then one question."""
    ctx = persona_context(persona)
    return [{"role": "system", "content": render("agent_system.j2", **ctx)},
            {"role": "user", "content": render(template, **ctx, **context)}]
