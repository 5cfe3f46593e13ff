"""People: one person's card, plan, doing, memory stream, retrievals, reflections, relationships."""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui import charts, common
from ui import queries as q
from ui.db import RunDB

st.header("People")


def persona_card(agent: dict[str, Any], names: dict[str, str]) -> None:
    p = agent["persona"]
    with st.container(border=True):
        st.subheader(agent["name"])
        st.markdown(common.md(f"{agent.get('age')} · {agent.get('occupation')}"))
        if p.get("household"):
            st.caption(common.md(p["household"]))
        if p.get("traits"):
            st.markdown(" ".join(f":blue-badge[{common.md(t)}]" for t in p["traits"]))
        if p.get("backstory"):
            st.markdown(common.md(p["backstory"]))
        if p.get("aspiration"):
            st.markdown(f"*Wants from life:* {common.md(p['aspiration'])}")
        if p.get("skills"):
            st.markdown(f"*Good at:* {common.md(', '.join(p['skills']))}")
        if p.get("speaking_style"):
            st.markdown(f"*Speaks:* {common.md(p['speaking_style'])}")
        routine = p.get("routine") or {}
        if routine:
            st.markdown(f"*Routine:* up {str(routine.get('wake', ''))[:5]}, bed {str(routine.get('sleep', ''))[:5]}. "
                        f"{common.md(routine.get('description', ''))}")
        five = p.get("big_five") or {}
        if five:
            st.caption(" · ".join(f"{k} {float(v):.2f}" for k, v in five.items()))
        if p.get("relationships"):
            with st.expander("Who they know (persona file)"):
                for other, text in p["relationships"].items():
                    st.markdown(f"- **{common.md(names.get(other, other))}**: {common.md(text)}")


def schedule_item(item: dict[str, Any], places: dict[str, str]) -> str:
    """One decomposed step, whatever keys its level uses (time or hour, activity or action, ...)."""
    when = item.get("start") or item.get("time") or item.get("at")
    if when is None and item.get("hour") is not None:
        when = f"{int(item['hour']):02d}:00"
    what = item.get("activity") or item.get("action") or item.get("what") or ""
    place = item.get("place")
    minutes = item.get("minutes") or item.get("duration")
    return " ".join(part for part in (
        str(when or ""), common.md(what), f"({minutes} min)" if minutes else "",
        f"@ {common.md(places.get(place, place))}" if place else "") if part)


def now_and_plan(db: RunDB, agent: dict[str, Any], tick: int, places: dict[str, str]) -> None:
    agent_id = agent["agent_id"]
    arrived, left = agent.get("arrived_tick"), agent.get("left_tick")  # someone who came or went during the run
    state = q.state_of(db, agent_id, tick) if not (arrived and tick < arrived) else None
    with st.container(border=True):
        st.markdown(f"**At tick {tick}** ({common.when(q.time_of(db, tick))})")
        if arrived and tick < arrived:
            st.caption(f"Not in the town yet: arrives at tick {arrived}.")
        elif left is not None and tick >= left:
            st.caption(f"Left the town at tick {left}. Before that:")
        if state:
            st.markdown(f"{common.md(state['action'])} · *{state['status']}* at "
                        f"**{common.md(state.get('place_name') or state['place'])}**")
            if state.get("mood"):
                st.markdown(f"Feels **{common.md(state['mood'])}** (valence {state.get('valence') or 0:+.2f}, "
                            f"arousal {state.get('arousal') or 0:+.2f}; `cognition.moods`)")
        plan = q.plan_at(db, agent_id, tick)
        if plan:
            st.markdown(f"**Plan for {plan['day']}**" + ("" if plan.get("ok", 1) else " (the safe default)"))
            now_hour = int((q.time_of(db, tick) or "0000-00-00 00")[11:13] or 0)
            current = max((i.get("hour", 0) for i in plan["items"] if i.get("hour", 0) <= now_hour), default=None)
            lines = []
            for item in plan["items"]:
                mark = "▶ " if item.get("hour") == current else ""
                lines.append(f"- {mark}{schedule_item(item, places)}")
            st.markdown("\n".join(lines))
        else:
            st.caption("No daily plan yet.")
        for level in q.schedule_at(db, agent_id, tick):
            st.markdown(f"**Decomposed ({common.md(level['level'])})**" +
                        (f" of {common.md(level['parent'])}" if level.get("parent") else ""))
            st.markdown("\n".join(f"- {schedule_item(i, places)}" for i in level["items"]) or "-")


