"""Ratings by probability: the expected value over the answer options' probabilities.

A 135M model asked for "a number from 1 to 10" at temperature 0.7 gives noise: the same
memory rated 1 or 10 depending on the seed, the Big Five answered "4" whatever the persona.
The information is in the distribution the model puts over the options at the answer
position, not in one sample of it. So a rating question is a request with ``options``: the
backend returns each option's log-probability as the whole answer (``ScoredOptions``), and the
rating is the probability-weighted mean of the options' values. It is deterministic (no
sampling), and a model that hesitates between 3 and 8 says 5.5 rather than one of them.

How each backend scores:

- llama.cpp: exactly, from the logits: log P(option tokens, then the template's end of answer)
  after the prompt. "1" and "10" are told apart by what follows the "1".
- vLLM and OpenAI-compatible servers: from the top log-probabilities of the answer's first
  token (``exact`` is false). An option none of the top tokens spells is left out; when no
  option is among them, or the server gives no log-probabilities, the client falls back to
  sampling one option (counted: ``llm.sampled_rating_share``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOP_LOGPROBS = 20
"""Top log-probabilities asked of servers when scoring options (OpenAI's API allows up to 20)."""


@dataclass(frozen=True)
class ScoredOptions:
    logprobs: list[float | None]
    """One per option, in the request's order; None where the backend could not see it."""
    exact: bool
    """Whole-answer probabilities (llama.cpp), or first-token ones from a top-k list."""

    def to_text(self) -> str:
        return json.dumps({"logprobs": [None if v is None else round(v, 6) for v in self.logprobs],
                           "exact": self.exact})

    @classmethod
    def from_text(cls, text: str, n: int) -> ScoredOptions:
        """Parse a backend's answer to an options request; ValueError says what is wrong."""
        try:
            data = json.loads(text)
            values = data["logprobs"]
            exact = bool(data.get("exact", False))
        except (ValueError, KeyError, TypeError):
            raise ValueError("not a scored-options answer") from None
        if not isinstance(values, list) or len(values) != n:
            raise ValueError(f"expected {n} log-probabilities")
        out: list[float | None] = []
        for v in values:
            if v is None:
                out.append(None)
            elif isinstance(v, (int, float)) and not math.isnan(v) and v <= 1e-6:
                out.append(float(v))
            else:
                raise ValueError(f"not a log-probability: {v!r}")
        if all(v is None for v in out):
            raise ValueError("no option was among the model's likely answers")
        return cls(out, exact)

    def probabilities(self) -> list[float]:
        """The options' probabilities renormalised over the options the backend saw (unseen: 0)."""
        seen = [v for v in self.logprobs if v is not None]
        top = max(seen)
        weights = [0.0 if v is None else math.exp(v - top) for v in self.logprobs]
        total = sum(weights)
        return [w / total for w in weights]


def expected(values: Sequence[float], probabilities: Sequence[float]) -> float:
    return sum(v * p for v, p in zip(values, probabilities, strict=True))


def from_top_logprobs(top: Mapping[str, float], options: Sequence[str]) -> ScoredOptions:
    """First-token scoring from a server's top log-probabilities (token text -> logprob): an
    option's is the log of the summed probability of the tokens that spell it, ignoring spaces
    and case (" 7" and "7" both say 7)."""
    sums: dict[str, float] = {}
    for token, logprob in top.items():
        key = token.strip().lower()
        sums[key] = sums.get(key, 0.0) + math.exp(logprob)
    return ScoredOptions([math.log(sums[o.strip().lower()]) if sums.get(o.strip().lower()) else None
                          for o in options], exact=False)


def log_softmax_at(logits: Sequence[float] | object, token: int) -> float:
    """log P(token) from a row of logits (a numpy array or a list)."""
    import numpy as np

    row = np.asarray(logits, dtype=np.float64)
    top = row.max()
    return float(row[token] - top - math.log(np.exp(row - top).sum()))


__all__ = ["TOP_LOGPROBS", "ScoredOptions", "expected", "from_top_logprobs", "log_softmax_at"]
