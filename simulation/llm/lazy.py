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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simulation.errors import InputError, RunError
from simulation.llm.backend import Backend, OnDone
from simulation.llm.types import LLMRequest, RawCompletion

__all__ = ["LazyBackend"]


class LazyBackend:
    """``name`` and ``model_id`` now; the real backend from ``start()`` when a request needs it."""

    def __init__(self, name: str, model_id: str, start: Callable[[], Backend]):
        self.name = name
        self.model_id = model_id
        self._start = start
        self._inner: Backend | None = None

    @property
    def started(self) -> bool:
        """Whether any request has reached the real backend (False for a fully cached replay)."""
        return self._inner is not None

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
        return self._backend(len(requests)).generate(requests, on_done)

    async def agenerate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        if not requests:
            return []
        inner = self._backend(len(requests))
        agenerate = getattr(inner, "agenerate", None)
        return await agenerate(requests, on_done) if agenerate else inner.generate(requests, on_done)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()

    def describe(self) -> str:
        if self._inner is None:
            return "not started: every answer came from the replay cache"
        describe = getattr(self._inner, "describe", None)
        return describe() if describe else "started"
