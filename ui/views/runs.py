"""Runs: every run in the folder side by side (settings, size, cost, outcomes), and the rounds of
any co-evolution loop (``agora evolve``) found there: each round's rewards and behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from simulation.rundb import lineage
from simulation.rundb.intervals import format_value
from ui import catalog, charts, common
from ui import queries as q
from ui.db import RunDB, RunUnreadable



def _cell(e: Any) -> str:
    return f"{format_value(e.mean)} [{format_value(e.low)}–{format_value(e.high)}]" if e.mean is not None else "–"


def show_evolution(n: int, folder: Path) -> None:
    """One loop's lineage (which runs trained which model) and its per-round table and plot."""
    st.subheader(f"Co-evolution: `{folder.name}`")
    try:
        rounds = lineage.read(folder)
    except lineage.LineageUnreadable as exc:
        st.warning(str(exc))
        return
    if not rounds:
        st.info("No round recorded yet: round 0 (the starting model on the held-out seeds) is still running.")
        return
    st.caption(f"{len(rounds) - 1} training round(s) after round 0. Every round's model is measured on the same "
               "held-out seeds: mean [95 % interval] over them. *moved*: the last round's interval wholly above or "
               "below round 0's; a prosocial measure that fell while the mean reward rose is *traded away*.")
    st.dataframe(pd.DataFrame([{"round": r.round, "model": Path(r.model).name if "/" in r.model else r.model,
                                "parent": Path(r.parent).name if r.parent and "/" in r.parent else r.parent,
                                "trained on": f"{len(r.trained_on)} run(s)",
                                "held-out runs": len(r.held_out_runs)} for r in rounds]),
                 hide_index=True, width="stretch")
    rows = lineage.round_table(rounds)
    table = pd.DataFrame([{"metric": row["metric"], "prosocial": row["prosocial"],
                           **{f"round {r.round}": _cell(e) for r, e in zip(rounds, row["rounds"], strict=True)},
                           "change": format_value(row["change"]), "moved": row["moved"],
                           "traded away": row["traded"]} for row in rows])
    traded = [row["metric"] for row in rows if row["traded"]]
    if traded:
        st.error("Prosocial measures that fell while the reward rose: " + ", ".join(f"`{t}`" for t in traded))
    st.plotly_chart(charts.evolve_rounds(rows), key=f"evolve_rounds_{n}")
    st.dataframe(table, hide_index=True, width="stretch")


def show_forks(found: list[catalog.RunEntry], lineage_of: dict[str, tuple[str, str | None, int | None]]) -> None:
    """Each fork whose parent is in the list, beside it: who was aware of each fact over game time in
    both, and the tick where they part (identical before it, by construction: ``agora fork``)."""
    by_id = {lineage_of[e.key][0]: e for e in found if e.key in lineage_of}
    pairs = [(e, by_id[parent], tick) for e in found if e.key in lineage_of
             for _, parent, tick in [lineage_of[e.key]] if parent is not None and parent in by_id]
    if not pairs:
        return
    st.subheader("Forks beside their parents")
    for n, (fork, parent, tick) in enumerate(pairs):
        with RunDB(parent.path) as pdb, RunDB(fork.path) as fdb:
            before, after = q.fact_curves(pdb), q.fact_curves(fdb)
        st.caption(f"`{fork.key}`, forked from `{parent.key}` at tick {tick}: dotted, the parent; solid, the fork.")
        if not before and not after:
            st.info("Neither run traces a fact (the scenario has no `facts:`), so there is no spread to compare.")
            continue
        st.plotly_chart(charts.fork_vs_parent(before, after, tick if tick is not None else 0), key=f"fork_{n}")


st.header("Runs")
config = catalog.settings()
found = common.entries()
evolved = catalog.evolutions(config)
st.caption(f"Runs named on the command line, then the runs in `{config.runs_dir}`, newest first"
           + (", then the runs of the co-evolution loops below." if evolved else "."))
for n, folder in enumerate(evolved):
    show_evolution(n, folder)
if not found:
    st.info(f"No runs in `{config.runs_dir}` yet. Start one with `agora run SCENARIO --out {config.runs_dir}`.")
    st.stop()

rows = []
lineage_of: dict[str, tuple[str, str | None, int | None]] = {}
for entry in found:
    row = {"run": entry.key}
    try:
        with RunDB(entry.path) as db:
            row |= q.summary(db)
            lineage_of[entry.key] = q.lineage_of(db)
    except RunUnreadable as exc:
        row["problem"] = str(exc)
    except Exception as exc:  # a damaged file must not hide the other runs
        row["problem"] = f"cannot be read: {exc}"
    rows.append(row)
table = pd.DataFrame(rows)
readable = table[table["problem"].isna()] if "problem" in table else table
columns = [c for c in ("run", "scenario", "status", "seed", "backend", "model", "agents", "ticks", "game time",
                       "LLM calls", "tokens", "parse failures", "cache hits", "conversations", "utterances",
                       "outcomes", "fork of", "probe answers", "started", "problem") if c in table]
st.dataframe(table[columns], hide_index=True, width="stretch",
             column_config={"outcomes": st.column_config.TextColumn("outcomes", width="large"),
                            "fork of": st.column_config.TextColumn("fork of", width="large"),
                            "problem": st.column_config.TextColumn("problem", width="large")})
if len(readable):
    st.plotly_chart(charts.runs_compare(readable), key="runs_compare")
show_forks(found, lineage_of)
st.markdown("**Open a run**")
for entry in found:
    st.page_link("views/town.py", label=entry.key, icon=":material/map:", query_params={"run": entry.key})
