"""Whether several people's prompt pieces decode faster together than one after another, and
whether together they give the same numbers.

    .venv/bin/python bench/pieces.py                      # the bundled model (served Q8_0)
    .venv/bin/python bench/pieces.py --model measure      # the 1.5B measurement model

Why: the llama.cpp backend decodes each request's prompt piece alone, in its own sequence
(``Sequences.eval``), so that an answer never depends on what else was asked beside it. Most of a
town's prompt pieces are short (a question's tail of 100-300 tokens behind a person's persona and
working memory), and a short batch reads every weight of the model for few tokens: a piece of 128
tokens may decode well below the speed of 512 fresh ones. Generation already decodes one token of
every sequence in one batch, with the same bits as alone (tests/test_same_bits.py). If pieces of
several sequences decoded in one batch were as exact, the backend could do the same for prompts.

What it measures, in one process on the loaded model, at the depths a town's pieces sit: the speed
of a piece by its length, decoded alone; ``n`` pieces of one length in ``n`` sequences decoded
one after another against together (one llama_decode of all of them, in chunks of ``n_batch``);
and whether each piece's last logits are the same bits both ways (the largest difference, 0 when
equal). Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from simulation.llm.llamacpp.backend import bundled_model_path  # noqa: E402
from simulation.llm.llamacpp.sequences import Sequences  # noqa: E402

MEASURE_MODEL = ROOT / ".cache" / "measure-model" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def _fill(seqs: Sequences, n: int, tokens: list[int], depth: int) -> None:
    """Sequences 0..n-1 each holding the same ``depth`` tokens (decoded once, copied)."""
    seqs.clear()
    if depth:
        seqs.eval(0, tokens[:depth])
        for s in range(1, n):
            seqs._lib.llama_memory_seq_cp(seqs._memory, 0, s, -1, -1)
            seqs.held[s] = list(seqs.held[0])


def _pieces(tokens: list[int], n: int, length: int, depth: int) -> list[list[int]]:
    """``n`` different pieces of ``length`` tokens (each sequence reads its own text)."""
    return [tokens[depth + 7 * s: depth + 7 * s + length] for s in range(n)]


def alone(seqs: Sequences, pieces: list[list[int]], tokens: list[int], depth: int) -> tuple[float, list[np.ndarray]]:
    _fill(seqs, len(pieces), tokens, depth)
    start = time.perf_counter()
    out = []
    for s, piece in enumerate(pieces):
        last = seqs.eval(s, piece, logits=True)
        out.append(seqs.logits_at(last))
    return time.perf_counter() - start, out


def together(seqs: Sequences, pieces: list[list[int]], tokens: list[int], depth: int) -> tuple[float, list[np.ndarray]]:
    _fill(seqs, len(pieces), tokens, depth)
    entries = [(t, len(seqs.held[s]) + j, s, j == len(piece) - 1)
               for s, piece in enumerate(pieces) for j, t in enumerate(piece)]
    last: dict[int, np.ndarray] = {}
    start = time.perf_counter()
    for first in range(0, len(entries), seqs.n_batch):
        chunk = entries[first:first + seqs.n_batch]
        seqs._decode(chunk)
        for i, (_, _, seq, wanted) in enumerate(chunk):
            if wanted:  # a chunk's logits are gone after the next decode: read them now
                last[seq] = seqs.logits_at(i)
    took = time.perf_counter() - start
    for s, piece in enumerate(pieces):
        seqs.held[s].extend(piece)
    return took, [last[s] for s in range(len(pieces))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bundled", help="'bundled', 'measure' or a GGUF path")
    parser.add_argument("--depth", type=int, default=800, help="tokens already in each sequence")
    parser.add_argument("--lengths", default="64,128,256", help="piece lengths to try")
    parser.add_argument("--people", type=int, default=4, help="sequences whose pieces go together")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    path = bundled_model_path() if args.model == "bundled" else MEASURE_MODEL if args.model == "measure" \
        else Path(args.model)
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=2, seed=0, verbose=False)
    seqs = Sequences(llm, n_seq=args.people, n_ctx=2048)
    text = " ".join(f"The {i}th person walked past the fountain, stopped, and said hello to the baker."
                    for i in range(300))
    tokens = llm.tokenize(text.encode(), add_bos=True)
    console = Console()
    table = Table(title=f"{path.name}: {args.people} pieces, {args.depth} deep; tokens/s (best of {args.reps})")
    for col in ("piece", "alone, one after another", "together, one batch", "together / alone",
                "largest logit difference"):
        table.add_column(col, justify="right")
    for length in [int(x) for x in args.lengths.split(",")]:
        pieces = _pieces(tokens, args.people, length, args.depth)
        total = sum(len(p) for p in pieces)
        best_a = best_t = 0.0
        diff = 0.0
        for _ in range(args.reps):
            ta, la = alone(seqs, pieces, tokens, args.depth)
            tt, lt = together(seqs, pieces, tokens, args.depth)
            best_a, best_t = max(best_a, total / ta), max(best_t, total / tt)
            diff = max(diff, max(float(np.max(np.abs(a - b))) for a, b in zip(la, lt)))
        table.add_row(str(length), f"{best_a:,.0f}", f"{best_t:,.0f}", f"{best_t / best_a:.2f}x", f"{diff:.3g}")
    console.print(table)


if __name__ == "__main__":
    main()
