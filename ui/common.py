"""What every page shares: the run picker, opening the chosen run, ticks and game times."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import streamlit as st

from ui import catalog
from ui.db import RunDB, RunUnreadable

REFRESH_S = float(os.environ.get("AGORA_UI_REFRESH_S", "2"))
"""Seconds between refreshes of a page following a run as it writes."""

RUN_KEY = "run_key"


def entries() -> list[catalog.RunEntry]:
    return catalog.discover(catalog.settings())


def run_picker() -> catalog.RunEntry | None:
    """The sidebar's choice of run: the URL's ``?run=``, else the first named run, else the newest."""
    found = entries()
    config = catalog.settings()
    if not found:
        st.sidebar.info(f"No runs in `{config.runs_dir}` yet. Start one with "
                        f"`agora run SCENARIO --out {config.runs_dir}`; it appears here.")
        st.session_state.pop(RUN_KEY, None)
        st.session_state.pop("_run_entry", None)
        return None
    by_key = {e.key: e for e in found}
    wanted = st.query_params.get("run")
    if wanted in by_key and wanted != st.session_state.get("_run_in_url"):  # a link or an edited URL
        st.session_state[RUN_KEY] = wanted
    elif st.session_state.get(RUN_KEY) not in by_key:
        st.session_state[RUN_KEY] = found[0].key
    key = st.sidebar.selectbox("Run", list(by_key), key=RUN_KEY,
                               help=f"Runs named on the command line, then the runs in {config.runs_dir}, newest first")
    st.query_params["run"] = st.session_state["_run_in_url"] = key
    st.session_state["_run_entry"] = by_key[key]
    return by_key[key]


def selected() -> catalog.RunEntry | None:
    """The run the sidebar chose in the last full run (fragments rerun without the sidebar)."""
    entry = st.session_state.get("_run_entry")
    return entry if entry is not None and st.session_state.get(RUN_KEY) == entry.key else None


def is_running(entry: catalog.RunEntry) -> bool:
    """Whether the run's status says it is being written (False if it cannot be read)."""
    try:
        with RunDB(entry.path) as db:
            return db.run.get("status") == "running"
    except (RunUnreadable, sqlite3.Error):
        return False


@contextmanager
def run_db() -> Iterator[RunDB]:
    """The chosen run's database, read-only. A run that cannot be shown ends the page with a
    message instead (``st.stop``), as does a read that fails part-way (a damaged file)."""
    entry = selected()
    if entry is None:
        st.info("No run to show. Choose a runs folder with `agora ui --runs-dir DIR`, or name a run: "
                "`agora ui RUN_DIR`.")
        st.stop()
    try:
        db = RunDB(entry.path)
    except RunUnreadable as exc:
        st.error(str(exc))
        st.stop()
    try:
        yield db
    except sqlite3.DatabaseError as exc:
        st.error(f"{db.path} could not be read ({exc}). The file may be damaged.")
    finally:
        db.close()


def when(sim_time: object, day: bool = False) -> str:
    """'2023-02-13 07:20' -> 'Mon 07:20' (or 'Mon 13 Feb 07:20'); '-' for a missing time."""
    if not isinstance(sim_time, str) or not sim_time:
        return "-"
    try:
        moment = datetime.strptime(sim_time, "%Y-%m-%d %H:%M")
    except ValueError:
        return sim_time
    return moment.strftime("%a %d %b %H:%M" if day else "%a %H:%M")


def present(value: object) -> bool:
    """Not None, not NaN (pandas turns SQL nulls into either), not empty."""
    return value is not None and value == value and value != ""


def tick_picker(latest: int, key: str, follow: bool = False, label: str = "Tick") -> int:
    """A slider over the run's ticks; ``follow`` pins it to the latest (live mode)."""
    if follow or key not in st.session_state or st.session_state[key] > latest:
        st.session_state[key] = latest
    if latest <= 0:
        return 0
    return int(st.slider(label, 0, latest, key=key, disabled=follow,
                         help="Replay any moment of the run" if not follow else "Live: following the latest tick"))


def run_caption(db: RunDB) -> str:
    run = db.run
    return (f"{run.get('scenario')} · {run.get('status')} · seed {run.get('seed')} · "
            f"{run.get('backend')} / {run.get('model')}")


_MD_SPECIAL = set("\\`*_[]<>$~|")


def md(text: object) -> str:
    """Text from the model or a persona file, shown literally inside Markdown (no links,
    emphasis, HTML, LaTeX or Streamlit directives it happens to contain)."""
    out = "".join("\\" + c if c in _MD_SPECIAL else c for c in str(text if text is not None else ""))
    if out[:1] in ("#", "-", "+", "="):  # would start a heading or a list
        out = "\\" + out
    out = re.sub(r"^(\d+)([.)])", r"\1\\\2", out)  # would start a numbered list
    return out.replace("\n", "  \n")
