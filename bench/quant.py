"""How fast the bundled model reads prompts and generates as shipped (Q4_1) and as served (Q8_0),
and how far apart their numbers are, in one process.

    .venv/bin/python bench/quant.py              # shipped Q4_1, served Q8_0, and Q4_0 for reference
    .venv/bin/python bench/quant.py --reps 5
    .venv/bin/python bench/quant.py --model measure   # the 1.5B's Q4_K_M against a Q8_0 made from it

Why: on a CPU with AVX2 but no AVX-512, llama.cpp evaluates a batch of prompt tokens through a
slow per-row path for Q4_1 weights, and prompts are most of a town's LLM time (docs/benchmarks/
day-25: 80 %). The engine therefore serves the bundled model as Q8_0 made from the shipped file
(``simulation/llm/llamacpp/bundled.py``). This prints, for each file, prompt tokens/s for a piece
at the depths a town's prompts put it (``bench/attention.py``'s measure), one-token generation
steps/s, and, against the shipped file, whether the top next token after the same text is the
same and the largest logit difference: the served model is the shipped one rounded finer, so its
numbers should be close, not equal. Run it on an idle machine; the CPU's flags are printed
beside the figures, because the ratio depends on them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attention import speeds  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from simulation.benchmark.host import cpu as cpu_flags  # noqa: E402
from simulation.llm.llamacpp.bundled import bundled_model_path, shipped_model_path  # noqa: E402


def generation(path: Path, steps: int, reps: int) -> float:
    """One-token decode steps/s after a 64-token prompt (best of ``reps``): what an answer costs."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=1024, n_threads=2, seed=0, verbose=False)
    tokens = llm.tokenize(b"The baker opened the shop early and " * 8, add_bos=True)[:64]
    best = 0.0
    for _ in range(reps):
        llm.reset()
        llm.eval(tokens)
        start = time.perf_counter()
        for i in range(steps):
            llm.eval([tokens[i % len(tokens)]])
        best = max(best, steps / (time.perf_counter() - start))
    del llm
    return best


def requantise(source: Path, out: Path, ftype: int) -> Path:
    """``source`` requantised by llama.cpp's own quantiser to ``ftype`` (a ``LLAMA_FTYPE_MOSTLY_*``)."""
    import ctypes

    import llama_cpp

    from simulation.llm.llamacpp.quiet import quiet_stderr

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize = ftype, True
    with quiet_stderr():
        if llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), ctypes.byref(params)):
            raise SystemExit(f"llama.cpp could not requantise {source.name}")
    return out


def files_to_compare(model: str | None, folder: Path, with_q4_0: bool) -> dict[str, Path]:
    """The files measured, the first the reference: the bundled model's shipped, served (and Q4_0) files,
    or a named GGUF (``measure``: the 1.5B measurement model) beside a Q8_0 made from it."""
    import llama_cpp

    if model is None:
        files = {"shipped Q4_1": shipped_model_path(), "served Q8_0": bundled_model_path()}
        if with_q4_0:
            files["Q4_0 (reference)"] = requantise(files["shipped Q4_1"], folder / "bundled.Q4_0.gguf",
                                                   llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0)
        return files
    path = Path(".cache/measure-model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf") if model == "measure" else Path(model)
    if not path.is_file():
        raise SystemExit(f"no model file at {path} (make measure-model fetches the 1.5B)")
    return {f"named ({path.name})": path,
            "Q8_0 made from it": requantise(path, folder / "named.Q8_0.gguf", llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--piece", type=int, default=256, help="tokens in the prompt piece decoded at each depth")
    ap.add_argument("--depths", default="0,800", help="tokens already in the cache before the piece")
    ap.add_argument("--steps", type=int, default=48, help="one-token decode steps timed")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-q4-0", action="store_true", help="leave out the Q4_0 reference")
    ap.add_argument("--model", default=None, help="a GGUF file (or 'measure') measured beside a Q8_0 made from it, "
                    "instead of the bundled model's files")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        files = files_to_compare(args.model, Path(tmp), not args.no_q4_0)
        measured = {}
        for label, path in files.items():
            prompt, logits = speeds(path, False, args.piece, depths, args.reps)
            measured[label] = (prompt, logits, generation(path, args.steps, args.reps), path.stat().st_size)
    subject = "The bundled SmolLM2-135M" if args.model is None else Path(next(iter(files.values()))).name
    table = Table(title=f"{subject} by quantisation: 2 threads, best of {args.reps}; CPU: {cpu_flags()}")
    for col in ("file", "MB", *(f"prompt tok/s at depth {d}" for d in depths), "decode steps/s",
                "top token vs the first", "largest logit difference"):
        table.add_column(col, justify="right")
    base_prompt, base_logits = next(iter(measured.values()))[:2]
    top = max(range(len(base_logits)), key=base_logits.__getitem__)
    for label, (prompt, logits, steps, size) in measured.items():
        ratio = [f"{prompt[d]:.0f} ({prompt[d] / base_prompt[d]:.2f}x)" for d in depths]
        mine = max(range(len(logits)), key=logits.__getitem__)
        diff = max(abs(a - b) for a, b in zip(base_logits, logits, strict=True))
        table.add_row(label, f"{size / 1e6:.0f}", *ratio, f"{steps:.0f}", "same" if mine == top else "DIFFERENT",
                      f"{diff:.3f}")
    console.print(table)
    console.print("The logits are after the deepest piece (the same text for every file). A logit difference "
                  "of 0 would be the same model; a Q8_0 made from a file should stay close to it.")


if __name__ == "__main__":
    main()
