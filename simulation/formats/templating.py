"""The one way prompts are rendered: jinja2 templates shipped in packages, every value neutralised.

Cognition, evaluation and rewards each keep their templates next to their code; they share
this environment so that the safety rule (no inserted text can open or close a data block)
and the whitespace rules are the same for every prompt the engine sends.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined


def neutralise(value: Any) -> Any:
    """Every rendered value: angle brackets become look-alikes (‹ ›), so no tag can be forged or closed,
    and a record separator (the prompts' piece break, ``simulation.llm.types.PIECE_BREAK``) is
    dropped, so no inserted text can cut a prompt's pieces or be cut out of what a model reads."""
    if isinstance(value, str):
        return value.replace("<", "\u2039").replace(">", "\u203a").replace("\x1e", "")
    return value


@lru_cache(maxsize=8)
def environment(*packages: str) -> Environment:
    """Templates from ``PACKAGE/templates`` of each package, the first package's winning a name clash."""
    return Environment(
        loader=ChoiceLoader([PackageLoader(package, "templates") for package in packages]),
        undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, autoescape=False, finalize=neutralise,
    )


def render(packages: tuple[str, ...], template: str, **context: Any) -> str:
    return environment(*packages).get_template(template).render(**context).strip()
