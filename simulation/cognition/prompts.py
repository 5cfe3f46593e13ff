"""Prompt rendering (jinja2 templates in ``templates/``) into chat messages.

The system message is the agent's persona block and never changes during a run, so the
llama.cpp backend keeps it evaluated between an agent's calls. Persona and scenario text
only ever appears inside the delimited ``<persona>`` block or as quoted data lines.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined


@lru_cache(maxsize=1)
def _env() -> Environment:
    return Environment(
        loader=PackageLoader("simulation.cognition", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
    )


def render(template: str, **context: Any) -> str:
    return _env().get_template(template).render(**context).strip()


def messages(system: str, template: str, **context: Any) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": render(template, **context)}]
