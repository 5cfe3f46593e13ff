"""Prompt rendering for evaluations (jinja2 templates in ``templates/``).

Safety: persona text, run memories, generated questions and agents' answers are data. They
reach a prompt only inside a delimited block (``<persona>``, ``<response>``, ...) that the
surrounding instructions declare to be data, and every ``{{ value }}`` is passed through
``finalize``, which turns ``<`` and ``>`` into look-alike quotes, so no text can close a block
and write outside it. The answer format is the request's JSON schema, which no text can change.
"""

from __future__ import annotations

from typing import Any

from simulation.formats import templating
from simulation.scenario import Persona


def render(template: str, **context: Any) -> str:
    return templating.render(("simulation.evaluation",), template, **context)


def person_name(agent_id: str) -> str:
    """A readable name for a persona id we only know by id ('isabella_rodriguez' -> 'Isabella Rodriguez')."""
    return " ".join(part.capitalize() for part in agent_id.split("_"))


def persona_context(persona: Persona, memories: list[str] | None = None,
                    names: dict[str, str] | None = None) -> dict[str, Any]:
    """What the persona templates show. Big Five numbers are left out on purpose: they are the
    answer key of the bigfive suite."""
    names = names or {}
    return {
        "p": persona,
        "first": persona.name.split()[0],
        "relationships": [(names.get(k, person_name(k)), v) for k, v in persona.relationships.items()],
        "memories": list(persona.memories) + list(memories or []),
    }


def agent_messages(ctx: dict[str, Any], template: str, **more: Any) -> list[dict[str, str]]:
    """A fresh two-message context: the persona as system message, one question as user message."""
    return [{"role": "system", "content": render("agent_system.j2", **ctx)},
            {"role": "user", "content": render(template, **ctx, **more)}]


def judge_messages(template: str, **context: Any) -> list[dict[str, str]]:
    """The judge's instructions (and, when ``context`` has a persona, that persona) as system message.

    Every judgement about one persona then shares one system message, which the llama.cpp backend
    keeps evaluated (a saved prefix state), so only the question itself is read per call."""
    return [{"role": "system", "content": render("judge_system.j2", **context)},
            {"role": "user", "content": render(template, **context)}]
