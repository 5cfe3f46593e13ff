"""Small statistics with numpy only: Pearson correlation, Cohen's d, Cohen's kappa, the
constant-guess baseline of an agreement, a rank AUC, and seeded percentile bootstrap CIs.

Why our own: the eval must be deterministic given its seed and must not pull scipy into the
product; a percentile bootstrap over personas is a few lines of numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """A statistic and its bootstrap confidence interval (None where it cannot be computed)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0

    def as_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "ci_low": self.lo, "ci_high": self.hi, "n": self.n}


def pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r, or None with fewer than 3 pairs or no variance (r means nothing there)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    xc, yc = x - x.mean(), y - y.mean()
    return float((xc * yc).sum() / np.sqrt((xc**2).sum() * (yc**2).sum()))


def cohens_d(high: np.ndarray, low: np.ndarray) -> float | None:
    """Cohen's d of two groups (mean difference over the pooled standard deviation), or None
    with fewer than 2 in a group or no spread at all."""
    high, low = np.asarray(high, dtype=float), np.asarray(low, dtype=float)
    if len(high) < 2 or len(low) < 2:
        return None
    pooled = np.sqrt(((len(high) - 1) * high.var(ddof=1) + (len(low) - 1) * low.var(ddof=1))
                     / (len(high) + len(low) - 2))
    if pooled == 0:
        return None
    return float((high.mean() - low.mean()) / pooled)


def split_effect(pairs: np.ndarray, cut: float = 0.5) -> float | None:
    """Cohen's d of the measured values (column 1) of rows whose target (column 0) is at or
    above ``cut`` against those below it: do people written high on a factor score higher?"""
    pairs = np.asarray(pairs, dtype=float)
    if len(pairs) == 0:
        return None
    return cohens_d(pairs[pairs[:, 0] >= cut, 1], pairs[pairs[:, 0] < cut, 1])


def majority_share(sides: np.ndarray) -> float | None:
    """The agreement of a constant guess: the share of the most common value of ``sides`` (booleans,
    e.g. "target is high"), i.e. what always guessing that value gets right. None when empty."""
    sides = np.asarray(sides, dtype=bool)
    if len(sides) == 0:
        return None
    high = int(sides.sum())
    return max(high, len(sides) - high) / len(sides)


def kappa_undefined(a: np.ndarray, b: np.ndarray) -> str | None:
    """Why Cohen's kappa of two yes/no ratings says nothing here, or None when it does.

    With fewer than 2 pairs, or with either rating constant, kappa is undefined (both constant)
    or 0 by construction (one constant: the expected agreement equals the observed one), so it
    is left out rather than reported as a finding."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if len(a) < 2:
        return "needs 2 or more pairs"
    if a.all() or not a.any():
        return "targets all on one side"
    if b.all() or not b.any():
        return "measured scores all on one side"
    return None


def cohens_kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's kappa of two yes/no ratings of the same units: (p_o - p_e) / (1 - p_e), where p_o
    is the share of units rated alike and p_e the share expected by chance from each rating's own
    rate of "yes" (p_e = p_a p_b + (1 - p_a)(1 - p_b)). None where ``kappa_undefined`` says why."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if kappa_undefined(a, b) is not None:
        return None
    observed = float(np.mean(a == b))
    pa, pb = float(a.mean()), float(b.mean())
    expected = pa * pb + (1 - pa) * (1 - pb)  # < 1 since neither rating is constant
    return (observed - expected) / (1 - expected)


def rank_auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """The probability that a positive unit scores above a negative one (ties count half): the
    Mann-Whitney AUC. Threshold-free, so a judge that leans to one answer for everybody still shows
    whether it orders people the right way. None without both kinds of unit."""
    scores, positive = np.asarray(scores, dtype=float), np.asarray(positive, dtype=bool)
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return None
    above = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(above / (len(pos) * len(neg)))


def bootstrap(
    data: np.ndarray,
    stat: Callable[[np.ndarray], float | None],
    *,
    seed: int,
    n_boot: int = 1000,
    level: float = 0.95,
) -> Estimate:
    """``stat`` on ``data`` (rows are units, e.g. personas) with a percentile bootstrap CI.

    Resamples rows with replacement from a generator seeded with ``seed``, so the interval is
    the same on every run. Resamples where ``stat`` is undefined (None/NaN) are left out; with
    fewer than 2 rows, or too few defined resamples, the interval is None."""
    data = np.asarray(data, dtype=float)
    n = len(data)
    point = stat(data) if n else None
    point = None if point is None or np.isnan(point) else float(point)
    if n < 2 or point is None:
        return Estimate(point, None, None, n)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    values = np.array([stat(data[i]) for i in idx], dtype=object)
    values = np.array([v for v in values if v is not None and not np.isnan(v)], dtype=float)
    if len(values) < n_boot // 2:
        return Estimate(point, None, None, n)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return Estimate(point, float(lo), float(hi), n)
