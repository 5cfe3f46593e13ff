"""What happened in a run, computed from run.db alone (the CLI summary; later the viewer too)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils


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
    awareness: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """topic id -> (name, game time of their first run-time memory mentioning it), earliest first."""
    probes: list[tuple[str, str, str]] = field(default_factory=list)
    memory_kinds: dict[str, int] = field(default_factory=dict)
    """Memories formed during the run by kind (seed memories excluded)."""
    retrievals: int = 0
    density: tuple[float, float] | None = None
    """Density of the who-knows-whom graph at the first and the last tick."""
    """(agent name, question, answer)."""

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


def _one(db: sqlite_utils.Database, sql: str, params: tuple = ()) -> tuple:
    return db.execute(sql, params).fetchone()


def summarize(db_path: Path | str) -> RunSummary:
    db = sqlite_utils.Database(db_path)
    run = next(db["runs"].rows)
    rid = run["run_id"]
    tables = set(db.table_names())
    names = {r["agent_id"]: r for r in db["agents"].rows_where("run_id = ?", [rid])}
    places = {r["place_id"]: r["name"] for r in db["places"].rows_where("run_id = ?", [rid])}
    last = _one(db, "select max(tick), min(sim_time), max(sim_time) from ticks where run_id = ?", (rid,))
    final = {r["agent_id"]: r for r in db.query(
        "select * from agent_states where run_id = ? and tick = ?", [rid, last[0] if last[0] is not None else -1])}

    def counts(sql: str) -> dict[str, int]:
        return {row[0]: row[1] for row in db.execute(sql, [rid]).fetchall()}

    events = counts("select agent_id, count(*) from events where run_id = ? group by agent_id")
    memories = counts("select agent_id, count(*) from memories where run_id = ? group by agent_id")
    utter = counts("select speaker_id, count(*) from utterances where run_id = ? group by speaker_id")
    calls = counts("select agent_id, count(*) from llm_calls where run_id = ? group by agent_id")
    tokens = counts("select agent_id, sum(prompt_tokens + completion_tokens) from llm_calls "
                    "where run_id = ? group by agent_id")
    conv_by: dict[str, int] = {}
    for row in db["conversations"].rows_where("run_id = ?", [rid]):
        for a in json.loads(row["participants"]):
            conv_by[a] = conv_by.get(a, 0) + 1
    agents = []
    for aid, a in sorted(names.items()):
        st = final.get(aid, {})
        agents.append(AgentSummary(
            aid, a["name"], a["occupation"], places.get(st.get("place"), "-"), st.get("action") or "-",
            events.get(aid, 0), memories.get(aid, 0), conv_by.get(aid, 0), utter.get(aid, 0),
            calls.get(aid, 0), tokens.get(aid, 0) or 0,
        ))
    totals = _one(db, "select count(*), coalesce(sum(1 - parse_ok), 0), coalesce(sum(fallback), 0), "
                  "coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), coalesce(sum(latency_s), 0), "
                  "coalesce(sum(cache_hit), 0), coalesce(sum(case when cache_hit then 0 else completion_tokens end), 0) "
                  "from llm_calls where run_id = ?", (rid,))
    wall, tick_llm = _one(db, "select coalesce(sum(wall_s), 0), coalesce(sum(llm_s), 0) from ticks where run_id = ?",
                          (rid,))
    scenario_topics = _topics(run["scenario_yaml"])
    awareness = {}
    for topic, keywords in scenario_topics.items():
        clause = " or ".join("lower(text) like ?" for _ in keywords)
        rows = db.execute(
            f"select agent_id, min(sim_time) from memories where run_id = ? and kind != 'seed' and ({clause}) "
            "group by agent_id order by min(sim_time), agent_id",
            [rid, *[f"%{k.lower()}%" for k in keywords]],
        ).fetchall()
        awareness[topic] = [(names[a]["name"], t) for a, t in rows if a in names]
    probes = [(names[r["agent_id"]]["name"], r["question"], r["answer"])
              for r in db.query("select * from probes where run_id = ? order by question, agent_id", [rid])]
    n_ticks = (last[0] + 1) if last[0] is not None else 0
    return RunSummary(
        run_id=rid, scenario=run["scenario"], status=run["status"], ticks_done=run["ticks_done"] or 0,
        ticks_planned=run["ticks_planned"], start=last[1] or "-", end=last[2] or "-",
        game_hours=n_ticks * run["tick_minutes"] / 60, agents=agents,
        conversations=_one(db, "select count(*) from conversations where run_id = ?", (rid,))[0],
        utterances=_one(db, "select count(*) from utterances where run_id = ?", (rid,))[0],
        llm_calls=totals[0], parse_failures=totals[1], fallbacks=totals[2], cache_hits=totals[6], generated_tokens=totals[7],
        prompt_tokens=totals[3], completion_tokens=totals[4], llm_seconds=totals[5], tick_llm_seconds=tick_llm,
        wall_seconds=wall, awareness=awareness, probes=probes,
        memory_kinds=dict(db.execute("select kind, count(*) from memories where run_id = ? and kind != 'seed' "
                                     "group by kind order by kind", [rid]).fetchall()),
        retrievals=_one(db, "select count(*) from retrievals where run_id = ?", (rid,))[0]
        if "retrievals" in tables else 0,
        density=_density(db, rid) if "relationships" in tables else None,
    )


def _density(db: sqlite_utils.Database, rid: str) -> tuple[float, float] | None:
    from simulation.relationships import density_by_tick

    series = density_by_tick(db, rid)
    return (series[0][2], series[-1][2]) if series else None


def _topics(scenario_yaml: str) -> dict[str, list[str]]:
    import yaml

    try:
        data = yaml.safe_load(scenario_yaml) or {}
        return {t["id"]: list(t["keywords"]) for t in data.get("topics") or []}
    except (yaml.YAMLError, KeyError, TypeError):
        return {}
