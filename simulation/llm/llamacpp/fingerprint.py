"""A GGUF's identity for replay caches and run records, read in milliseconds."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["model_fingerprint"]


def model_fingerprint(path: Path, sample: int = 1 << 20) -> str:
    """``name@hash`` of a GGUF: its size and first and last MiB, so two different files that
    share a name never share replay-cache entries (hashing a 4 GB file whole would take seconds)."""
    digest = hashlib.blake2b(digest_size=6)
    size = path.stat().st_size
    digest.update(str(size).encode())
    with path.open("rb") as fh:
        digest.update(fh.read(sample))
        if size > sample:
            fh.seek(max(sample, size - sample))
            digest.update(fh.read(sample))
    return f"{path.name}@{digest.hexdigest()}"
