"""The order a batch's requests reach the llama.cpp sequences in, defined once.

The backend (``backend.LlamaCppBackend.generate``) and the cost count that replays a run's calls
without a model (``bench/reuse.py``) must take requests in the same order, or the count measures a
different run: which prompt follows which decides what a sequence still holds, and so what is
reused. The order is deterministic and groups shared prefixes: requests sorted by their messages'
JSON, every scored question alone first (``options``: one sequence, its options scored against
it), then the generated answers ``n_seq`` at a time, decoded together. Answers do not depend on it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["batch_order"]


def batch_order(messages: Sequence[list[dict[str, Any]]], scored: Sequence[bool], n_seq: int) -> list[list[int]]:
    """Groups of request indices in the order they are evaluated: each scored request alone, then
    the rest ``n_seq`` at a time."""
    order = sorted(range(len(messages)), key=lambda i: json.dumps(messages[i]))
    generated = [i for i in order if not scored[i]]
    return [[i] for i in order if scored[i]] + [generated[k:k + n_seq] for k in range(0, len(generated), n_seq)]
