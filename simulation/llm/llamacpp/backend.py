"""llama.cpp backend (llama-cpp-python): the bundled SmolLM2 GGUF or any GGUF file, on the CPU.

JSON answers are constrained by a grammar compiled from the request's JSON schema (compiled
once per schema).

Prefix reuse without losing determinism (``simulation.llm.llamacpp.prefix_cache``): every prompt is
evaluated in canonical pieces, one per chat message before the last (cut further at each piece
break in a message, ``simulation.llm.types.PIECE_BREAK``), so an answer is
bit-identical whether its prefix was left in the KV cache, restored from a saved state or
evaluated cold. Saved states (the persona, a person's working memory, and every question's stable
preamble) are shared by every backend object on the same loaded model. ``tokens`` counts what was
reused.

Batched decoding (``simulation.llm.llamacpp.sequences``): the generated answers of a batch are decoded
together, up to ``sequences`` at a time, one sequence each: every prompt is evaluated alone in its
own sequence, then each decode step generates one token of every unfinished answer. Each
sequence has its own KV cells, so an answer is the same bits alone or beside others on the
bundled Q4_1 and a Q8_0 (not on a Q4_K_M: ``tests/test_same_bits.py``). Scored
questions (options) are evaluated one at a time, each in the sequence holding most of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.errors import InputError, Problem, RunError
from simulation.formats.paths import resolve_path
from simulation.llm.backend import Messages, OnDone, TokenCounter
from simulation.llm.llamacpp.bundled import bundled_model_path, recorded_file
from simulation.llm.llamacpp.chat_format import ChatFormat
from simulation.llm.llamacpp.fingerprint import model_fingerprint
from simulation.llm.llamacpp.order import batch_order
from simulation.llm.llamacpp.prefix_cache import PrefixCache, TokenCounts, keeps_context
from simulation.llm.llamacpp.quiet import quiet_stderr
from simulation.llm.llamacpp.sampling import Sampler
from simulation.llm.llamacpp.sequences import DecodeError, Sequences
from simulation.llm.scoring import ScoredOptions, log_softmax_at
from simulation.llm.types import LLMRequest, RawCompletion

if TYPE_CHECKING:
    from simulation.llm.settings import LlamaCppSettings

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


@dataclass
class _Loaded:
    """A model loaded in this process, its sequences and prefix cache, and how many use it."""

    llm: Any
    seqs: Sequences
    prefix: PrefixCache
    users: int = 1
    busy: threading.Lock = field(default_factory=threading.Lock)
    """Held while a call computes: the model is not freed under it (a call may run in the worker
    thread of ``simulation.llm.offthread`` while the loop's thread closes the run)."""
    closing: threading.Event = field(default_factory=threading.Event)
    """Set by the last user's ``close``: a call still computing stops at its next token."""


_LOADED: dict[tuple[str, int, int, int], _Loaded] = {}
"""Models loaded in this process: a run's agents and an evaluation's judge on the same file
share one copy. Sharing is safe because every request first puts its sequence into the exact
state it needs (``PrefixCache.prime`` checks the held tokens and piece boundaries)."""

SEQUENCES = 8
"""Answers generated together at most (sequences of the context). A town's phase asks about as
many people at once; decode steps stop gaining once the weights' reads are shared by a few
(``bench/llm.py``)."""


@dataclass
class _Answer:
    """One answer being generated in a sequence."""

    index: int
    request: LLMRequest
    seq: int
    prompt: list[int]
    sampler: Sampler
    started: float
    next_token: int = -1
    tokens: list[int] = field(default_factory=list)

_VOCABS: dict[str, ChatFormat] = {}
"""The chat format of a GGUF loaded vocabulary-only (no weights, no context), by path: what counts
a prompt's tokens for a backend that has not started (``LlamaCppBackend.token_counter``)."""


def _vocab_chat(path: Path) -> ChatFormat:
    key = str(path.resolve())
    if key not in _VOCABS:
        try:
            from llama_cpp import Llama

            with quiet_stderr():
                _VOCABS[key] = ChatFormat(Llama(model_path=key, vocab_only=True, verbose=False))
        except (ImportError, ValueError, RuntimeError, OSError) as exc:
            raise RunError(f"cannot read the tokenizer of {path}: {exc}") from None
    return _VOCABS[key]


CLOSE_WAIT_S = 30.0
"""How long ``close`` waits for a call still computing to stop at a token boundary; a call that
does not (wedged in C) keeps the model: it is not freed under it."""

PREFIX_CACHE_MB = 4096
"""Saved prefix states kept per loaded model (``PrefixCache.sized``): a quarter for personas, a
quarter for longer preambles, half for people's working memories. On the bundled model a token
takes about 23 KB (the 1.5B measurement model's 28 KB), so the personas of 25 people (about 700
tokens each in the flagship) take 400 MB, and their working memories (up to about 2,000 tokens
with the persona, ``cognition.working``) 1.2 GB."""


class LlamaCppBackend:
    name = "llamacpp"

    @classmethod
    def from_settings(cls, settings: LlamaCppSettings, base_dir: Path) -> LlamaCppBackend:
        """The backend an ``llm:`` block describes; a relative model path is taken from ``base_dir``."""
        model = resolve_path(settings.model, base_dir) if settings.model else None
        if model is not None and not model.is_file():
            raise InputError(Problem("llm.model", f"model file not found: {model}"))
        return cls(model, settings.context_tokens, settings.threads, sequences=settings.sequences)

    @classmethod
    def replay_id(cls, settings: LlamaCppSettings, base_dir: Path) -> str | None:
        """The model id answers are cached under, without loading the model (its file's
        fingerprint); None when the file is not on this machine."""
        try:
            path = resolve_path(settings.model, base_dir) if settings.model else bundled_model_path()
            return model_fingerprint(path) if path.is_file() else None
        except (RunError, OSError):
            return None

    @classmethod
    def resumed_settings(cls, settings: LlamaCppSettings, recorded_model: str) -> LlamaCppSettings:
        """The settings a run that recorded ``recorded_model`` goes on with. One begun on the bundled
        model's shipped Q4_1 file, before the engine served it as Q8_0 (``bundled.py``), keeps that
        file, so a resumed or verified run never changes model half way; only where the settings
        name no model (neither the run's ``llm`` block nor ``--model``)."""
        kept = None if settings.model else recorded_file(recorded_model)
        return settings if kept is None else settings.model_copy(update={"model": str(kept)})

    @classmethod
    def token_counter(cls, model_id: str, settings: LlamaCppSettings | None = None,
                      base_dir: Path | None = None) -> TokenCounter | None:
        """What counts a prompt's tokens exactly as a backend serving ``model_id`` would, without
        starting one: the GGUF's tokenizer and chat format, loaded vocabulary-only (milliseconds).
        The file is the one ``settings`` name (relative to ``base_dir``), else the bundled model;
        None when that file is not here or is not ``model_id`` (then only starting can count:
        cheap for this backend)."""
        try:
            if settings is not None and settings.model:
                path = resolve_path(settings.model, base_dir or Path.cwd())
            else:
                path = bundled_model_path()
            if not path.is_file() or model_fingerprint(path) != model_id:
                return None
            chat = _vocab_chat(path)
        except (RunError, OSError):
            return None
        return lambda messages: len(chat.pieces(messages)[0])

    def __init__(
        self,
        model: str | Path | None = None,
        context_tokens: int = 2048,
        threads: int | None = None,
        prefix_cache_mb: int = PREFIX_CACHE_MB,
        sequences: int = SEQUENCES,
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
        self._key = (str(path.resolve()), context_tokens, threads or max(1, os.cpu_count() or 1), max(1, sequences))
        loaded = _LOADED.get(self._key)
        if loaded is not None:
            loaded.users += 1
        else:
            try:
                with quiet_stderr():
                    llm = Llama(model_path=str(path), n_ctx=context_tokens, n_threads=self._key[2], seed=0,
                                verbose=False)
                    seqs = Sequences(llm, self._key[3], context_tokens)
            except (ValueError, RuntimeError, OSError, MemoryError) as exc:
                raise RunError(f"cannot load model {path}: {exc}") from None
            prefix = PrefixCache.sized(seqs, prefix_cache_mb)
            loaded = _LOADED[self._key] = _Loaded(llm, seqs, prefix)
        self._loaded = loaded
        self._llm = loaded.llm
        self.seqs: Sequences = loaded.seqs
        """Where every prompt is evaluated and every answer generated (the Llama object's own
        context is left alone; bench/day.py measures the machine's speed on it)."""
        self._grammars: dict[str, Any] = {}
        self.chat = ChatFormat(self._llm)
        self.prefix: PrefixCache = loaded.prefix
        self.tokens = TokenCounts()
        """Prompt tokens sent, reused from a cached prefix, and generated, by this backend object."""
        self.answer_tokens: list[list[int] | None] = []
        """The token ids each answer of the last ``generate`` call generated, by request (None: a
        scored or failed request): what tests compare when they claim the same bits."""

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
            with quiet_stderr():
                self._grammars[key] = LlamaGrammar.from_string(gbnf, verbose=False)
        return self._grammars[key]

    def _prompt(self, req: LLMRequest) -> tuple[list[int], tuple[int, ...]]:
        """Prompt tokens, and where its canonical pieces end (``ChatFormat.pieces``)."""
        return self.chat.pieces(req.messages)

    def count_tokens(self, messages: Messages) -> int:
        """The prompt tokens a request of these messages is evaluated as (exactly: the same
        rendering and tokenization as ``generate``); ``max_tokens`` more must fit ``seqs.n_ctx``."""
        return len(self.chat.pieces(messages)[0])

    def _sampler(self, req: LLMRequest) -> Sampler:
        """create_completion's sampler chain for this request (``simulation.llm.llamacpp.sampling``)."""
        grammar = self._grammar(req.json_schema) if req.json_schema else None
        return Sampler(self._llm._model.vocab, self._llm.n_vocab(), grammar, req.temperature, req.seed)

    def _failed(self, started: float, exc: Exception) -> RawCompletion:
        return RawCompletion(text="", latency_s=time.perf_counter() - started, error=str(exc))

    def _generate(self, batch: list[tuple[int, LLMRequest]], on_done: OnDone | None,
                  results: list[RawCompletion | None]) -> None:
        """Generate the answers of up to ``sequences`` requests together. Each prompt is
        evaluated alone in its sequence and its first token sampled at once; then every decode
        step takes one token of each unfinished answer."""
        from llama_cpp import llama_cpp as lib

        seqs = self.seqs
        vocab = self._llm._model.vocab
        prompts = [self._prompt(req) for _, req in batch]
        live: list[_Answer] = []

        def report(index: int, completion: RawCompletion) -> None:
            results[index] = completion
            if on_done:
                on_done(index, completion)

        def finish(answer: _Answer, reason: str) -> None:
            answer.sampler.close()
            self.answer_tokens[answer.index] = list(answer.tokens)
            text = self._llm.detokenize(answer.tokens, prev_tokens=answer.prompt).decode("utf-8", errors="ignore")
            self.tokens.generated += len(answer.tokens)
            report(answer.index, RawCompletion(
                text=text, prompt_tokens=len(answer.prompt), completion_tokens=len(answer.tokens),
                latency_s=time.perf_counter() - answer.started, finish_reason=reason))

        for (index, req), (tokens, bounds), seq in zip(batch, prompts, self.prefix.slots(prompts)):
            started = time.perf_counter()
            try:
                if len(tokens) + req.max_tokens > seqs.n_ctx:
                    raise ValueError(f"prompt of {len(tokens)} tokens + max_tokens {req.max_tokens} exceeds "
                                     f"the context window of {seqs.n_ctx}")
                reused = self.prefix.prime(seq, tokens, bounds, keeps_context(req.messages))
                self.tokens.count(len(tokens), reused, req.purpose)
                at = seqs.eval(seq, tokens[bounds[-1] if bounds else 0:], logits=True)
                answer = _Answer(index, req, seq, tokens, self._sampler(req), started)
                answer.next_token = answer.sampler.sample(seqs.ctx, at)
            except (ValueError, DecodeError) as exc:
                self.prefix.drop(seq)
                report(index, self._failed(started, exc))
                continue
            live.append(answer)
        while live:
            going = []
            for answer in live:
                token = answer.next_token
                if lib.llama_vocab_is_eog(vocab, token):
                    finish(answer, "stop")
                    continue
                answer.tokens.append(token)
                if len(answer.tokens) >= answer.request.max_tokens:
                    finish(answer, "length")
                    continue
                going.append(answer)
            live = going
            if not live:
                break
            self._check_open()
            try:
                seqs.step([(a.seq, a.tokens[-1]) for a in live])
            except DecodeError as exc:
                for answer in live:
                    report(answer.index, self._failed(answer.started, exc))
                self.prefix.forget()
                return
            for i, answer in enumerate(live):
                answer.next_token = answer.sampler.sample(seqs.ctx, i)

    def _score(self, req: LLMRequest) -> RawCompletion:
        """Each option's log-probability as the whole answer: log P(its tokens, then the template's
        end of answer | prompt), from the logits. The prompt is evaluated in the same canonical
        pieces as a generated answer, in the sequence that holds most of it (``PrefixCache.slots``);
        each option is evaluated after it and rolled back."""
        started = time.perf_counter()
        seqs = self.seqs
        options = req.options or []
        seq = 0
        try:
            tokens, bounds = self._prompt(req)
            seq = self.prefix.slots([(tokens, bounds)])[0]
            spelled = [self.chat.tokenize(o) + [self.chat.answer_end] for o in options]
            longest = max((len(t) for t in spelled), default=0)
            if len(tokens) + longest > seqs.n_ctx:
                raise ValueError(f"prompt of {len(tokens)} tokens exceeds the context window of {seqs.n_ctx}")
            reused = self.prefix.prime(seq, tokens, bounds, keeps_context(req.messages))
            self.tokens.count(len(tokens), reused, req.purpose)
            at = seqs.eval(seq, tokens[bounds[-1] if bounds else 0:], logits=True)
            base = len(seqs.held[seq])
            after_prompt = seqs.logits_at(at)
            scores: list[float | None] = []
            evaluated = 0
            for option in spelled:
                self._check_open()
                logprob = log_softmax_at(after_prompt, option[0])
                for j in range(1, len(option)):
                    at = seqs.eval(seq, [option[j - 1]], logits=True)
                    evaluated += 1
                    logprob += log_softmax_at(seqs.logits_at(at), option[j])
                seqs.keep(seq, base)
                scores.append(logprob)
            self.tokens.generated += evaluated
        except (ValueError, DecodeError) as exc:
            self.prefix.drop(seq)
            return self._failed(started, exc)
        return RawCompletion(text=ScoredOptions(scores, exact=True).to_text(), prompt_tokens=len(tokens),
                             completion_tokens=evaluated, latency_s=time.perf_counter() - started,
                             finish_reason="scored")

    def _check_open(self) -> None:
        if self._loaded.closing.is_set():
            raise RunError(f"the llama.cpp model {self.model_path.name} was closed while it was answering")

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        with self._loaded.busy:
            self._check_open()
            return self._generate_all(requests, on_done)

    def _generate_all(self, requests: Sequence[LLMRequest], on_done: OnDone | None) -> list[RawCompletion]:
        results: list[RawCompletion | None] = [None] * len(requests)
        self.answer_tokens = [None] * len(requests)
        # Deterministic order that groups shared prefixes for reuse (``order``); answers do not depend on it.
        for group in batch_order([r.messages for r in requests], [r.options is not None for r in requests],
                                 self.seqs.n_seq):
            if requests[group[0]].options is not None:
                i = group[0]
                results[i] = self._score(requests[i])
                if on_done:
                    on_done(i, results[i])  # type: ignore[arg-type]
            else:
                self._generate([(i, requests[i]) for i in group], on_done, results)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Release this user of the model; the last one frees it."""
        loaded = _LOADED.get(self._key)
        if loaded is None or loaded.llm is not self._llm:
            return
        loaded.users -= 1
        if loaded.users <= 0:
            del _LOADED[self._key]
            loaded.closing.set()
            if not loaded.busy.acquire(timeout=CLOSE_WAIT_S):
                return  # a call wedged inside the model: freeing it under that call could crash the process
            try:
                with contextlib.suppress(Exception):
                    loaded.seqs.close()
                    self._llm.close()
            finally:
                loaded.busy.release()
