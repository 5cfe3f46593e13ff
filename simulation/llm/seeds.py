"""Per-request seeds that depend on who asks and when, never on batch composition or order."""

from __future__ import annotations

import hashlib


def derive_seed(run_seed: int, *parts: object) -> int:
    """A stable 31-bit seed from the run seed and e.g. (agent id, tick, purpose, attempt)."""
    text = "\x1f".join(str(p) for p in (run_seed, *parts))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") & 0x7FFFFFFF
