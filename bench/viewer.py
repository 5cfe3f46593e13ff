"""How long the viewer takes to show a run: each page's first render (cold caches) and a rerun
(Streamlit's caches warm), through Streamlit's AppTest, which runs the page scripts as a browser
session would without the browser.

    .venv/bin/python bench/viewer.py runs/<run>                 # every page of one run
    .venv/bin/python bench/scale.py --people 1000 --scripted --out /tmp/big
    .venv/bin/python bench/viewer.py /tmp/big/runs/<run>        # a 1,000-person run.db

Prints the run's size (people, ticks, rows of the biggest tables, run.db MB) and, per page, the
seconds of the first render and of a rerun. Rendering in a browser adds the transfer and the
drawing of figures on top; the page scripts are what grows with the run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

APP = ROOT / "ui" / "app.py"
PAGES = ("town", "people", "conversations", "metrics", "runs")


def render(page: str) -> tuple[float, float, list[str]]:
    """Seconds of the first render and of a rerun of ``page``, and any exception shown."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=600)
    if page != "town":
        at.switch_page(f"views/{page}.py")
    started = time.perf_counter()
    at.run()
    first = time.perf_counter() - started
    started = time.perf_counter()
    at.run()
    again = time.perf_counter() - started
    return first, again, [str(e.value) for e in at.exception]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    args = ap.parse_args()
    run_dir = args.run_dir.resolve()
    os.environ["AGORA_UI_RUNS"] = str(run_dir)
    os.environ["AGORA_UI_RUNS_DIR"] = str(run_dir.parent)
    con = sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True)
    people = con.execute("select count(*) from agents").fetchone()[0]
    ticks = con.execute("select count(*) from ticks").fetchone()[0]
    sizes = {t: con.execute(f"select count(*) from [{t}]").fetchone()[0]
             for t in ("memories", "events", "agent_states", "utterances", "llm_calls")}
    con.close()
    mb = sum(p.stat().st_size for p in run_dir.glob("run.db*")) / 1e6
    print(f"{run_dir.name}: {people} people, {ticks} ticks, run.db {mb:.1f} MB; rows: "
          + ", ".join(f"{t} {n:,}" for t, n in sizes.items()))
    print(f"{'page':<14} {'first render s':>14} {'rerun s':>8}")
    for page in PAGES:
        first, again, errors = render(page)
        print(f"{page:<14} {first:>14.2f} {again:>8.2f}" + (f"  EXCEPTION: {errors}" if errors else ""))


if __name__ == "__main__":
    main()
