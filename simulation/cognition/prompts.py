"""Prompt rendering (jinja2 templates in ``templates/``) into chat messages.

The system message is the agent's persona block and never changes during a run, so the
llama.cpp backend keeps it evaluated between an agent's calls.

Safety: persona and scenario text, and what the model wrote earlier (memories, plans,
dialogue), is data. It reaches a prompt only inside a tagged block (``<persona>``, ``<town>``,
``<situation>``, ``<memories>``) that the system message declares to be data, never
instructions, or JSON-encoded inside an ``Example:`` answer. Every ``{{ value }}`` passes
through ``neutralise``, so no inserted text can open or close a block. The answer format is
the request's JSON schema, built from code and place ids only, so no text can change it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

DATA_TAGS = ("persona", "town", "situation", "memories")
"""The blocks that hold data in cognition prompts."""


def neutralise(value: Any) -> Any:
    """Every rendered value: angle brackets become look-alikes (‹ ›), so no tag can be forged or closed."""
    if isinstance(value, str):
        return value.replace("<", "\u2039").replace(">", "\u203a")
    return value


@lru_cache(maxsize=1)
def _env() -> Environment:
    return Environment(
        loader=PackageLoader("simulation.cognition", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
        finalize=neutralise,
    )


def render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context).strip()


def messages(system: str, template: str, **context: Any) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": render(template, **context)}]
