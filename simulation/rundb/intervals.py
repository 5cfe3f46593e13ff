"""A metric's mean and 95 % interval over seeds, the one estimate every comparison prints.

The behaviour benchmark, its comparisons across commits and the co-evolution rounds (report and
viewer) all summarise one number per seed the same way: the mean and Student's t interval over
the seeds that have a value. It lives with the readers of run.db so that the viewer can draw the
same intervals as the reports without importing the engine.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["SHARES", "SIGNED", "Estimate", "cell", "difference_cell", "estimate", "format_value", "paired", "verdict_of"]

# two-sided 95 % Student t quantiles by degrees of freedom (1-30); beyond that, the normal's
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


@dataclass(frozen=True)
class Estimate:
    mean: float | None
    low: float | None
    high: float | None
    n: int
    """Seeds with a value (a run without conversations has no turns per conversation)."""


SHARES = ("share", "distortion", "retention", "hallucination", "density")
"""Metric names that are proportions: their interval is clipped to [0, 1]."""

SIGNED = ("reward.tie",)
"""Metrics that are changes and may be negative (a tie that cooled); every other metric is a
count, a rate, a share or a score, and its interval is clipped at 0."""
SIGNED_MOODS = ("_shift", ".gap")
"""The endings of the ``moods.`` metrics that are valence changes (``rundb.moods``): signed too."""


def is_signed(name: str) -> bool:
    """Whether ``name`` is a change that may be negative (its interval is not clipped at 0)."""
    return name in SIGNED or (name.startswith("moods.") and name.endswith(SIGNED_MOODS))


def estimate(values: Sequence[float | None], name: str = "") -> Estimate:
    """Mean and 95 % t-interval of the values that exist (the interval is the mean alone for one
    value), clipped to the metric's range: >= 0 unless it is ``SIGNED``, and <= 1 for a
    proportion (``SHARES``)."""
    xs = [v for v in values if v is not None and not math.isnan(v)]
    if not xs:
        return Estimate(None, None, None, 0)
    mean = statistics.fmean(xs)
    if len(xs) == 1:
        return Estimate(mean, mean, mean, 1)
    df = len(xs) - 1
    t = _T95[df - 1] if df <= len(_T95) else 1.96
    half = t * statistics.stdev(xs) / math.sqrt(len(xs))
    low, high = mean - half, mean + half
    if not is_signed(name):
        low = max(0.0, low)
        if any(word in name for word in SHARES):
            high = min(1.0, high)
    return Estimate(mean, low, high, len(xs))


def paired(before: Sequence[float | None], after: Sequence[float | None]) -> Estimate:
    """The mean of the per-seed differences ``after - before`` and its 95 % t-interval (never
    clipped: a difference has a sign), over the seeds where both have a value. Two engines run on
    the same seeds share what a seed fixes (who is where when), so the paired difference sees a
    change that two overlapping intervals of five seeds each would hide."""
    if len(before) != len(after):
        raise ValueError(f"paired values need one per seed on both sides ({len(before)} against {len(after)})")
    diffs = [b - a for a, b in zip(before, after) if a is not None and b is not None
             and not math.isnan(a) and not math.isnan(b)]
    return estimate(diffs, SIGNED[0])


def verdict_of(difference: Estimate) -> str:
    """``higher`` / ``lower`` when the paired difference's interval lies wholly above / below 0,
    ``same`` when every seed gave the same value on both sides, else ``overlap`` (``–``: no basis).
    With one seed there is no interval, so nothing is called moved."""
    if difference.mean is None or difference.low is None or difference.high is None:
        return "–"
    if difference.low == difference.high == 0.0:
        return "same"
    if difference.n > 1 and difference.low > 0:
        return "higher"
    if difference.n > 1 and difference.high < 0:
        return "lower"
    return "overlap"


def format_value(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def cell(e: Estimate) -> str:
    """"mean [low–high]" (the mean alone without an interval, – without a value)."""
    if e.mean is None:
        return "–"
    if e.n > 1 and e.low is not None and e.high is not None:
        return f"{format_value(e.mean)} [{format_value(e.low)}–{format_value(e.high)}]"
    return format_value(e.mean)


def difference_cell(e: Estimate) -> str:
    """A paired difference, signed: "+0.12 [+0.03–+0.21]"."""
    if e.mean is None:
        return "–"

    def signed(v: float | None) -> str:
        return "–" if v is None else ("+" if v > 0 else "") + format_value(v)

    if e.n > 1 and e.low is not None and e.high is not None:
        return f"{signed(e.mean)} [{signed(e.low)}–{signed(e.high)}]"
    return signed(e.mean)
