"""Silence llama.cpp's C-level chatter on file descriptor 2 while it loads or converts a model."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["quiet_stderr"]


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """llama.cpp prints model-loading chatter on fd 2 from C; keep the user's terminal clean."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    with open(os.devnull, "wb") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(fd, 2)
            os.close(fd)
