"""Agora's viewer, the Streamlit entry script: run picker in the sidebar, then the pages.

Started by `agora ui` (see simulation/cli/ui.py), or by hand:
``AGORA_UI_RUNS_DIR=runs streamlit run ui/app.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `streamlit run ui/app.py` puts ui/ itself on the path, not its parent
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from ui import common  # noqa: E402
from ui.db import RunDB, RunUnreadable  # noqa: E402

st.set_page_config(page_title="Agora", page_icon=":material/holiday_village:", layout="wide")

pages = [
    st.Page("views/town.py", title="Town", icon=":material/map:", default=True),
    st.Page("views/people.py", title="People", icon=":material/person:"),
    st.Page("views/conversations.py", title="Conversations", icon=":material/forum:"),
    st.Page("views/metrics.py", title="Metrics", icon=":material/monitoring:"),
    st.Page("views/runs.py", title="Runs", icon=":material/table_rows:"),
    st.Page("views/whisper.py", title="Whisper", icon=":material/record_voice_over:"),
]
page = st.navigation(pages)

st.sidebar.title("Agora")
entry = common.run_picker()


def run_status() -> None:
    """The chosen run's status line, refreshed while it runs (a fragment: no page reload)."""
    try:
        with RunDB(entry.path) as db:  # type: ignore[union-attr]
            run = db.run
    except RunUnreadable:
        st.caption(":red[cannot be shown (see the page)]")
        return
    st.caption(f"{run.get('scenario')} · **{run.get('status')}** · "
               f"{run.get('ticks_done') or 0}/{run.get('ticks_planned')} ticks · seed {run.get('seed')}")


if entry is not None:
    with st.sidebar:
        st.fragment(run_status, run_every=common.REFRESH_S if common.is_running(entry) else None)()

page.run()
