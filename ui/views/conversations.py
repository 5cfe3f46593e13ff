"""Conversations: every transcript, filterable by person, place, time and words."""

from __future__ import annotations

import streamlit as st

from ui import common
from ui import queries as q

SHOWN = 60  # transcripts drawn at once (newest first); narrow the filters to reach older ones

st.header("Conversations")
with common.run_db() as db:
    names = q.names(db)
    places = q.places(db)
    place_names = dict(zip(places["place_id"], places["name"], strict=True))
    latest = q.latest_tick(db)
    if latest is None:
        st.info("The run has not completed its first tick yet.")
        st.stop()
    tick_rows = q.ticks(db)
    times = dict(zip(tick_rows["tick"], tick_rows["sim_time"], strict=True))
    a, b = st.columns(2)
    who = a.multiselect("People", list(names), format_func=lambda x: names[x], key="conv_people",
                        placeholder="anyone")
    where = b.multiselect("Places", list(place_names), format_func=lambda x: place_names[x], key="conv_places",
                          placeholder="anywhere")
    c, d = st.columns(2)
    if latest > 0:
        lo, hi = c.select_slider("Game time", options=list(range(latest + 1)), value=(0, latest), key="conv_time",
                                 format_func=lambda t: common.when(times.get(t)))
    else:
        lo, hi = 0, 0
    words = d.text_input("Words said", key="conv_words", placeholder="e.g. party")
    found = q.conversations(db, who or None, where or None, (lo, hi), words)
    more = f"; the newest {SHOWN} are shown" if len(found) > SHOWN else ""
    st.caption(f"{len(found)} conversation(s) match{more}")
    found = found.head(SHOWN)
    lines = q.utterances_of(db, [int(i) for i in found["id"]])
    by_conv = {cid: group for cid, group in lines.groupby("conversation_id")}
    for conv in found.itertuples():
        pair = " & ".join(names.get(p, p) for p in conv.participants)
        span = common.when(conv.started_at, day=True)
        if common.present(conv.ended_at):
            span += f" to {common.when(conv.ended_at)[4:]}"
        end = f"ended: {conv.end_reason}" if common.present(conv.end_reason) else "going on"
        title = f"{span} · {place_names.get(conv.place, conv.place)} · {pair} · {conv.turns} lines · {end}"
        with st.expander(title, expanded=len(found) <= 3):
            group = by_conv.get(conv.id)
            if group is None:
                st.caption("No lines recorded.")
                continue
            st.markdown("\n\n".join(f"**{common.md(names.get(u.speaker_id, u.speaker_id))}** "
                                    f"({common.when(u.sim_time)[4:]}{', ' + u.aim if common.present(u.aim) else ''})"
                                    f": {common.md(u.text)}" for u in group.itertuples()))
