"""What happened in a run, computed from run.db alone: the summary `agora run` prints.

Shared numbers (the spread of each fact, who-knows-whom density, LLM totals, the behaviour
metrics) come from the rest of ``simulation.rundb``, which the viewer uses too, so the two never
disagree.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from simulation.rundb import RunDB, metrics
from simulation.rundb.behaviour import behaviour as behaviour_metrics
from simulation.rundb.facts import first_aware, probe_verdicts, spread


@dataclass
class FactSpread:
    """One fact's spread (``simulation.rundb.facts``)."""

    aware: list[tuple[str, str, str, str | None, int]]
    """(name, game time, how: seeded/whispered/perceived/heard, from whom (name), depth), earliest first."""
    told: int
    depth: int
    distortion: float | None
    retention: float | None
    invented: int
    verdicts: dict[str, int] = field(default_factory=dict)
    """Probe answers about the fact by verdict (``provenance.rules``)."""


@dataclass
class AgentSummary:
    agent_id: str
    name: str
    occupation: str
    place: str
    doing: str
    events: int
    memories: int
    conversations: int
    utterances: int
    llm_calls: int
    tokens: int


@dataclass
class RunSummary:
    run_id: str
    scenario: str
    status: str
    ticks_done: int
    ticks_planned: int
    start: str
    end: str
    game_hours: float
    agents: list[AgentSummary]
    conversations: int
    utterances: int
    llm_calls: int
    parse_failures: int
    fallbacks: int
    cache_hits: int
    """Calls the replay cache answered (no backend work)."""
    generated_tokens: int
    """Completion tokens the backend generated (cache hits excluded)."""
    prompt_tokens: int
    completion_tokens: int
    llm_seconds: float
    """Summed call latency, probes included."""
    tick_llm_seconds: float
    """Summed call latency inside ticks (what ``wall_seconds`` covers)."""
    wall_seconds: float
    facts: dict[str, FactSpread] = field(default_factory=dict)
    """fact id -> how it spread (every fact of the scenario; empty for a run before provenance)."""
    behaviour: dict[str, float | None] = field(default_factory=dict)
    """The behaviour metrics (docs/behaviour.md)."""
    probes: list[tuple[str, str, str]] = field(default_factory=list)
    """(agent name, question, answer)."""
    memory_kinds: dict[str, int] = field(default_factory=dict)
    """Memories formed during the run by kind (seed memories excluded)."""
    retrievals: int = 0
    density: tuple[float, float] | None = None
    """Density of the who-knows-whom graph at the first and the last tick (``simulation.rundb.metrics``:
    pairs who know each other / (n(n-1)/2)); None for a run without a relationships table."""

    @property
    def outside_llm_share(self) -> float:
        return 0.0 if self.wall_seconds <= 0 else max(0.0, 1 - self.tick_llm_seconds / self.wall_seconds)

    @property
    def calls_per_agent_hour(self) -> float:
        denom = len(self.agents) * self.game_hours
        return self.llm_calls / denom if denom else 0.0

    @property
    def tokens_per_agent_hour(self) -> float:
        denom = len(self.agents) * self.game_hours
        return (self.prompt_tokens + self.completion_tokens) / denom if denom else 0.0


def summarize(db_path: Path | str) -> RunSummary:
    """The run recorded in ``db_path``, read-only; awareness, density and LLM totals are
    ``simulation.rundb.metrics``' definitions, the ones the viewer shows."""
    with RunDB(db_path) as db:
        return _summarize(db)


