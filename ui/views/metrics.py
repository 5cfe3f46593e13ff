"""Metrics: LLM cost per tick, spread of the scenario's topics, the relationship graph,
probe answers, and rewards and evaluation scores where the run has them."""

from __future__ import annotations

import streamlit as st

from ui import charts, common
from ui import queries as q
from ui.db import RunDB

st.header("Metrics")
with common.run_db() as db:
    running = db.run.get("status") == "running"
    st.caption(common.run_caption(db))
live = st.toggle("Live: refresh while the run writes", value=running, key="metrics_live")


def llm_section(db: RunDB) -> None:
    st.subheader("LLM")
    totals = q.llm_totals(db)
    cols = st.columns(6)
    cols[0].metric("LLM calls", f"{totals['calls']:,}")
    cols[1].metric("tokens", f"{totals['tokens']:,}", help=f"{totals['prompt_tokens']:,} prompt + "
                   f"{totals['completion_tokens']:,} completion")
    mean = totals["mean_latency_s"]
    cols[2].metric("mean latency", "-" if mean is None else f"{mean:.2f} s", help="per call")
    cols[3].metric("cache hits", f"{totals['cache_hits']:,}")
    cols[4].metric("parse failures", f"{totals['parse_failures']:,}")
    cols[5].metric("fallbacks", f"{totals['fallbacks']:,}", help="answers replaced by the safe default")
    st.plotly_chart(charts.llm_per_tick(q.llm_per_tick(db)), key="metrics_llm")
    purposes = q.llm_by_purpose(db)
    if len(purposes):
        st.plotly_chart(charts.calls_by_purpose(purposes), key="metrics_purposes")


def awareness_section(db: RunDB) -> None:
    topics = q.topics(db)
    if not topics:
        return
    st.subheader("Awareness of the scenario's topics")
    st.caption("A person is aware from their first memory formed in the run (not a seed memory) that mentions "
               "one of the topic's keywords.")
    aware = q.awareness(db)
    ticks = q.ticks(db)
    n = len(q.names(db))
    for topic, keywords in topics.items():
        rows = aware[aware["topic"] == topic]
        st.plotly_chart(charts.awareness(aware, ticks, n, topic), key=f"metrics_aware_{topic}")
        who = ", ".join(f"{r.name} ({common.when(r.sim_time)})" for r in rows.itertuples()) or "nobody yet"
        st.markdown(f"**{common.md(topic)}**: {len(rows)}/{n} aware: {common.md(who)}")
        st.caption(f"keywords: {common.md(', '.join(keywords))}")


def graph_section(db: RunDB, latest: int) -> None:
    source = q.graph_source(db)
    st.subheader("Relationships" if source == "relationships" else "Who talks with whom")
    if source != "relationships":
        st.caption("This run records no relationships table; the graph links people who have had a conversation.")
    st.plotly_chart(charts.density(q.density(db), source), key="metrics_density")
    tick = common.tick_picker(latest, key="metrics_graph_tick", follow=live, label="Graph at tick")
    st.plotly_chart(charts.relationship_graph(q.names(db), q.graph_edges(db, tick), source), key="metrics_graph")


def outcomes_section(db: RunDB) -> None:
    answers = q.probes(db)
    if len(answers):
        st.subheader("Probe answers")
        for question, group in answers.groupby("question", sort=False):
            st.markdown(f"**{common.md(question)}**")
            st.dataframe(group[["name", "answer"]], hide_index=True, width="stretch")
    rewards = q.rewards(db)
    if rewards is not None and len(rewards):
        st.subheader("Rewards")
        st.caption("From `agora rewards`: each utterance and decided action judged on the rubric (in character, "
                   "own goals, responsive, plausible), reward 0-1; advantage = (reward - group mean) / group std "
                   "within its conversation or tick (docs/rewards.md).")
        st.plotly_chart(charts.rewards(rewards), key="metrics_rewards")
        st.plotly_chart(charts.advantages(rewards), key="metrics_advantages")
        st.plotly_chart(charts.reward_totals(rewards), key="metrics_reward_totals")
        summary = q.reward_summary(db)
        if len(summary):
            st.dataframe(summary, hide_index=True, width="stretch")
    scores = q.evaluations(db)
    if scores is not None and len(scores):
        st.subheader("Evaluation scores")
        for suite in sorted(scores["suite"].unique()):
            st.plotly_chart(charts.evaluations(scores, suite), key=f"metrics_eval_{suite}")


@st.fragment(run_every=common.REFRESH_S if live else None)
def metrics_view() -> None:
    with common.run_db() as db:
        latest = q.latest_tick(db)
        if latest is None:
            st.info("The run has not completed its first tick yet.")
            return
        llm_section(db)
        awareness_section(db)
        graph_section(db, latest)
        outcomes_section(db)


metrics_view()
