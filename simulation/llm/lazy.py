"""A backend that starts on its first cache miss: replaying a run needs no server, GPU or model file.

Behind the replay cache (``cache: use``) every answer a run has seen before is read from the
cache file, so the backend is needed only for what is new. Starting it eagerly made a fully
cached rerun fail when its servers were gone (the openai backend asks every server for
``/models`` when it is built), or when vLLM or the GGUF file was not on this machine. The
replay cache keys answers by ``backend:model id``, so all this wrapper must know up front is
that id: the backend class says it without connecting (``replay_id``), or the run being
resumed or verified recorded it.

A miss is where the backend starts; if it cannot (servers down, vLLM missing, model file
gone), the run stops there with the backend's own message and a word on why it was needed,
at a tick boundary like any other backend failure, every committed tick kept.

Counting a prompt's tokens (``count_tokens``, what cognition budgets prompts with) must give the
same number before and after the backend starts, or a replay would build other prompts than the
run it replays and miss the cache. So a backend that has not started counts with what its class
can count without starting (``counter_for``: the bundled GGUF's tokenizer loaded vocabulary-only,
a vLLM model's tokenizer from its folder or the local Hugging Face cache, the estimate for
servers); where only the started backend can count (llama.cpp with any other GGUF, cheap to
load), counting starts it, and no request reaches it for that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simulation.errors import InputError, RunError
from simulation.llm.backend import Backend, Messages, OnDone, TokenCounter, agenerate, count_tokens, estimate_tokens
from simulation.llm.types import LLMRequest, RawCompletion

__all__ = ["LazyBackend", "counter_for"]


def counter_for(name: str, model_id: str, settings: Any = None, base_dir: Path | None = None) -> TokenCounter | None:
    """What counts prompt tokens as the registered backend ``name`` serving ``model_id`` will,
    without starting it (the backend class's ``token_counter``; ``settings`` and ``base_dir``, the
    ones it would be built from, let llama.cpp find a GGUF other than the bundled one); None when
    only a started backend can count, or ``name`` is no registered backend. A backend that can
    never start (a replay-only one) counts with this, else ``estimate_tokens``."""
    from simulation.llm import registry

    entry = registry.BACKENDS.get(name)
    if entry is None:
        return None
    try:
        make = getattr(entry.backend_class(), "token_counter", None)
    except ImportError:
        return None
    return make(model_id, settings, base_dir) if make is not None else None


class LazyBackend:
    """``name`` and ``model_id`` now; the real backend from ``start()`` when a request needs it."""

    def __init__(self, name: str, model_id: str, start: Callable[[], Backend],
                 counter: Callable[[], TokenCounter | None] | None = None):
        """``counter`` makes what counts tokens without starting (default: ``counter_for(name,
        model_id)``; the factory can pass ``counter_for`` with the settings the backend starts from)."""
        self.name = name
        self.model_id = model_id
        self._start = start
        self._make_counter = counter or (lambda: counter_for(name, model_id))
        self._inner: Backend | None = None
        self._used = False
        self._counter: TokenCounter | None = None
        self._counter_known = False

    @property
    def started(self) -> bool:
        """Whether any request has reached the real backend (False for a fully cached replay)."""
        return self._used

    def count_tokens(self, messages: Messages) -> int:
        """The prompt tokens the real backend will see (module docstring): its own count once it
        has started, else its class's count without starting it, else (only a started backend
        can count) the backend started for it; ``estimate_tokens`` for one that cannot start (a
        request that then misses the cache says why)."""
        if self._inner is None and not self._counter_known:
            self._counter = self._make_counter()
            self._counter_known = True
        if self._inner is None and self._counter is not None:
            return self._counter(messages)
        try:
            inner = self._backend(0)
        except RunError:
            self._counter = estimate_tokens
            return estimate_tokens(messages)
        return count_tokens(inner, messages)

    def _backend(self, misses: int) -> Backend:
        if self._inner is None:
            try:
                inner = self._start()
            except (RunError, InputError) as exc:
                raise RunError(f"the {self.name} backend cannot start: {exc} (it starts at the first request "
                               f"the replay cache cannot answer; {misses} here)") from None
            if inner.model_id != self.model_id:
                inner.close()
                raise RunError(f"the {self.name} backend now serves model {inner.model_id!r}, not "
                               f"{self.model_id!r} as the run recorded: answers from it would not replay "
                               f"the run (give --model {self.model_id!r}, or start a new run)")
            self._inner = inner
        return self._inner

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        if not requests:
            return []
        inner = self._backend(len(requests))
        self._used = True
        return inner.generate(requests, on_done)

    async def agenerate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        if not requests:
            return []
        inner = self._backend(len(requests))
        self._used = True
        return await agenerate(inner, requests, on_done)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()

    def describe(self) -> str:
        if not self._used:
            return ("not started: every answer came from the replay cache" if self._inner is None else
                    "started only to count prompt tokens: every answer came from the replay cache")
        describe = getattr(self._inner, "describe", None)
        return describe() if describe else "started"