def memory_stream(db: RunDB, agent_id: str, tick: int) -> None:
    wanted = st.query_params.get("memory")
    if wanted and st.session_state.get("people_memory_applied") != wanted:  # arrived by an evidence link
        st.session_state["people_search"] = f"#{wanted}"
        st.session_state["people_memory_applied"] = wanted
    left, right = st.columns([3, 2])
    search = left.text_input("Search memories", key="people_search", placeholder="words that must all occur, or #id")
    kinds = right.multiselect("Kinds", q.memory_kinds(db, agent_id), key=f"people_kinds_{agent_id}")
    frame = q.memories(db, agent_id, tick, search, kinds)
    st.caption(f"{len(frame)} memories" + (" match" if search or kinds else ""))
    if frame["importance"].notna().any():
        st.plotly_chart(charts.importance(frame), key="people_importance")
    st.dataframe(frame.drop(columns=[c for c in ("evidence",) if c in frame]), hide_index=True, width="stretch",
                 column_config={"text": st.column_config.TextColumn("text", width="large"),
                                "importance": st.column_config.NumberColumn("importance", format="%.1f")})


def retrieval(db: RunDB, agent_id: str, tick: int) -> None:
    found = q.retrievals(db, agent_id, tick)
    if not found:
        st.caption("No retrieval recorded for this person yet.")
        return
    choice = st.selectbox("Retrieval", range(len(found)), key=f"people_retrieval_{agent_id}",
                          format_func=lambda i: f"tick {found[i]['tick']} · {found[i]['purpose']}: "
                                                f"{charts.short(found[i]['query'], 60)}")
    r = found[choice]
    st.markdown(f"**Query** ({r['purpose']}, {common.when(r['sim_time'])}): {common.md(r['query'])}")
    if r["results"]:
        st.plotly_chart(charts.retrieval_scores(r["results"]), key="people_retrieval_chart")
    else:
        st.caption("It returned nothing.")


def reflection_list(db: RunDB, agent_id: str, tick: int, run_key: str) -> None:
    found = q.reflections(db, agent_id, tick)
    if not found:
        st.caption("No reflections yet.")
        return
    for r in found:
        depth = f", depth {r['depth']}" if r.get("depth") is not None else ""
        importance = f", importance {r['importance']:g}" if r.get("importance") is not None else ""
        title = f"#{r['id']} · {common.when(r['sim_time'])}{importance}{depth}: {charts.short(r['text'], 90)}"
        with st.expander(title):
            st.markdown(common.md(r["text"]))
            st.markdown(f"**Evidence** ({len(r['evidence'])} memories)")
            for e in r["evidence"]:
                st.page_link("views/people.py", label=f"#{e['id']} · {common.when(e['sim_time'])} · {e['kind']}: "
                             f"{charts.short(e['text'], 110)}", icon=":material/link:",
                             query_params={"run": run_key, "agent": agent_id, "memory": str(e["id"])})


def relationships(db: RunDB, agent_id: str, tick: int, names: dict[str, str]) -> None:
    frame = q.relationships_at(db, tick, agent_id)
    if frame.empty:
        st.caption("No relationships recorded for this person yet.")
        return
    if frame["sentiment"].notna().any():
        st.plotly_chart(charts.sentiments(frame, names), key="people_sentiments")
    shown = frame.assign(person=[names.get(o, o) for o in frame["other_id"]])
    st.dataframe(shown[["person", "conversations", "sentiment", "view", "sim_time"]], hide_index=True, width="stretch",
                 column_config={"view": st.column_config.TextColumn("view", width="large"),
                                "sim_time": st.column_config.TextColumn("since")})


with common.run_db() as db:
    people = {a["agent_id"]: a for a in q.agents(db)}
    names = {a: p["name"] for a, p in people.items()}
    latest = q.latest_tick(db)
    if not people or latest is None:
        st.info("Nobody to show yet: the run has not completed its first tick.")
        st.stop()
    if st.session_state.get("people_agent") not in people:
        wanted = st.query_params.get("agent")
        st.session_state["people_agent"] = wanted if wanted in people else next(iter(people))
    pick, when = st.columns([2, 3])
    agent_id = pick.selectbox("Person", list(people), key="people_agent", format_func=lambda a: names[a])
    st.query_params["agent"] = agent_id
    with when:
        tick = common.tick_picker(latest, key="people_tick", label="As of tick")
    card, now = st.columns([3, 2])
    with card:
        persona_card(people[agent_id], names)
    with now:
        now_and_plan(db, people[agent_id], tick, q.place_names(db))
    tabs = {"Memory stream": lambda: memory_stream(db, agent_id, tick)}
    if db.has("retrievals"):
        tabs["Last retrieval"] = lambda: retrieval(db, agent_id, tick)
    if db.has("memories", "depth") or db.one("select 1 from memories where run_id = ? and kind = 'reflection' limit 1",
                                            (db.run_id,)):
        tabs["Reflections"] = lambda: reflection_list(db, agent_id, tick, st.session_state.get(common.RUN_KEY, ""))
    if db.has("relationships"):
        tabs["Relationships"] = lambda: relationships(db, agent_id, tick, names)
    for tab, render in zip(st.tabs(list(tabs)), tabs.values(), strict=True):
        with tab:
            render()
