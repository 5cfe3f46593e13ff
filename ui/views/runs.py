"""Runs: every run in the folder side by side (settings, size, cost, outcomes)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ui import catalog, charts, common
from ui import queries as q
from ui.db import RunDB, RunUnreadable

st.header("Runs")
config = catalog.settings()
found = common.entries()
st.caption(f"Runs named on the command line, then the runs in `{config.runs_dir}`, newest first.")
if not found:
    st.info(f"No runs in `{config.runs_dir}` yet. Start one with `agora run SCENARIO --out {config.runs_dir}`.")
    st.stop()

rows = []
for entry in found:
    row = {"run": entry.key}
    try:
        with RunDB(entry.path) as db:
            row |= q.summary(db)
    except RunUnreadable as exc:
        row["problem"] = str(exc)
    except Exception as exc:  # a damaged file must not hide the other runs
        row["problem"] = f"cannot be read: {exc}"
    rows.append(row)
table = pd.DataFrame(rows)
readable = table[table["problem"].isna()] if "problem" in table else table
columns = [c for c in ("run", "scenario", "status", "seed", "backend", "model", "agents", "ticks", "game time",
                       "LLM calls", "tokens", "parse failures", "cache hits", "conversations", "utterances",
                       "outcomes", "probe answers", "started", "problem") if c in table]
st.dataframe(table[columns], hide_index=True, width="stretch",
             column_config={"outcomes": st.column_config.TextColumn("outcomes", width="large"),
                            "problem": st.column_config.TextColumn("problem", width="large")})
if len(readable):
    st.plotly_chart(charts.runs_compare(readable), key="runs_compare")
st.markdown("**Open a run**")
for entry in found:
    st.page_link("views/town.py", label=entry.key, icon=":material/map:", query_params={"run": entry.key})
