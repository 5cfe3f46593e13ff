"""Whisper: put a thought into a person's head while the run goes (the "inner voice")."""

from __future__ import annotations

import streamlit as st

from ui import common
from ui import queries as q
from ui.inbox import MAX_CHARS, WhisperRefused, send_whisper

st.header("Whisper")
st.caption("A whisper becomes the person's own thought (a memory) at the start of the run's next tick, "
           "as the scenario's scheduled whispers do.")

with common.run_db() as db:
    names = q.names(db)
    status = db.run.get("status")
    has_inbox = db.has("inbox")
    path = db.path
if not has_inbox:
    st.warning("This run.db has no inbox table, so it cannot take whispers.")
    st.stop()
if status == "finished":
    st.info("This run has finished: nothing would deliver a whisper now.")
elif status != "running":
    st.info(f"This run is {status}: a whisper waits in the inbox until the run is resumed.")

with st.form("whisper", clear_on_submit=True, border=True):
    agent_id = st.selectbox("To", list(names), format_func=lambda a: names[a], key="whisper_to")
    text = st.text_area("Thought", max_chars=MAX_CHARS, key="whisper_text",
                        placeholder="e.g. I should tell everyone I meet about the party.")
    sender = st.text_input("From (for the record)", value="viewer", key="whisper_sender")
    sent = st.form_submit_button("Whisper", disabled=status == "finished", type="primary")
if sent:
    try:
        new_id = send_whisper(path, agent_id, text or "", sender or "viewer")
    except WhisperRefused as exc:
        st.error(str(exc))
    else:
        st.success(f"Whisper #{new_id} to {common.md(names[agent_id])} is in the inbox; "
                   "the run delivers it at its next tick.")


def inbox_table() -> None:
    with common.run_db() as db:
        rows = q.inbox(db)
    st.subheader("Inbox")
    if rows.empty:
        st.caption("No whispers sent yet.")
        return
    rows["to"] = [names.get(a, a) for a in rows["agent_id"]]
    rows["status"] = [f"delivered at tick {int(t)} ({common.when(at)})" if common.present(t) else "pending"
                      for t, at in zip(rows["delivered_tick"], rows["delivered_at"], strict=True)]
    st.dataframe(rows[["id", "to", "text", "status", "sender", "created_at"]], hide_index=True, width="stretch",
                 column_config={"text": st.column_config.TextColumn("text", width="large"),
                                "created_at": st.column_config.TextColumn("sent (UTC)")})


# While whispers are pending in a running run, watch for their delivery.
with common.run_db() as db:
    pending = status == "running" and bool(db.one(
        "select count(*) from inbox where run_id = ? and delivered_tick is null", (db.run_id,)))
st.fragment(inbox_table, run_every=common.REFRESH_S if pending else None)()
