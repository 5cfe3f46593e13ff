"""A yes-or-no question about one thing, scored, calibrated and drawn: the choice a capable model can mean.

Why. Setting out to find someone was first a numbered menu ("carry on", "go to A", "go to B").
The 1.5B measurement model spreads its probability over numbered options nearly evenly whatever
they say, so a menu with two going options beside one "carry on" sent people out about two
times in three from its length alone (issue 33, step 5: 14 of 16 seek questions set out in one
seed). Asking about one person at a time, "does she go and tell him? Yes or No", makes the
menu's length irrelevant, and the model's P(Yes) is what it thinks of *this* errand. A pilot on
24 probe prompts of the 1.5B's own runs separated right from wrong answers better as yes/no
(AUC 0.92) than as a numbered choice (0.84).

How. The backend scores the two answers ``Yes`` and ``No`` as whole answers
(``Mind.ask_rating``); the pair is calibrated against the same question with its content
blanked (``calibrate.content_free``: a model's habit of saying "Yes" is divided out, Zhao et al.
2021); the person's prior (``factor``, e.g. ``sociability.talk_odds``) multiplies the odds of
yes; and the answer is drawn with the question's own seed (``converse.scored_pick``, as every
scored choice), so a seed is a
replicate and a replay is exact. Where the model cannot be asked, the ``default`` holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simulation.cognition.calibrate import calibrated, content_free
from simulation.cognition.converse import scored_pick
from simulation.cognition.sociability import weighted

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

YES = "Yes"
NO = "No"
ANSWERS = (YES, NO)
"""The two answers scored, in this order (a value of 1 for yes, 0 for no)."""


def yes_probability(probabilities: list[float], baseline: list[float] | None, factor: float) -> list[float]:
    """[P(yes), P(no)] after calibration against ``baseline`` and the odds of yes scaled by ``factor``
    (what ``converse.scored_pick`` draws from for a yes-or-no question)."""
    return weighted(calibrated(probabilities, baseline), [factor, 1.0])


async def choose_yes(me: AgentState, mind: Mind, msgs: list[dict[str, str]], *, template: str, purpose: str,
                     factor: float = 1.0, default: bool = False, **blank: Any) -> tuple[bool, int | None]:
    """(whether ``me`` answers yes, the llm_calls id that decided it). ``template`` is the question's
    (its content-free version is rendered from it, with ``blank`` for any field besides the name
    that the question's wording needs); ``factor`` scales the calibrated odds of yes."""
    free = content_free(template, 0, **blank) if mind.settings.calibrate else None
    pick, rating = await scored_pick(me, mind, msgs, list(ANSWERS), [1.0, 0.0], default=1.0 if default else 0.0,
                                     purpose=purpose, free=free, factors=[factor, 1.0])
    if pick is not None:
        return pick == 0, rating.call_id
    return rating.value >= 0.5, rating.call_id


__all__ = ["ANSWERS", "NO", "YES", "choose_yes", "yes_probability"]
