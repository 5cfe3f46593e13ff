"""Town: the map at any tick, replayed with a slider or followed live while the run writes."""

from __future__ import annotations

import streamlit as st

from ui import charts, common
from ui import queries as q

st.header("Town")
with common.run_db() as db:
    running = db.run.get("status") == "running"
    st.caption(common.run_caption(db))

linked = st.query_params.get("tick")  # a link to a moment: ?tick=N
live = st.toggle("Live: follow the run as it writes", value=running and not linked, key="town_live",
                 help=f"Refreshes the map every {common.REFRESH_S:g} s without reloading the page")


@st.fragment(run_every=common.REFRESH_S if live else None)
def town_view() -> None:
    """Only this part reruns, on the slider or the live timer."""
    with common.run_db() as db:
        latest = q.latest_tick(db)
        if latest is None:
            st.info("The run has not completed its first tick yet." if running else "This run recorded no ticks.")
            return
        if linked and linked.isdigit() and st.session_state.get("town_tick_linked") != linked:
            st.session_state["town_tick"] = int(linked)
            st.session_state["town_tick_linked"] = linked
        tick = common.tick_picker(latest, key="town_tick", follow=live)
        states = q.states_at(db, tick)
        said = q.utterances_at(db, tick)
        names = q.names(db)
        st.markdown(f"#### Tick {tick} · {common.when(q.time_of(db, tick), day=True)}  \n"
                    f"{db.run.get('ticks_done') or 0} of {db.run.get('ticks_planned')} ticks done · "
                    f"{db.run.get('status')}")
        links = charts.conversation_links(states, said)
        now = q.happenings_at(db, q.time_of(db, tick))
        rings = [(h.fact_id, h.place, f"{h.starts[11:]}-{h.ends[11:]}") for h in now]
        st.plotly_chart(charts.town_map(q.places(db), q.paths(db), states, links, happening=rings), key="town_map",
                        config={"displaylogo": False})
        if now:
            where = q.place_names(db)
            st.caption("Going on now: " + "; ".join(
                f"{common.md(h.fact_id)} at {common.md(where.get(h.place, h.place))}, {h.starts[11:]}-{h.ends[11:]}"
                for h in now))
        left, right = st.columns([1, 1])
        with left:
            st.markdown("**Who is where**")
            st.dataframe(
                states.rename(columns={"name": "person", "place_name": "at"})[["person", "at", "status", "action"]],
                hide_index=True, width="stretch", height=38 + 35 * len(states))
        with right:
            if len(said):
                st.markdown("**Said this tick**")
                for r in said.itertuples():
                    st.markdown(f"**{common.md(names.get(r.speaker_id, r.speaker_id))}** to "
                                f"{common.md(names.get(r.listener_id, r.listener_id))}: {common.md(r.text)}")
            events = q.events_at(db, tick)
            shown = events[~events["kind"].isin(["conversation_start", "conversation_end"])] if len(events) else events
            if len(shown):
                st.markdown("**Happened this tick**")
                st.markdown("\n".join(f"- {common.md(t)}" for t in shown["text"].head(30)))


town_view()
