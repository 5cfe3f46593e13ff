"""Rewards, group-normalised advantages, running totals and the zero-sum peer mapping.

Pure functions of numbers, so every formula in docs/rewards.md is checked against hand-computed
examples in tests/test_rewards.py.

- rubric reward: ``r = (mean of the item scores - lo) / (hi - lo)``, in [0, 1];
- advantage within a group (GRPO-style): ``a = (r - mean_g) / std_g`` with the population
  standard deviation of the group's rewards; a group of one, or one whose rewards are all
  equal (std 0), gives every member advantage 0: nothing in it is better than anything else;
- running total: the sum of one agent's rewards of one role up to and including each turn,
  in (tick, row) order;
- peer critique (CoMAS): a scorer's score ``N`` on ``lo..hi`` becomes ``s = (N - lo) / (hi - lo)``;
  the speaker earns ``s``, the critic ``1 - s`` (zero-sum: a critique that lowers the score pays),
  and a scorer (or critic) whose answer cannot be parsed earns ``-1``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

FORMAT_PENALTY = -1.0
"""What a critic or scorer earns when its answer cannot be parsed, even after the retry."""


def normalise(score: float, lo: int, hi: int) -> float:
    """A score on ``lo..hi`` mapped linearly onto [0, 1]."""
    if hi <= lo:
        raise ValueError(f"empty scale {lo}..{hi}")
    return (float(score) - lo) / (hi - lo)


def rubric_reward(scores: Mapping[str, int], lo: int, hi: int) -> float:
    """The mean of a judgement's item scores, normalised to [0, 1]."""
    if not scores:
        raise ValueError("no scores")
    return normalise(float(np.mean(list(scores.values()))), lo, hi)


def group_advantages(rewards: Sequence[float], groups: Sequence[Hashable]) -> list[float]:
    """``(r - mean) / std`` within each group (population std); 0 where the std is 0."""
    if len(rewards) != len(groups):
        raise ValueError("one group per reward")
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        values = np.array([rewards[i] for i in idx], dtype=float)
        mean, std = values.mean(), values.std()
        if std > 1e-12:
            for i, v in zip(idx, values):
                out[i] = float((v - mean) / std)
    return out


def running_totals(rewards: Sequence[float], owners: Sequence[Hashable],
                   order: Sequence[tuple[int, int]]) -> list[float]:
    """Each turn's owner's cumulative reward up to and including it, in ``order`` ((tick, row) keys)."""
    if not len(rewards) == len(owners) == len(order):
        raise ValueError("rewards, owners and order must have the same length")
    totals: dict[Hashable, float] = defaultdict(float)
    out = [0.0] * len(rewards)
    for i in sorted(range(len(rewards)), key=lambda i: order[i]):
        totals[owners[i]] += rewards[i]
        out[i] = totals[owners[i]]
    return out


@dataclass(frozen=True)
class PeerRewards:
    """One critiqued utterance's rewards: None means that role earns nothing (no usable score)."""

    speaker: float | None
    critic: float | None
    scorer: float


def peer_rewards(score: float | None, lo: int, hi: int, critic_parsed: bool = True) -> PeerRewards:
    """CoMAS's zero-sum mapping: speaker ``s``, critic ``1 - s``, an unparsable scorer ``-1``.

    With no usable score there is nothing to share: the speaker and the critic earn nothing
    (the turn is dropped from the peer signal and counted), the scorer the format penalty. An
    unparsable critique earns its critic the same penalty, whatever the scorer then says."""
    critic_fail = None if critic_parsed else FORMAT_PENALTY
    if score is None:
        return PeerRewards(None, critic_fail, FORMAT_PENALTY)
    s = normalise(score, lo, hi)
    return PeerRewards(s, 1.0 - s if critic_parsed else FORMAT_PENALTY, 0.0)
