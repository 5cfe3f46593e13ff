"""What a run cost: LLM calls and tokens per agent per game hour, wall time per game hour,
and the engine's overhead (wall time outside the LLM) as a share of wall time.

    .venv/bin/python bench/run_cost.py runs/<run>/run.db [more run.db ...]

Reads run.db only, so it measures exactly what `agora run` did (e.g. after `make run`).
"""

from __future__ import annotations

import sys

import sqlite_utils
from rich.console import Console
from rich.table import Table


def main(paths: list[str]) -> None:
    table = Table(title="run cost")
    cols = ("run", "agents", "game h", "calls", "calls/agent/h", "tokens/agent/h", "prompt:completion",
            "parse fail", "fallback", "wall s/game h", "outside LLM")
    for col in cols:
        table.add_column(col)
    for path in paths:
        db = sqlite_utils.Database(path)
        run = next(db["runs"].rows)
        agents = db["agents"].count
        ticks, wall, llm_s = db.execute("select count(*), sum(wall_s), sum(llm_s) from ticks").fetchone()
        calls, pt, ct, pf, fb = db.execute(
            "select count(*), sum(prompt_tokens), sum(completion_tokens), sum(1 - parse_ok), sum(fallback) "
            "from llm_calls where purpose not like 'probe%'").fetchone()
        hours = ticks * run["tick_minutes"] / 60
        table.add_row(run["run_id"], str(agents), f"{hours:g}", str(calls), f"{calls / agents / hours:.2f}",
                      f"{(pt + ct) / agents / hours:.0f}", f"{pt / max(ct, 1):.0f}:1", str(pf), str(fb),
                      f"{wall / hours:.0f}", f"{1 - llm_s / wall:.2%}")
    Console(width=max(160, Console().width)).print(table)
    print("(probe calls at the end of the run are excluded; 'outside LLM' = 1 - sum of call latencies / tick wall time)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
