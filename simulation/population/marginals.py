"""What a spec says its people are made of, and what a sample turned out to be: the numbers to compare.

``expected_marginals`` is exact (age limits on occupations and households included), so a
sample's observed shares can be checked against it (population.json, marginals.html, tests).
"""

from __future__ import annotations

import math
from collections import Counter

from simulation.population.sampler import Sampled
from simulation.population.spec import PopulationSpec, TraitDistribution, allowed_at, weights

__all__ = ["expected_marginals", "observed_marginals", "truncated_cdf"]


def _normal_cdf(x: float, mean: float, sd: float) -> float:
    return 0.5 * (1.0 + math.erf((x - mean) / (sd * math.sqrt(2.0))))


def truncated_cdf(x: float, dist: TraitDistribution) -> float:
    """CDF of the spec's normal truncated to [0, 1]."""
    lo, hi = _normal_cdf(0.0, dist.mean, dist.sd), _normal_cdf(1.0, dist.mean, dist.sd)
    return min(1.0, max(0.0, (_normal_cdf(min(max(x, 0.0), 1.0), dist.mean, dist.sd) - lo) / (hi - lo)))


def expected_marginals(spec: PopulationSpec) -> dict[str, dict[str, float]]:
    """Exact probabilities of each age bin, occupation and household (age limits included)."""
    bins = weights(spec.ages)
    out: dict[str, dict[str, float]] = {
        "age": {}, "occupation": Counter(), "household": Counter()}  # type: ignore[dict-item]
    for p_bin, bin_ in zip(bins, spec.ages):
        lo, hi = bin_.range
        out["age"][f"{lo}-{hi}"] = out["age"].get(f"{lo}-{hi}", 0.0) + float(p_bin)
        for age in range(lo, hi + 1):
            p_age = float(p_bin) / (hi - lo + 1)
            for key, items, label in (("occupation", spec.occupations, "title"),
                                      ("household", spec.households, "text")):
                idx = allowed_at(items, age)
                w = weights([items[i] for i in idx])
                for i, wi in zip(idx, w):
                    out[key][getattr(items[i], label)] += p_age * float(wi)
    return {k: dict(v) for k, v in out.items()}


def observed_marginals(spec: PopulationSpec, people: list[Sampled]) -> dict[str, dict[str, int]]:
    ages: Counter[str] = Counter()
    for s in people:
        for bin_ in spec.ages:
            lo, hi = bin_.range
            if lo <= s.persona.age <= hi:
                ages[f"{lo}-{hi}"] += 1
                break
    return {
        "age": dict(ages),
        "occupation": dict(Counter(s.persona.occupation for s in people)),
        "household": dict(Counter(s.persona.household for s in people)),
    }
