"""Metrics: LLM cost per tick, how the scenario's facts spread (from the run's provenance), the
behaviour metrics, the relationship graph, probe answers, and rewards and evaluation scores
where the run has them."""

from __future__ import annotations

import sqlite3
from typing import Any

import pandas as pd
import streamlit as st

from simulation.rundb.behaviour import failing_purposes
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


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def facts_section(db: RunDB) -> None:
    st.subheader("Spread of the scenario's facts")
    if not q.traced(db):
        st.info("This run records no provenance (it was recorded before run.db kept where each memory came "
                "from), so the spread of facts cannot be shown. Run the scenario again to trace it.")
        return
    facts = q.facts(db)
    if not facts:
        st.info("The scenario declares no facts (`facts:`), so there is no spread to show.")
        return
    st.caption("A person is aware of a fact from their first memory carrying it that came from outside them: "
               "seeded, whispered, perceived (a place event, or seeing someone) or heard from someone in a "
               "conversation (a recap, the person's own summary, does not count: one that carries a fact no line "
               "did is their invention). Whoever was told it (heard) hangs under whoever told them; anyone else is "
               "a root. Depth counts tellings from a root. See docs/provenance.md.")
    who = q.names(db)
    n = len(who)
    curves = q.fact_curves(db)
    learned = q.fact_learned(db)
    spread = q.fact_spread(db)
    places = q.places(db)
    homes = q.homes(db)
    for fact_id, fact in facts.items():
        rows = learned.get(fact_id, pd.DataFrame(columns=q.LEARNED_COLUMNS))
        st.markdown(f"**{common.md(fact_id)}**: {common.md(fact.text)}")
        s = spread.get(fact_id)
        if s is not None:
            cols = st.columns(8)
            cols[0].metric("aware", f"{s.aware}/{s.people}", help="people aware of it by now")
            cols[1].metric("told", f"{s.told}", help="aware because someone passed it on (heard from them)")
            cols[2].metric("roots", f"{s.roots}", help="aware from the scenario (a seed, whisper or place event) "
                                                      "or from seeing someone")
            cols[3].metric("depth", f"{s.depth}", help="the most tellings between a root and anyone")
            cols[4].metric("distortion", _share(s.distortion),
                           help=f"of the people told, the share whose first version changed a detail "
                                f"({s.distorted}/{s.told})")
            cols[5].metric("retention", _share(s.retention),
                           help=f"details kept / (kept + lost + changed) over the told people's first versions "
                                f"({s.kept} kept, {s.lost} lost, {s.changed} changed)")
            cols[6].metric("invented", f"{s.invented}", help="memories carrying it from a person's own plan, line "
                                                            "or reflection before they were aware of it")
            cols[7].metric("from unaware", f"{s.from_unaware}",
                           help="people told by someone who was not aware of it themselves")
        st.plotly_chart(charts.fact_awareness(curves.get(fact_id, pd.DataFrame(columns=["tick", "sim_time", "aware"])),
                                              rows, n, fact_id), key=f"metrics_fact_curve_{fact_id}")
        st.plotly_chart(charts.fact_cascade(places, homes, who, rows, fact_id), key=f"metrics_fact_cascade_{fact_id}")
        if rows.empty:
            st.caption("Nobody is aware of it yet.")
            continue
        table = pd.DataFrame({
            "person": rows["name"], "when": [common.when(t) for t in rows["sim_time"]], "tick": rows["tick"],
            "via": rows["source"], "from": rows["from_name"].fillna(""), "depth": rows["depth"],
            "teller aware": [("yes" if a else "no") if isinstance(p, str) else "" for p, a
                             in zip(rows["parent"], rows["teller_aware"], strict=True)],
            "kept": rows["kept"], "lost": rows["lost"], "changed": rows["changed"], "memory": rows["memory_id"],
        })
        st.dataframe(table, hide_index=True, width="stretch", key=f"metrics_fact_table_{fact_id}")


BEHAVIOUR_TITLES = {
    "talk": "Talk", "plans": "Plans", "llm": "LLM", "facts": "Facts", "probes": "Probes",
    "relationships": "Relationships",
}


@st.cache_data(max_entries=16, show_spinner=False)
def _computed_behaviour(path: str, version: tuple[Any, ...]) -> tuple[dict[str, float | None], bool]:
    """The behaviour metrics computed from run.db, once per ``version`` of the run (what they depend on)."""
    with RunDB(path) as db:
        return q.behaviour(db)


def _value(value: Any) -> str:
    if value is None or value != value:
        return "-"
    return f"{float(value):.3f}".rstrip("0").rstrip(".")


def behaviour_section(db: RunDB) -> None:
    st.subheader("Behaviour")
    try:
        values, stored = _computed_behaviour(str(db.path), q.behaviour_version(db))
    except sqlite3.OperationalError as exc:  # an older layout lacks what a metric reads
        st.info(f"The behaviour metrics cannot be computed for this run's layout ({exc}).")
        return
    st.caption(("Stored when the run finished (the `behaviour` table)." if stored else
                "Computed now from run.db (the run has no stored `behaviour` rows yet).") +
               " Each metric is defined once, in `simulation/rundb/behaviour.py` (docs/behaviour.md); "
               "`-`: the run gives no basis for it.")
    for purpose, share in failing_purposes(values):
        st.error(f"Failing: `{purpose}` questions fell back to the safe default {share:.0%} of the time: that part "
                 "of cognition is not running, whatever the totals say.")
    groups = q.behaviour_groups(values)
    if not groups:
        st.caption("No behaviour metrics for this run.")
    for group, frame in groups.items():
        st.markdown(f"**{common.md(BEHAVIOUR_TITLES.get(group, group))}**")
        shown = frame.copy()
        for column in shown.columns:
            if column not in ("metric", "fact"):
                shown[column] = [_value(v) for v in shown[column]]
        st.dataframe(shown, hide_index=True, width="stretch", key=f"metrics_behaviour_{group}")
    verdicts = q.probe_verdicts(db)
    if len(verdicts):
        st.plotly_chart(charts.probe_verdicts(verdicts), key="metrics_probe_verdicts")


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
            scored = [c for c in ("aware", "verdict") if c in group and group[c].notna().any()]
            shown = group[["name", "answer", *scored]].copy()
            if "aware" in scored:
                shown["aware"] = [{1: "yes", 0: "no"}.get(int(a), "") if a == a and a is not None else ""
                                  for a in shown["aware"]]
            st.dataframe(shown, hide_index=True, width="stretch")
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
        facts_section(db)
        behaviour_section(db)
        graph_section(db, latest)
        outcomes_section(db)


metrics_view()
