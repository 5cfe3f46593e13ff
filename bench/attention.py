"""How fast a prompt piece decodes at the depths a town's prompts put it, with llama.cpp's flash
attention off (the engine's setting) and on.

    .venv/bin/python bench/attention.py                      # the bundled model
    .venv/bin/python bench/attention.py --model measure      # the 1.5B measurement model

Why: in ``bench/day.py`` the pieces of a town's prompts (100-500 tokens sitting 600-1,200 deep,
behind a person's persona and working memory) decode at about 70 % of the speed of 512 fresh
tokens (the 1.5B's day on 2026-11-29: 31 against 43 tokens/s). Attention is what grows with
depth, so this measures the piece speed by depth, in one process, for both attention kernels,
and whether the kernel changes the model's numbers (the top next token and the largest logit
difference after the same piece): a kernel that changes them changes every answer, so switching
it is a behaviour change to measure with the strict benchmark, not a free speed-up.
Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from simulation.llm.llamacpp.backend import bundled_model_path  # noqa: E402

MEASURE_MODEL = ROOT / ".cache" / "measure-model" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def speeds(path: Path, flash: bool, piece: int, depths: list[int], reps: int) -> tuple[dict[int, float], list[float]]:
    """Tokens/s of a ``piece``-token chunk decoded after ``depth`` tokens already in the cache (best
    of ``reps``), and the logits after the deepest one."""
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=4096, n_batch=512, n_ubatch=512, n_threads=2, flash_attn=flash,
                seed=0, verbose=False, logits_all=False)
    text = " ".join(f"The {i}th person walked past the fountain and said hello." for i in range(400))
    tokens = llm.tokenize(text.encode(), add_bos=True)
    out: dict[int, float] = {}
    logits: list[float] = []
    for depth in depths:
        best = 0.0
        for _ in range(reps):
            llm.reset()
            if depth:
                llm.eval(tokens[:depth])
            start = time.perf_counter()
            llm.eval(tokens[depth:depth + piece])
            best = max(best, piece / (time.perf_counter() - start))
        out[depth] = best
        # the last token's logits, straight from the context (the Llama object keeps none without logits_all)
        logits = list(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64))
    del llm
    return out, logits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="a GGUF, or 'measure' (default: the bundled model)")
    ap.add_argument("--piece", type=int, default=400, help="tokens in the piece decoded at each depth")
    ap.add_argument("--depths", default="0,600,1200")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    path = MEASURE_MODEL if args.model == "measure" else Path(args.model) if args.model else bundled_model_path()
    if not path.is_file():
        sys.exit(f"no model file at {path}")
    depths = [int(d) for d in args.depths.split(",")]
    console = Console()
    off, logits_off = speeds(path, False, args.piece, depths, args.reps)
    on, logits_on = speeds(path, True, args.piece, depths, args.reps)
    table = Table(title=f"{args.piece}-token piece after N tokens ({path.name}, 2 threads, best of {args.reps})")
    for col in ("depth", "flash attention off, tok/s", "on, tok/s", "on / off", "off / depth 0"):
        table.add_column(col, justify="right")
    for d in depths:
        table.add_row(str(d), f"{off[d]:.1f}", f"{on[d]:.1f}", f"{on[d] / off[d]:.2f}x", f"{off[d] / off[depths[0]]:.2f}")
    console.print(table)
    top_off = max(range(len(logits_off)), key=logits_off.__getitem__)
    top_on = max(range(len(logits_on)), key=logits_on.__getitem__)
    diff = max(abs(a - b) for a, b in zip(logits_off, logits_on, strict=True))
    console.print(f"after the deepest piece: top token {'the same' if top_off == top_on else 'DIFFERENT'} "
                  f"({top_off} / {top_on}); largest logit difference {diff:.4f} "
                  f"({'identical bits' if diff == 0 else 'the kernel changes the numbers'})")


if __name__ == "__main__":
    main()
