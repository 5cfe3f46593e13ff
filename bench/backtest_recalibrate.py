"""A finished back-test scored again, calibrated, without asking its judge everything again.

    .venv/bin/python bench/backtest_recalibrate.py bench-out/backtest-measure-s12 \
        --judge-model .cache/measure-model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf

Back-tests made before the suite was calibrated (``simulation/evaluation/backtest.py``, commit
b2254e3) scored the judge's raw answers. Their ``eval.db`` keeps every judgement's log
probabilities, so the calibrated figure needs only the 10 content-free questions (each factor in
each order, the lines blanked), asked here of the same judge: the same numbers a rerun of the
calibrated suite would give, for 10 calls instead of about 170. Prints, per factor, the success
(side of 0.5 the persona was written on) from the raw answers and calibrated, with the judge's
content-free probability of the high pole in each order.
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulation.cognition.calibrate import BLANK, calibrated  # noqa: E402
from simulation.evaluation import backtest  # noqa: E402
from simulation.evaluation.ipip import FACTORS  # noqa: E402
from simulation.llm.scoring import ScoredOptions  # noqa: E402
from simulation.llm.types import LLMRequest  # noqa: E402


def probabilities(completion: str) -> list[float]:
    return ScoredOptions.from_text(completion, 2).probabilities()


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="an agora eval --suite backtest --out folder (its eval.db, results.csv)")
    ap.add_argument("--judge-model", required=True, help="the GGUF the back-test's judge ran")
    ap.add_argument("--context", type=int, default=2048)
    args = ap.parse_args()
    con = sqlite3.connect(f"file:{args.report / 'eval.db'}?mode=ro", uri=True)
    answers = {i: probabilities(c) for i, c in con.execute(
        "select id, completion from llm_calls where purpose like 'bt_%' and parse_ok = 1")}
    from simulation.llm.llamacpp import LlamaCppBackend

    judge = LlamaCppBackend(model=args.judge_model, context_tokens=args.context)
    asked = [(f, o) for f in FACTORS for o in (0, 1)]
    requests = [LLMRequest(messages=backtest.question([BLANK], f, o), options=["1", "2"], max_tokens=1,
                           temperature=0.0, seed=0, purpose=f"bt_{f}_{o}_free") for f, o in asked]
    free = {k: probabilities(c.text) for k, c in zip(asked, judge.generate(requests))}
    judge.close()
    rows = [r for r in csv.DictReader((args.report / "results.csv").open()) if r["metric"].startswith("p_high_")]
    print("| factor | content-free P(high), orders 1 / 2 | raw answers | calibrated |\n|---|---|---|---|")
    total = {"raw": [0, 0], "cal": [0, 0]}
    for f in FACTORS:
        counts = {"raw": [0, 0], "cal": [0, 0]}
        for r in rows:
            d = json.loads(r["details"])
            if r["metric"] != f"p_high_{f}":
                continue
            got = [(o, answers[c]) for o, c in enumerate(d["call_ids"]) if c in answers]
            raw = [backtest.high_pole(p, o) for o, p in got]
            cal = [backtest.high_pole(calibrated(p, free[f, o]), o) for o, p in got]
            judged = backtest.Judged(f, d["written"], mean(cal), p_high_raw=mean(raw))
            for name, success in (("raw", judged.success_raw), ("cal", judged.success)):
                if success is not None:
                    counts[name][0] += success
                    counts[name][1] += 1
        for name, (k, n) in counts.items():
            total[name][0] += k
            total[name][1] += n
        print(f"| {f} | {backtest.high_pole(free[f, 0], 0):.2f} / {backtest.high_pole(free[f, 1], 1):.2f} | "
              + " | ".join(f"{k}/{n} = {k / n:.2f}" if n else "-" for k, n in counts.values()) + " |")
    print("| **all** | | " + " | ".join(f"{k}/{n} = {k / n:.2f}" for k, n in total.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
