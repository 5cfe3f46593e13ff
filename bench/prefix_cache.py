"""Persona-prefix reuse in the llama.cpp backend: the same requests, with and without saved
prefix states, in one process. Prints wall time, the speed-up ratio, and whether every
answer is identical (it must be: reuse is designed to be bit-exact).

    .venv/bin/python bench/prefix_cache.py [--run runs/<run>/run.db] [--limit 48]

With --run, the requests are the ones a real run made (its llm_calls rows, in tick order);
without, a synthetic mix of 8 personas x 6 questions.
"""

from __future__ import annotations

import argparse
import json
import time

import sqlite_utils
from rich.console import Console
from rich.table import Table

from simulation.llm.llamacpp import LlamaCppBackend
from simulation.llm.types import LLMRequest


def from_run(path: str, limit: int) -> list[list[LLMRequest]]:
    db = sqlite_utils.Database(path)
    batches: dict[tuple[int, str], list[LLMRequest]] = {}
    for r in db.query("select * from llm_calls where attempt = 0 order by id limit ?", [limit]):
        req = LLMRequest(messages=json.loads(r["messages"]), json_schema=json.loads(r["json_schema"] or "null"),
                         max_tokens=r["max_tokens"], temperature=r["temperature"], seed=r["seed"])
        batches.setdefault((r["tick"], r["purpose"]), []).append(req)
    return list(batches.values())


def synthetic() -> list[list[LLMRequest]]:
    schema = {"type": "object", "properties": {"say": {"type": "string", "maxLength": 80}}, "required": ["say"]}
    personas = [f"You are person {i}, who works in town, likes walks and talks with neighbours. " * 10 for i in range(8)]
    return [[LLMRequest(messages=[{"role": "system", "content": p},
                                  {"role": "user", "content": f"It is {8 + q}:00. What do you say to a neighbour?"}],
                        json_schema=schema, max_tokens=40, seed=q) for p in personas] for q in range(6)]


def timed(backend: LlamaCppBackend, batches: list[list[LLMRequest]]) -> tuple[float, list[str]]:
    start = time.perf_counter()
    texts = [o.text for batch in batches for o in backend.generate(batch)]
    return time.perf_counter() - start, texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", help="run.db whose llm_calls to replay")
    ap.add_argument("--limit", type=int, default=48)
    args = ap.parse_args()
    batches = from_run(args.run, args.limit) if args.run else synthetic()
    n = sum(len(b) for b in batches)
    results = {}
    for label, megabytes in (("no saved states", 0), ("saved prefix states", 1024)):
        backend = LlamaCppBackend(prefix_cache_mb=megabytes)
        wall, texts = timed(backend, batches)
        results[label] = (wall, texts, backend.prefix_restores + backend.prefix_hits)
        backend.close()
    table = Table(title=f"{n} requests in {len(batches)} batches")
    for col in ("mode", "wall s", "ms / request", "prefix reuses"):
        table.add_column(col)
    for label, (wall, _, reuse) in results.items():
        table.add_row(label, f"{wall:.1f}", f"{1000 * wall / n:.0f}", str(reuse))
    console = Console(width=max(120, Console().width))
    console.print(table)
    (w0, t0, _), (w1, t1, _) = results.values()
    console.print(f"speed-up with prefix states: {w0 / w1:.2f}x; answers identical: {t0 == t1}")


if __name__ == "__main__":
    main()
