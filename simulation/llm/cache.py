"""The replay cache: a content-addressed store of completions, and a backend wrapper that uses it.

Key = (backend, model id, messages, sampling parameters, seed, schema); see ``LLMRequest.key``.
Because every request's seed is derived from who asks and when (not from batch order), a
rerun of the same scenario with the same seed asks exactly the same requests, finds every
answer here and makes zero backend calls: runs replay exactly, and a resumed run costs
nothing up to the point where it stopped.

The store is one SQLite file (WAL, so a run and an evaluation can share it); misses of a
batch are generated as one batch and written in one transaction.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from simulation.errors import RunError
from simulation.llm.backend import Backend, Messages, OnDone, agenerate, count_tokens
from simulation.llm.types import LLMRequest, RawCompletion

CacheMode = Literal["use", "refresh", "off"]


def default_cache_path() -> Path:
    """``$AGORA_CACHE_DIR/llm.sqlite``, else ``$XDG_CACHE_HOME/agora/llm.sqlite``, else ``~/.cache/agora``."""
    root = os.environ.get("AGORA_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "llm.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "agora" / "llm.sqlite"


class ReplayCache:
    """SQLite file of completions by request key."""

    def __init__(self, path: Path | str):
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._db.execute("pragma journal_mode=wal")
            self._db.execute(
                "create table if not exists completions (key text primary key, model text not null, "
                "text text not null, prompt_tokens integer, completion_tokens integer, finish_reason text, "
                "latency_s real, created_at real)"
            )
        except (sqlite3.Error, OSError) as exc:
            raise RunError(f"cannot open the LLM replay cache {self.path}: {exc}") from None

    def get_many(self, keys: Sequence[str]) -> dict[str, RawCompletion]:
        found: dict[str, RawCompletion] = {}
        unique = list(dict.fromkeys(keys))
        try:
            for start in range(0, len(unique), 500):  # SQLite's bound-parameter limit
                chunk = unique[start:start + 500]
                rows = self._db.execute(
                    f"select key, text, prompt_tokens, completion_tokens, finish_reason, latency_s "
                    f"from completions where key in ({','.join('?' * len(chunk))})", chunk,
                ).fetchall()
                for key, text, pt, ct, finish, latency in rows:
                    found[key] = RawCompletion(text=text, prompt_tokens=pt or 0, completion_tokens=ct or 0,
                                               finish_reason=finish, latency_s=latency or 0.0)
        except sqlite3.Error as exc:
            raise RunError(f"cannot read the LLM replay cache {self.path}: {exc}") from None
        return found

    def put_many(self, model: str, items: Sequence[tuple[str, RawCompletion]]) -> None:
        """Store answers (errors are never stored: they are not answers)."""
        rows = [(k, model, c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason, c.latency_s, time.time())
                for k, c in items if c.error is None]
        if not rows:
            return
        try:
            with self._db:
                self._db.execute("begin immediate")
                self._db.executemany("insert or replace into completions values (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        except sqlite3.Error as exc:
            raise RunError(f"cannot write the LLM replay cache {self.path}: {exc}") from None

    def __len__(self) -> int:
        return self._db.execute("select count(*) from completions").fetchone()[0]

    def close(self) -> None:
        self._db.close()


class CachedBackend:
    """A backend in front of which the replay cache answers whatever it already knows.

    ``use`` reads and writes; ``refresh`` never reads but overwrites (to re-generate after,
    say, a server's model changed under the same name)."""

    def __init__(self, inner: Backend, cache: ReplayCache, mode: CacheMode = "use"):
        self.inner = inner
        self.cache = cache
        self.mode = mode
        self.name = inner.name
        self.scripted = bool(getattr(inner, "scripted", False))
        self.model_id = inner.model_id
        self.hits = 0
        self.misses = 0

    @property
    def namespace(self) -> str:
        return f"{self.inner.name}:{self.inner.model_id}"

    def _split(self, requests: Sequence[LLMRequest]) -> tuple[list[str], dict[int, RawCompletion], list[int]]:
        keys = [r.key(self.namespace) for r in requests]
        found = self.cache.get_many(keys) if self.mode == "use" else {}
        done: dict[int, RawCompletion] = {}
        todo: list[int] = []
        for i, key in enumerate(keys):
            if key in found:
                done[i] = found[key].model_copy(update={"cache_hit": True, "latency_s": 0.0})
            else:
                todo.append(i)
        self.hits += len(done)
        self.misses += len(todo)
        return keys, done, todo

    def _finish(self, requests: Sequence[LLMRequest], keys: list[str], done: dict[int, RawCompletion],
                todo: list[int], fresh: list[RawCompletion]) -> list[RawCompletion]:
        if len(fresh) != len(todo):
            raise RunError(f"backend {self.name} returned {len(fresh)} answers for {len(todo)} requests")
        for i, completion in zip(todo, fresh):
            done[i] = completion
        self.cache.put_many(self.namespace, [(keys[i], done[i]) for i in todo])
        return [done[i] for i in range(len(requests))]

    def _misses(self, requests: Sequence[LLMRequest], on_done: OnDone | None) -> tuple[Any, list[LLMRequest], Any]:
        """Answer what the cache knows (reporting it to ``on_done``); return the state, the
        batch of misses for the backend, and their progress callback in the caller's indices."""
        keys, done, todo = self._split(requests)
        if on_done:
            for i in sorted(done):
                on_done(i, done[i])
        inner_done = (lambda j, c: on_done(todo[j], c)) if on_done else None  # type: ignore[misc]
        return (keys, done, todo), [requests[i] for i in todo], inner_done

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        state, batch, inner_done = self._misses(requests, on_done)
        fresh = self.inner.generate(batch, inner_done) if batch else []
        return self._finish(requests, *state, fresh)

    async def agenerate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        state, batch, inner_done = self._misses(requests, on_done)
        fresh = await agenerate(self.inner, batch, inner_done) if batch else []
        return self._finish(requests, *state, fresh)

    def count_tokens(self, messages: Messages) -> int:
        """The inner backend's count (the cache answers by key, so prompt sizes are the backend's)."""
        return count_tokens(self.inner, messages)

    def close(self) -> None:
        self.inner.close()
        self.cache.close()

    def describe(self) -> str:
        return f"{self.mode} ({self.cache.path})"