def _summarize(db: RunDB) -> RunSummary:
    run, rid, con = db.run, db.run_id, db.con
    names = {r["agent_id"]: r for r in db.rows("select * from agents where run_id = ?", (rid,))}
    places = {r["place_id"]: r["name"] for r in db.rows("select place_id, name from places where run_id = ?", (rid,))}
    last, start, end = con.execute("select max(tick), min(sim_time), max(sim_time) from ticks where run_id = ?",
                                   (rid,)).fetchone()
    final = {r["agent_id"]: r for r in db.rows("select * from agent_states where run_id = ? and tick = ?",
                                                (rid, last if last is not None else -1))}

    def counts(sql: str) -> dict[str, int]:
        return {row[0]: row[1] for row in con.execute(sql, (rid,))}

    events = counts("select agent_id, count(*) from events where run_id = ? group by agent_id")
    memories = counts("select agent_id, count(*) from memories where run_id = ? group by agent_id")
    utter = counts("select speaker_id, count(*) from utterances where run_id = ? group by speaker_id")
    llm = metrics.llm_by_agent(con, rid)
    conv_by: dict[str, int] = {}
    for row in db.rows("select participants from conversations where run_id = ?", (rid,)):
        try:
            participants = json.loads(row["participants"] or "[]")
        except ValueError:  # a damaged row loses its count, not the summary
            continue
        for a in participants if isinstance(participants, list) else []:
            conv_by[a] = conv_by.get(a, 0) + 1
    agents = []
    for aid, a in sorted(names.items()):
        st = final.get(aid, {})
        used = llm.get(aid, metrics.AgentLLM(0, 0))
        agents.append(AgentSummary(
            aid, a["name"], a["occupation"], places.get(st.get("place"), "-"), st.get("action") or "-",
            events.get(aid, 0), memories.get(aid, 0), conv_by.get(aid, 0), utter.get(aid, 0), used.calls, used.tokens,
        ))
    totals = metrics.llm_totals(con, rid)
    wall, tick_llm = con.execute("select coalesce(sum(wall_s), 0), coalesce(sum(llm_s), 0) from ticks "
                                 "where run_id = ?", (rid,)).fetchone()
    names_by_id = {aid: a["name"] for aid, a in names.items()}
    verdicts = probe_verdicts(con, rid)
    learned = first_aware(con, rid)
    facts = {fact_id: FactSpread(
        [(i.name, i.sim_time, i.source, names_by_id.get(i.from_agent or "", i.from_agent), i.depth)
         for i in learned.get(fact_id, [])],
        sp.told, sp.depth, sp.distortion, sp.retention, sp.invented, dict(verdicts.get(fact_id, {})))
        for fact_id, sp in spread(con, rid).items()}
    probes = [(names[r["agent_id"]]["name"], r["question"], r["answer"])
              for r in db.rows("select * from probes where run_id = ? order by question, agent_id", (rid,))
              if r["agent_id"] in names] if db.has("probes") else []
    n_ticks = (last + 1) if last is not None else 0
    return RunSummary(
        run_id=rid, scenario=run["scenario"], status=run["status"], ticks_done=run["ticks_done"] or 0,
        ticks_planned=run["ticks_planned"], start=start or "-", end=end or "-",
        game_hours=n_ticks * run["tick_minutes"] / 60, agents=agents,
        conversations=metrics.count(con, rid, "conversations"), utterances=metrics.count(con, rid, "utterances"),
        llm_calls=totals.calls, parse_failures=totals.parse_failures, fallbacks=totals.fallbacks,
        cache_hits=totals.cache_hits, generated_tokens=totals.generated_tokens, prompt_tokens=totals.prompt_tokens,
        completion_tokens=totals.completion_tokens, llm_seconds=totals.latency_s, tick_llm_seconds=tick_llm,
        wall_seconds=wall, facts=facts, behaviour=behaviour_metrics(con, rid), probes=probes,
        memory_kinds={kind: n for kind, n in con.execute(
            "select kind, count(*) from memories where run_id = ? and kind != 'seed' group by kind order by kind",
            (rid,))},
        retrievals=metrics.count(con, rid, "retrievals"),
        density=_density(con, rid) if metrics.graph_source(con) == "relationships" else None,
    )


def _density(con: sqlite3.Connection, rid: str) -> tuple[float, float] | None:
    """First and last tick's who-knows-whom density (only where the run records relationships:
    "who knows whom" is not what a graph of who has talked shows)."""
    series = metrics.knows_by_tick(con, rid, "relationships")
    return (series[0].density, series[-1].density) if series else None
