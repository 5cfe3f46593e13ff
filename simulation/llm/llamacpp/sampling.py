"""Drawing the next token under a JSON grammar, without checking the whole vocabulary each time.

Why: llama-cpp-python's ``create_completion`` samples with a chain whose first link is the
grammar, applied to every one of the vocabulary's tokens (49,152 for SmolLM2) before top-k keeps
40 of them: about 3.5 ms a token on two cores, a third of what decoding the token costs. The
chain's result only depends on the 40 highest-logit tokens the grammar allows, so ``Sampler``
looks for them among the ``WINDOW`` highest logits first, lets the grammar judge only those, and
hands the allowed ones to the rest of the chain (top-k 40, typical, top-p, min-p, temperature,
the seeded draw). When fewer than 40 of the window are allowed (the grammar expects a quote or a
key, and few tokens fit), it falls back to judging the whole vocabulary, as the plain chain does.

Same answers: the rest of the chain sees the same 40 tokens with the same logits, so its choice
and its random draws are those of the plain chain. The one case that could differ is two of
those tokens having exactly equal logits (the plain chain's partial sort and this one may then
order them differently); ``tests/test_llm.py`` checks answers against the plain chain.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["Sampler", "TOP_K", "WINDOW"]

TOP_K = 40
"""create_completion's top-k: the chain never looks past the 40 highest allowed logits."""

WINDOW = 256
"""Highest logits the grammar judges before it falls back to the whole vocabulary."""

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)


class Sampler:
    """The sampler of one answer: create_completion's chain for its temperature and seed (its
    repetition penalty, neutral at the defaults, left out), with the grammar judged as above."""

    def __init__(self, vocab: Any, n_vocab: int, grammar: Any | None, temperature: float, seed: int):
        from llama_cpp import llama_cpp as lib

        self._lib = lib
        self.n_vocab = n_vocab
        self._grammar = None
        self._rest = None
        if grammar is not None:
            self._grammar = lib.llama_sampler_init_grammar(vocab, grammar._grammar.encode("utf-8"),
                                                           grammar._root.encode("utf-8"))
            if not self._grammar:
                raise ValueError("llama.cpp could not compile the answer's grammar")
        self._rest = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if temperature <= 0:
            links = [lib.llama_sampler_init_greedy()]
        else:
            links = [lib.llama_sampler_init_top_k(TOP_K), lib.llama_sampler_init_typical(1.0, 1),
                     lib.llama_sampler_init_top_p(0.95, 1), lib.llama_sampler_init_min_p(0.05, 1),
                     lib.llama_sampler_init_temp(temperature), lib.llama_sampler_init_dist(seed)]
        for link in links:
            lib.llama_sampler_chain_add(self._rest, link)
        self._everyone = np.arange(n_vocab, dtype=np.int32)

    def _candidates(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        """llama_token_data rows for ``ids`` with their logits."""
        data = np.empty(len(ids), dtype=_TOKEN_DATA)
        data["id"] = ids
        data["logit"] = logits[ids]
        data["p"] = 0
        return data

    def _apply(self, sampler: Any, data: np.ndarray) -> int:
        """Run ``sampler`` over the rows in place; the index it selected (-1: none)."""
        lib = self._lib
        array = lib.llama_token_data_array(
            data=data.ctypes.data_as(ctypes.POINTER(lib.llama_token_data)), size=len(data), selected=-1, sorted=False)
        lib.llama_sampler_apply(sampler, ctypes.byref(array))
        return int(array.selected)

    def _draw(self, data: np.ndarray) -> int:
        """The rest of the chain's choice among the rows."""
        return int(data[self._apply(self._rest, data)]["id"])

    def sample(self, ctx: Any, index: int) -> int:
        """The next token from the logits the last decode kept at ``index``; the grammar and the
        chain are told which was chosen."""
        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx, index), shape=(self.n_vocab,))
        if self._grammar is None:
            token = self._draw(self._candidates(self._everyone, logits))
        else:
            top = np.argpartition(logits, -WINDOW)[-WINDOW:]
            top.sort()  # vocabulary order, as the plain chain sees them
            data = self._candidates(top, logits)
            self._apply(self._grammar, data)  # the tokens it does not allow get -inf
            allowed = data[data["logit"] != -np.inf]
            if len(allowed) < TOP_K:  # too few: judge the whole vocabulary, as the plain chain does
                allowed = self._candidates(self._everyone, logits)
                self._apply(self._grammar, allowed)
            token = self._draw(allowed)
            lib.llama_sampler_accept(self._grammar, token)
        lib.llama_sampler_accept(self._rest, token)
        return token

    def close(self) -> None:
        lib = self._lib
        if self._grammar:
            lib.llama_sampler_free(self._grammar)
            self._grammar = None
        if self._rest:
            lib.llama_sampler_free(self._rest)
            self._rest = None

    def __del__(self) -> None:
        self.close()
