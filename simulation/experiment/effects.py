"""How a condition differs from the control: per metric, the paired difference over the seeds
they share, its 95 % interval and its standardised size.

The conditions run the same seeds, so a seed is a matched pair: what a seed fixes (who is
where when, what the sampler draws first) is shared, and the per-seed difference removes it.
The effect size is Cohen's d for paired samples (d_z: the mean difference over the standard
deviation of the differences), which says how consistently the condition moves the metric
across seeds; for a share (a proportion) the mean difference is itself the risk difference, in
the metric's own units. A difference is *clear of zero* when its interval lies wholly on one side
(``rundb.intervals.verdict_of``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from simulation.rundb.intervals import SHARES, Estimate, estimate, paired, verdict_of

__all__ = ["Effect", "effect"]


@dataclass(frozen=True)
class Effect:
    metric: str
    control: Estimate
    condition: Estimate
    difference: Estimate
    """Condition minus control, seed by seed: mean and 95 % t-interval (for a share: the risk difference)."""
    d: float | None
    """Cohen's d_z: mean difference / standard deviation of the differences (None with fewer
    than two pairs, or when every pair differs by the same amount and the mean is 0)."""
    share: bool
    verdict: str
    """higher / lower (the interval clear of zero), overlap, same, or – (no basis)."""


def effect(metric: str, control: Sequence[float | None], condition: Sequence[float | None]) -> Effect:
    """The effect of a condition on ``metric``, its values and the control's given seed by seed."""
    diffs = [b - a for a, b in zip(control, condition) if a is not None and b is not None
             and not math.isnan(a) and not math.isnan(b)]
    d: float | None = None
    if len(diffs) >= 2:
        sd = statistics.stdev(diffs)
        mean = statistics.fmean(diffs)
        d = mean / sd if sd > 0 else (None if mean == 0 else math.copysign(math.inf, mean))
    difference = paired(control, condition)
    return Effect(metric, estimate(control, metric), estimate(condition, metric), difference, d,
                  any(word in metric for word in SHARES), verdict_of(difference))
