"""Scored choices calibrated against a content-free prompt ("Calibrate Before Use", Zhao et al. 2021).

A model asked "which of these, 1 to 3?" has a preference for some numbers whatever the options
say: on the bundled 135M model 87 % of a reaction's probability went to the option listed last,
so a shuffled menu made the choice a coin of the shuffle, not the person's. Zhao et al. measure
that bias by asking the same question with the content replaced by "N/A" and divide it out:
``p_calibrated(i) ∝ p(i) / p_content_free(i)``. What is left is how much *this* situation and
these options move the model away from its habit.

The content-free prompt keeps the question's format (its template, the number of options, a
persona-free system message) and blanks everything a person or moment supplies: the situation,
the name and every option's words. So one content-free question per template and menu length
(and wording: ``go.j2`` asks with and without "and stay until ...") serves a whole run
(``Mind.baseline`` asks it once and keeps it, keyed by the rendered messages); it costs one short
prompt.
``cognition.calibrate: false`` turns it off (the raw probabilities are drawn from).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simulation.cognition import prompts

BLANK = "N/A"
"""What stands for every piece of content in the content-free prompt (Zhao et al.'s choice)."""
SYSTEM = "You play one person in a town simulation. Stay in character and answer with JSON only."
"""The content-free system message: the format's first line, with no persona."""


def content_free(template: str, n: int, **fixed: Any) -> list[dict[str, str]]:
    """The question ``template`` asks with ``n`` options, every piece of content blanked."""
    return prompts.messages(SYSTEM, template, content_free=True, first=BLANK, options=[BLANK] * n, **fixed)


def calibrated(probabilities: Sequence[float], baseline: Sequence[float] | None) -> list[float]:
    """``probabilities`` divided by the content-free ``baseline`` and renormalised (unchanged
    without a baseline). A baseline probability is floored at 1e-9 so no option is divided by 0."""
    if baseline is None or len(baseline) != len(probabilities):
        return list(probabilities)
    weights = [p / max(b, 1e-9) for p, b in zip(probabilities, baseline, strict=True)]
    total = sum(weights)
    return [w / total for w in weights] if total > 0 else list(probabilities)


__all__ = ["BLANK", "SYSTEM", "calibrated", "content_free"]
