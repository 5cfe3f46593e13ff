"""Prompt rendering for rewards: this package's templates, with the evaluation's beside them.

The judge's system message is the evaluation judge's (``judge_system.j2``: instructions plus the
persona), and a peer's is the evaluation's role-play system message (``agent_system.j2``), so
every judgement about one persona shares one system message (a saved llama.cpp prefix state).
The same safety rules hold: scenes, lines, critiques and persona text are data inside delimited
blocks, and every value passes through ``neutralise`` so no text can forge a delimiter.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

from simulation.evaluation.prompts import neutralise, persona_context
from simulation.scenario import Persona


@lru_cache(maxsize=1)
def _env() -> Environment:
    loader = ChoiceLoader([PackageLoader("simulation.rewards", "templates"),
                           PackageLoader("simulation.evaluation", "templates")])
    return Environment(loader=loader, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                       autoescape=False, finalize=neutralise)


def render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context).strip()


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
