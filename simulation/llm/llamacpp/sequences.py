"""Several sequences in one llama.cpp context, so that a phase's answers are generated together.

Why: on a CPU, generating one token of one answer reads every weight of the model once; a decode
of one token from each of N sequences reads them once for all N. A phase of a town asks several
people at once (``LLMClient`` hands the backend whole batches), so their answers can be generated
in lock step: one ``llama_decode`` per generated token of the batch instead of one per token of
each answer (``bench/llm.py`` measures the two side by side).

Why the context is made with ``kv_unified=False``: each sequence then has its own stream of KV
cells (``n_ctx`` tokens each), and its attention is computed over its own stream only. A
sequence's logits are therefore the same bits whether it is decoded alone or beside others, in
any stream, on the bundled Q4_1 and a Q8_0 (``tests/test_same_bits.py``): an answer does not depend
on what ran before it, nor on what ran beside it. Not on every quantisation: on the measurement
model's Q4_K_M ggml computes other kernels by batch size, and an answer can part at a token.

The class only moves tokens: it knows which tokens each sequence holds, decodes, and copies a
sequence's cells out and back in (``llama_state_seq_*``). Which prefixes are worth keeping is
``PrefixCache``'s business; sampling is the backend's.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["DecodeError", "Sequences"]


class DecodeError(RuntimeError):
    """llama_decode refused a batch (no room in a sequence's cells, or an internal error)."""


class Sequences:
    """``n_seq`` independent sequences of up to ``n_ctx`` tokens each, on one loaded model."""

    def __init__(self, llm: Any, n_seq: int, n_ctx: int, n_batch: int = 512):
        from llama_cpp import llama_cpp as lib

        self._lib = lib
        self.n_seq = n_seq
        self.n_batch = n_batch
        self.n_vocab = llm.n_vocab()
        # The loaded model's own context settings (threads, attention kind, KV types), so a
        # sequence here computes exactly what the model's single-sequence context would.
        params = type(llm.context_params).from_buffer_copy(llm.context_params)
        params.n_seq_max = n_seq
        params.kv_unified = False
        params.n_ctx = n_ctx * n_seq
        params.n_batch = max(n_batch, n_seq)
        params.n_ubatch = params.n_batch
        params.no_perf = False
        self.ctx = lib.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise MemoryError(f"llama.cpp could not make a context of {n_seq} sequences x {n_ctx} tokens")
        self.n_ctx = lib.llama_n_ctx(self.ctx) // n_seq
        self._memory = lib.llama_get_memory(self.ctx)
        self._batch = lib.llama_batch_init(params.n_batch, 0, 1)
        self.held: list[list[int]] = [[] for _ in range(n_seq)]
        """The tokens each sequence holds, in order from position 0."""
        self.evaluated = 0
        """Tokens decoded by ``eval`` in chunks of more than one (prompt pieces; what llama.cpp's
        own counter calls prompt evaluation)."""
        self.singles = 0
        """Tokens decoded by ``eval`` one at a time (scored options, one-token prompt rests)."""
        self.stepped = 0
        """Tokens decoded as generation (``step``), and in ``steps`` decodes."""
        self.steps = 0
        self.eval_s = 0.0
        """Seconds inside llama_decode for ``eval`` (prompt pieces, scored options)."""
        self.step_s = 0.0
        """Seconds inside llama_decode for ``step`` (generation)."""

    # -- what a sequence holds ------------------------------------------------------------------

    def keep(self, seq: int, n: int) -> None:
        """Drop everything of ``seq`` after its first ``n`` tokens."""
        self._lib.llama_memory_seq_rm(self._memory, seq, n, -1)
        del self.held[seq][n:]

    def clear(self, seq: int | None = None) -> None:
        """Empty one sequence, or all of them."""
        if seq is None:
            self._lib.llama_memory_clear(self._memory, True)
            for held in self.held:
                held.clear()
        else:
            self.keep(seq, 0)

    # -- decoding -------------------------------------------------------------------------------

    def _decode(self, entries: Sequence[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, position, sequence, wants logits) entries."""
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (token, pos, seq, logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = logits
        rc = self._lib.llama_decode(self.ctx, batch)
        if rc != 0:
            raise DecodeError(f"llama_decode returned {rc}")

    def eval(self, seq: int, tokens: Sequence[int], logits: bool = False) -> int:
        """Append ``tokens`` to ``seq``, decoded alone in chunks of ``n_batch`` counted from the
        first of them (so the same tokens always meet the same chunks); with ``logits``, the
        last token's logits are kept and its index (for ``logits_at`` and samplers) returned."""
        held = self.held[seq]
        if len(held) + len(tokens) > self.n_ctx:
            raise DecodeError(f"{len(held) + len(tokens)} tokens exceed a sequence's {self.n_ctx}")
        last = -1
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start:start + self.n_batch]
            final = start + len(chunk) == len(tokens)
            started = time.perf_counter()
            self._decode([(t, len(held) + j, seq, logits and final and j == len(chunk) - 1)
                          for j, t in enumerate(chunk)])
            self.eval_s += time.perf_counter() - started
            held.extend(chunk)
            if len(chunk) > 1:
                self.evaluated += len(chunk)
            else:
                self.singles += len(chunk)
            if final and logits:
                last = len(chunk) - 1
        return last

    def step(self, tokens: Sequence[tuple[int, int]]) -> None:
        """One generated token for each (sequence, token) pair, decoded together; the logits of
        pair ``i`` are at index ``i``."""
        for seq, _ in tokens:
            if len(self.held[seq]) >= self.n_ctx:
                raise DecodeError(f"sequence {seq} is full ({self.n_ctx} tokens)")
        started = time.perf_counter()
        self._decode([(t, len(self.held[seq]), seq, True) for seq, t in tokens])
        self.step_s += time.perf_counter() - started
        for seq, t in tokens:
            self.held[seq].append(t)
        self.stepped += len(tokens)
        self.steps += 1

    def logits_at(self, index: int) -> np.ndarray:
        """A copy of the logits the last decode kept at ``index``."""
        pointer = self._lib.llama_get_logits_ith(self.ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()

    # -- saved states ---------------------------------------------------------------------------

    def save(self, seq: int, limit: int) -> bytes | None:
        """The cells of ``seq`` as bytes (None when they would take more than ``limit``)."""
        lib = self._lib
        size = lib.llama_state_seq_get_size(self.ctx, seq)
        if size > limit:
            return None
        buffer = (ctypes.c_uint8 * size)()
        written = lib.llama_state_seq_get_data(self.ctx, buffer, size, seq)
        return ctypes.string_at(buffer, written)

    def restore(self, seq: int, data: bytes, tokens: Sequence[int]) -> bool:
        """Put saved cells (holding ``tokens``) into the emptied ``seq``; False if llama.cpp refused."""
        self.clear(seq)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if self._lib.llama_state_seq_set_data(self.ctx, buffer, len(data), seq) != len(data):
            self.clear(seq)
            return False
        self.held[seq] = list(tokens)
        return True

    def close(self) -> None:
        if self.ctx:
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self.ctx)
            self.ctx = None
