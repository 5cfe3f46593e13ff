"""What the pages show, as SQL over one run.db: plain functions of a ``RunDB``, no Streamlit.

Kept apart from the pages so tests can check the numbers without a browser. The numbers the
viewer shares with the CLI summary (who-knows-whom density, LLM totals, counts; how each fact
spread; the behaviour metrics) are not defined here: they come from ``simulation.rundb``
(``metrics``, ``facts``, ``behaviour``), the one place each is written, and are only shaped
into frames for the charts here.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pandas as pd

from simulation.rundb import attendance as attendance_reader
from simulation.rundb import behaviour as behaviour_reader
from simulation.rundb import facts as fact_reader
from simulation.rundb import metrics
from ui.db import RunDB


def _loads(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


# ---------------------------------------------------------------------- the cast and the town

def agents(db: RunDB) -> list[dict[str, Any]]:
    """People of the run, in id order, with the persona JSON parsed."""
    rows = db.rows("select * from agents where run_id = ? order by agent_id", (db.run_id,))
    for r in rows:
        r["persona"] = _loads(r.get("persona"), {})
    return rows


def names(db: RunDB) -> dict[str, str]:
    return metrics.people(db.con, db.run_id)


def places(db: RunDB) -> pd.DataFrame:
    return db.frame("select place_id, name, kind, description, objects, x, y from places where run_id = ? "
                    "order by place_id", (db.run_id,))


def place_names(db: RunDB) -> dict[str, str]:
    return {r["place_id"]: r["name"] for r in db.rows("select place_id, name from places where run_id = ?",
                                                       (db.run_id,))}


def paths(db: RunDB) -> pd.DataFrame:
    if not db.has("paths"):
        return pd.DataFrame(columns=["a", "b", "minutes"])
    return db.frame("select a, b, minutes from paths where run_id = ?", (db.run_id,))


def latest_tick(db: RunDB) -> int | None:
    """The last committed tick (ticks and agent states are written in one transaction)."""
    return db.one("select max(tick) from ticks where run_id = ?", (db.run_id,))


def time_of(db: RunDB, tick: int) -> str | None:
    return db.one("select sim_time from ticks where run_id = ? and tick = ?", (db.run_id, tick))


def ticks(db: RunDB) -> pd.DataFrame:
    return db.frame("select * from ticks where run_id = ? order by tick", (db.run_id,))


# ---------------------------------------------------------------------- one moment

def states_at(db: RunDB, tick: int) -> pd.DataFrame:
    """Where everyone is and what they do at ``tick``, with display names (and moods: null in a run
    without them, or recorded before run.db schema 14)."""
    mood = "s.mood" if db.has("agent_states", "mood") else "null as mood"
    return db.frame(
        "select s.agent_id, a.name, s.place, p.name as place_name, s.status, s.action, s.destination, "
        f"s.conversation_id, {mood} from agent_states s join agents a on a.run_id = s.run_id and a.agent_id = s.agent_id "
        "left join places p on p.run_id = s.run_id and p.place_id = s.place "
        "where s.run_id = ? and s.tick = ? order by s.agent_id", (db.run_id, tick))


def events_at(db: RunDB, tick: int) -> pd.DataFrame:
    return db.frame("select id, agent_id, place, kind, text from events where run_id = ? and tick = ? "
                    "and kind not in ('utterance') order by id", (db.run_id, tick))


def utterances_at(db: RunDB, tick: int) -> pd.DataFrame:
    return db.frame("select conversation_id, speaker_id, listener_id, text from utterances "
                    "where run_id = ? and tick = ? order by id", (db.run_id, tick))


# ---------------------------------------------------------------------- conversations

def conversations(
    db: RunDB,
    agent_ids: list[str] | None = None,
    place_ids: list[str] | None = None,
    tick_range: tuple[int, int] | None = None,
    text: str = "",
) -> pd.DataFrame:
    """Conversations, newest first, that involve any of ``agent_ids``, happen at any of
    ``place_ids``, overlap ``tick_range`` and contain ``text`` (each filter optional)."""
    sql = ("select id, place, participants, started_tick, started_at, ended_tick, ended_at, turns, end_reason "
           "from conversations where run_id = ?")
    params: list[Any] = [db.run_id]
    if place_ids:
        sql += f" and place in ({', '.join('?' * len(place_ids))})"
        params += place_ids
    if tick_range is not None:
        sql += " and started_tick <= ? and (ended_tick is null or ended_tick >= ?)"
        params += [tick_range[1], tick_range[0]]
    if text.strip():
        sql += " and id in (select conversation_id from utterances where run_id = ? and lower(text) like ?)"
        params += [db.run_id, f"%{text.strip().lower()}%"]
    frame = db.frame(sql + " order by started_tick desc, id desc", params)
    frame["participants"] = [_loads(p, []) for p in frame["participants"]]
    if agent_ids:
        wanted = set(agent_ids)
        frame = frame[[bool(wanted & set(p)) for p in frame["participants"]]]
    return frame.reset_index(drop=True)


def utterances_of(db: RunDB, conversation_ids: list[int]) -> pd.DataFrame:
    """The lines of some conversations, with the move each made (``aim``: empty before run.db schema 6)."""
    if not conversation_ids:
        return pd.DataFrame(columns=["conversation_id", "tick", "sim_time", "turn", "speaker_id", "listener_id",
                                     "text", "aim"])
    marks = ", ".join("?" * len(conversation_ids))
    aim = "aim" if db.has("utterances", "aim") else "'' as aim"
    return db.frame(f"select conversation_id, tick, sim_time, turn, speaker_id, listener_id, text, {aim} "
                    f"from utterances where run_id = ? and conversation_id in ({marks}) "
                    f"order by conversation_id, turn, id", [db.run_id, *conversation_ids])


# ---------------------------------------------------------------------- one person

def state_of(db: RunDB, agent_id: str, tick: int) -> dict[str, Any] | None:
    rows = db.rows("select s.*, p.name as place_name from agent_states s left join places p "
                   "on p.run_id = s.run_id and p.place_id = s.place "
                   "where s.run_id = ? and s.agent_id = ? and s.tick <= ? order by s.tick desc limit 1",
                   (db.run_id, agent_id, tick))
    return rows[0] if rows else None


def plan_at(db: RunDB, agent_id: str, tick: int) -> dict[str, Any] | None:
    """The daily plan in force at ``tick`` (the latest made by then), items parsed."""
    if not db.has("plans"):
        return None
    rows = db.rows("select * from plans where run_id = ? and agent_id = ? and tick <= ? order by tick desc, id desc "
                   "limit 1", (db.run_id, agent_id, tick))
    if not rows:
        return None
    plan = rows[0]
    plan["items"] = _loads(plan.get("items"), [])
    return plan


def schedule_at(db: RunDB, agent_id: str, tick: int) -> list[dict[str, Any]]:
    """The latest decomposition of each level ("hours", "steps") made by ``tick``, items parsed."""
    if not db.has("schedules"):
        return []
    rows = db.rows("select * from (select *, row_number() over (partition by level order by tick desc, id desc) as rn "
                   "from schedules where run_id = ? and agent_id = ? and tick <= ?) where rn = 1 order by level",
                   (db.run_id, agent_id, tick))
    for r in rows:
        r["items"] = [i for i in _loads(r.get("items"), []) if isinstance(i, dict)]
    return rows


def memories(db: RunDB, agent_id: str, tick: int, search: str = "", kinds: list[str] | None = None) -> pd.DataFrame:
    """The memory stream up to ``tick``, newest first. Every word of ``search`` must occur;
    ``#12`` finds memory 12."""
    extra = [c for c in ("last_accessed", "depth", "evidence") if db.has("memories", c)]
    cols = ", ".join(["id", "tick", "sim_time", "kind", "importance", *extra, "text"])
    sql = f"select {cols} from memories where run_id = ? and agent_id = ? and tick <= ?"
    params: list[Any] = [db.run_id, agent_id, tick]
    if kinds:
        sql += f" and kind in ({', '.join('?' * len(kinds))})"
        params += kinds
    for word in search.split():
        if word.startswith("#") and word[1:].isdigit():
            sql += " and id = ?"
            params.append(int(word[1:]))
        else:
            sql += " and lower(text) like ?"
            params.append(f"%{word.lower()}%")
    return db.frame(sql + " order by id desc", params)


def memory_kinds(db: RunDB, agent_id: str) -> list[str]:
    return [r["kind"] for r in db.rows("select distinct kind from memories where run_id = ? and agent_id = ? "
                                       "order by kind", (db.run_id, agent_id))]


def memories_by_id(db: RunDB, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    return {r["id"]: r for r in db.rows(f"select id, tick, sim_time, agent_id, kind, importance, text from memories "
                                        f"where run_id = ? and id in ({marks})", [db.run_id, *ids])}


def reflections(db: RunDB, agent_id: str, tick: int) -> list[dict[str, Any]]:
    """Reflections up to ``tick``, newest first, each with the memories it cites."""
    depth = ", depth" if db.has("memories", "depth") else ""
    rows = db.rows(f"select id, tick, sim_time, importance, text, evidence{depth} from memories where run_id = ? "
                   "and agent_id = ? and kind = 'reflection' and tick <= ? order by id desc",
                   (db.run_id, agent_id, tick))
    cited = memories_by_id(db, sorted({int(i) for r in rows for i in _loads(r["evidence"], [])
                                        if isinstance(i, int) or str(i).isdigit()}))
    for r in rows:
        r["evidence"] = [cited[int(i)] for i in _loads(r["evidence"], []) if str(i).isdigit() and int(i) in cited]
    return rows


def retrievals(db: RunDB, agent_id: str, tick: int, limit: int = 20) -> list[dict[str, Any]]:
    """The agent's latest retrievals up to ``tick``, newest first; each result carries its memory."""
    if not db.has("retrievals"):
        return []
    rows = db.rows("select * from retrievals where run_id = ? and agent_id = ? and tick <= ? "
                   "order by tick desc, id desc limit ?", (db.run_id, agent_id, tick, limit))
    for r in rows:
        r["results"] = [x for x in _loads(r.get("results"), []) if isinstance(x, dict)]
    cited = memories_by_id(db, sorted({int(x["memory_id"]) for r in rows for x in r["results"]
                                        if str(x.get("memory_id", "")).isdigit()}))
    for r in rows:
        for x in r["results"]:
            memory = cited.get(int(x["memory_id"])) if str(x.get("memory_id", "")).isdigit() else None
            x["text"] = memory["text"] if memory else "(memory not found)"
            x["kind"] = memory["kind"] if memory else ""
    return rows


def relationships_at(db: RunDB, tick: int, agent_id: str | None = None) -> pd.DataFrame:
    """Each directed pair's latest relationship row with tick <= ``tick``."""
    if not db.has("relationships"):
        return pd.DataFrame(columns=["agent_id", "other_id", "tick", "sim_time", "conversations", "sentiment", "view"])
    sql = ("select agent_id, other_id, tick, sim_time, conversations, sentiment, view from ("
           "select *, row_number() over (partition by agent_id, other_id order by tick desc, rowid desc) as rn "
           "from relationships where run_id = ? and tick <= ?) where rn = 1")
    params: list[Any] = [db.run_id, tick]
    if agent_id is not None:
        sql += " and agent_id = ?"
        params.append(agent_id)
    return db.frame(sql + " order by agent_id, other_id", params)


# ---------------------------------------------------------------------- the LLM

def llm_per_tick(db: RunDB) -> pd.DataFrame:
    """The ticks table plus each tick's mean call latency (from llm_calls)."""
    frame = ticks(db)
    latency = db.frame("select tick, avg(latency_s) as mean_latency_s, max(latency_s) as max_latency_s "
                       "from llm_calls where run_id = ? group by tick", (db.run_id,))
    frame = frame.merge(latency, on="tick", how="left")
    if "cache_hits" not in frame:
        frame["cache_hits"] = 0
    return frame


def llm_by_purpose(db: RunDB) -> pd.DataFrame:
    return db.frame(
        "select case when purpose like 'probe%' then 'probe' else purpose end as purpose, count(*) as calls, "
        "sum(prompt_tokens) as prompt_tokens, sum(completion_tokens) as completion_tokens, "
        "sum(1 - parse_ok) as parse_failures, avg(latency_s) as mean_latency_s "
        "from llm_calls where run_id = ? group by 1 order by calls desc", (db.run_id,))


def llm_totals(db: RunDB) -> dict[str, Any]:
    """Totals over every call of the run (probes included): ``metrics.LLMTotals`` as a dict,
    with ``tokens`` and ``mean_latency_s`` (None without calls)."""
    totals = metrics.llm_totals(db.con, db.run_id)
    return {**asdict(totals), "tokens": totals.tokens, "mean_latency_s": totals.mean_latency_s}


# ---------------------------------------------------------------------- facts (provenance)

def traced(db: RunDB) -> bool:
    """Whether the run records provenance (``fact_memories``; run.db schema 4 and later)."""
    return fact_reader.traced(db.con)


def facts(db: RunDB) -> dict[str, fact_reader.FactInfo]:
    """fact id -> the fact as the run was started (the scenario's ``facts:``)."""
    return fact_reader.facts(db.con, db.run_id)


def homes(db: RunDB) -> dict[str, str | None]:
    """agent id -> the place id of their home."""
    return {r["agent_id"]: r["home"] for r in db.rows("select agent_id, home from agents where run_id = ? "
                                                        "order by agent_id", (db.run_id,))}


LEARNED_COLUMNS = ["agent_id", "name", "tick", "sim_time", "source", "from_agent", "from_name", "parent", "depth",
                   "teller_aware", "kept", "lost", "changed", "memory_id", "conversation_id"]


def fact_learned(db: RunDB) -> dict[str, pd.DataFrame]:
    """fact id -> how each aware person first learned it (``rundb.facts.first_aware``), earliest
    first: when, via which source, from whom, their cascade parent and depth, whether the teller
    was aware, and the fact's details they kept, lost and changed (detail names, comma-separated,
    in the fact's order)."""
    info = facts(db)
    who = names(db)
    out = {}
    for fact_id, items in fact_reader.first_aware(db.con, db.run_id).items():
        order = [str(d.get("name")) for d in (info[fact_id].details if fact_id in info else [])]

        def named(details: dict[str, str], status: str, order: list[str] = order) -> str:
            found = [k for k, v in details.items() if v == status]
            return ", ".join(sorted(found, key=lambda k: (order.index(k) if k in order else len(order), k)))

        out[fact_id] = pd.DataFrame([{
            "agent_id": i.agent_id, "name": i.name, "tick": i.tick, "sim_time": i.sim_time, "source": i.source,
            "from_agent": i.from_agent, "from_name": who.get(i.from_agent, i.from_agent) if i.from_agent else None,
            "parent": i.parent, "depth": i.depth, "teller_aware": i.teller_aware,
            "kept": named(i.details, "kept"), "lost": named(i.details, "lost"), "changed": named(i.details, "changed"),
            "memory_id": i.memory_id, "conversation_id": i.conversation_id,
        } for i in items], columns=LEARNED_COLUMNS)
    return out


def fact_curves(db: RunDB) -> dict[str, pd.DataFrame]:
    """fact id -> people aware by the end of each tick (``rundb.facts.awareness_curve``)."""
    return {fact_id: pd.DataFrame(curve, columns=["tick", "sim_time", "aware"])
            for fact_id, curve in fact_reader.awareness_curve(db.con, db.run_id).items()}


def fact_spread(db: RunDB) -> dict[str, fact_reader.Spread]:
    """fact id -> its spread over the run so far (``rundb.facts.spread``)."""
    return fact_reader.spread(db.con, db.run_id)


def happenings_at(db: RunDB, sim_time: str | None) -> list[attendance_reader.Happening]:
    """The run's happenings (a fact with a place, a day and a time range: ``rundb.attendance``)
    going on at ``sim_time``, so the map can draw them at their place."""
    if not sim_time:
        return []
    return [h for h in attendance_reader.happenings(db.con, db.run_id).values() if h.starts <= sim_time < h.ends]


def probe_verdicts(db: RunDB) -> pd.DataFrame:
    """Probe answers about a fact, counted per fact and verdict (``rundb.facts.probe_verdicts``)."""
    return pd.DataFrame([{"fact": f, "verdict": v, "answers": n}
                         for f, counts in sorted(fact_reader.probe_verdicts(db.con, db.run_id).items())
                         for v, n in counts.items()], columns=["fact", "verdict", "answers"])


# ---------------------------------------------------------------------- behaviour

BEHAVIOUR_GROUPS = ("talk", "plans", "llm", "facts", "probes", "memory", "relationships")
"""The behaviour metrics' prefixes, in the order the page shows them (others follow)."""


def behaviour(db: RunDB) -> tuple[dict[str, float | None], bool]:
    """The run's behaviour metrics and whether they were stored: the ``behaviour`` table's rows
    (written when the run finished) when it has any, else computed now from run.db
    (``rundb.behaviour.behaviour``, the same definitions)."""
    stored = behaviour_reader.stored(db.con, db.run_id)
    if stored:
        return stored, True
    return behaviour_reader.behaviour(db.con, db.run_id), False


def behaviour_version(db: RunDB) -> tuple[Any, ...]:
    """A cache key for ``behaviour``: what its metrics depend on that changes while a run writes
    (ticks, calls, lines, memories, probe answers, relationships) or after (stored rows)."""
    counts = tuple(db.one(f"select count(*) from [{t}] where run_id = ?", (db.run_id,))
                   for t in ("llm_calls", "utterances", "memories", "probes", "relationships") if db.has(t))
    stored = (db.one("select max(computed_at) || ' ' || count(*) from behaviour where run_id = ?", (db.run_id,))
              if db.has("behaviour", "computed_at") else None)
    return (latest_tick(db), db.run.get("status"), stored, *counts)


def behaviour_groups(values: dict[str, float | None]) -> dict[str, pd.DataFrame]:
    """Metric name -> value, grouped by prefix (``BEHAVIOUR_GROUPS`` first). ``facts`` and
    ``probes`` are one row per fact and a column per measure (``facts.party.told`` -> row
    ``party``, column ``told``); the other groups are ``metric`` / ``value`` rows."""
    grouped: dict[str, dict[str, float | None]] = {}
    for name, value in sorted(values.items()):
        group, _, rest = name.partition(".")
        grouped.setdefault(group, {})[rest or group] = None if value is None or value != value else float(value)
    order = [g for g in BEHAVIOUR_GROUPS if g in grouped] + sorted(set(grouped) - set(BEHAVIOUR_GROUPS))
    out: dict[str, pd.DataFrame] = {}
    for group in order:
        items = grouped[group]
        if group in ("facts", "probes"):
            by_fact: dict[str, dict[str, float | None]] = {}
            for rest, value in items.items():
                fact_id, _, measure = rest.partition(".")
                by_fact.setdefault(fact_id, {})[measure or "value"] = value
            out[group] = pd.DataFrame([{"fact": f, **m} for f, m in by_fact.items()])
        else:
            out[group] = pd.DataFrame({"metric": list(items), "value": list(items.values())},
                                      columns=["metric", "value"])
    return out


# ---------------------------------------------------------------------- outcomes

def graph_source(db: RunDB) -> str:
    """``relationships`` when the run records them, else ``conversations`` (who has talked)."""
    return metrics.graph_source(db.con)


def graph_edges(db: RunDB, tick: int) -> pd.DataFrame:
    """Directed edges known at ``tick``: agent_id -> other_id with weight (conversations),
    sentiment and view (None for a graph built from conversations)."""
    if graph_source(db) == "relationships":
        frame = relationships_at(db, tick)
        frame = frame.rename(columns={"conversations": "weight"})
        return frame[["agent_id", "other_id", "weight", "sentiment", "view"]]
    counts: dict[tuple[str, str], int] = {}
    for a, b, _ in metrics.conversation_pairs(db.con, db.run_id, until_tick=tick):
        for key in ((a, b), (b, a)):
            counts[key] = counts.get(key, 0) + 1
    return pd.DataFrame([{"agent_id": a, "other_id": b, "weight": n, "sentiment": None, "view": None}
                         for (a, b), n in sorted(counts.items())],
                        columns=["agent_id", "other_id", "weight", "sentiment", "view"])


def density(db: RunDB) -> pd.DataFrame:
    """Per tick: pairs of people who know each other by then (``edges``) and the who-knows-whom
    density, pairs / (n(n-1)/2) (``metrics.knows_by_tick``: the CLI summary's definition)."""
    series = metrics.knows_by_tick(db.con, db.run_id)
    return pd.DataFrame({"tick": [k.tick for k in series], "sim_time": [k.sim_time for k in series],
                         "edges": [k.pairs for k in series], "density": [k.density for k in series]},
                        columns=["tick", "sim_time", "edges", "density"])


def probes(db: RunDB) -> pd.DataFrame:
    """Every probe answer; for a question about a fact (run.db schema 4 and later) also the fact,
    whether the person was aware of it when asked, and the answer's verdict."""
    if not db.has("probes"):
        return pd.DataFrame(columns=["question", "name", "answer", "ok"])
    scored = ", p.fact_id as fact, p.aware, p.verdict" if db.has("probes", "verdict") else ""
    return db.frame(f"select p.question, a.name, p.answer, p.ok{scored} from probes p left join agents a "
                    "on a.run_id = p.run_id and a.agent_id = p.agent_id where p.run_id = ? "
                    "order by p.question, a.name", (db.run_id,))


def rewards(db: RunDB) -> pd.DataFrame | None:
    """Per agent and tick: mean reward, mean advantage, turns labelled and the running total of the
    agent's rewards; None when the run has no rewards table. Only the agents' own turns (role
    ``actor``: the judge's rubric rewards) when the table records roles."""
    if not db.has("rewards"):
        return None
    own = " and r.role = 'actor'" if db.has("rewards", "role") else ""
    frame = db.frame(
        "select r.agent_id, coalesce(a.name, r.agent_id) as name, r.tick, avg(r.reward) as reward, "
        "avg(r.advantage) as advantage, sum(r.reward) as reward_sum, count(*) as labelled "
        "from rewards r left join agents a on a.run_id = r.run_id and a.agent_id = r.agent_id "
        f"where r.run_id = ?{own} group by r.agent_id, r.tick order by r.agent_id, r.tick", (db.run_id,))
    frame["total"] = frame.groupby("agent_id")["reward_sum"].cumsum()
    return frame.sort_values(["tick", "agent_id"], kind="stable").reset_index(drop=True)


def reward_summary(db: RunDB) -> pd.DataFrame:
    """One row per agent: turns labelled, mean reward and total of its own turns, the mean of each
    rubric item, and (after a peer-critique pass) its mean reward as speaker, critic and scorer."""
    if not db.has("rewards", "role"):
        return pd.DataFrame()
    rows = db.rows("select r.agent_id, coalesce(a.name, r.agent_id) as name, r.role, r.reward, r.scores "
                   "from rewards r left join agents a on a.run_id = r.run_id and a.agent_id = r.agent_id "
                   "where r.run_id = ? order by r.id", (db.run_id,))
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    out = []
    for (agent, name), group in frame.groupby(["agent_id", "name"], sort=True):
        own = group[group["role"] == "actor"]
        row: dict[str, Any] = {"person": name, "turns": len(own), "mean reward": own["reward"].mean(),
                               "total": own["reward"].sum()}
        items = pd.DataFrame([_loads(s, {}) for s in own["scores"]])
        for item in items.columns:
            row[f"mean {item}"] = items[item].mean()
        for role in ("speaker", "critic", "scorer"):
            if (frame["role"] == role).any():
                row[f"as {role}"] = group.loc[group["role"] == role, "reward"].mean()
        out.append(row)
    return pd.DataFrame(out)


def evaluations(db: RunDB) -> pd.DataFrame | None:
    """The latest value of each (agent, suite, metric), or None when there is no evaluations table."""
    if not db.has("evaluations"):
        return None
    return db.frame(
        "select e.agent_id, coalesce(a.name, e.agent_id, '(whole run)') as name, e.suite, e.metric, e.value, "
        "e.created_at from ("
        "select *, row_number() over (partition by agent_id, suite, metric order by created_at desc, id desc) as rn "
        "from evaluations where run_id = ?) e left join agents a on a.run_id = e.run_id and a.agent_id = e.agent_id "
        "where rn = 1 order by e.suite, e.metric, name", (db.run_id,))


def inbox(db: RunDB) -> pd.DataFrame:
    """Whispers sent from the viewer, newest first."""
    if not db.has("inbox"):
        return pd.DataFrame(columns=["id", "agent_id", "text", "created_at", "sender", "delivered_tick",
                                     "delivered_at"])
    return db.frame("select id, agent_id, text, created_at, sender, delivered_tick, delivered_at from inbox "
                    "where run_id = ? order by id desc", (db.run_id,))


def summary(db: RunDB) -> dict[str, Any]:
    """One run in a line: settings, size, cost and outcomes (for the Runs page): ``outcomes`` and
    ``aware`` are the people aware of each of the scenario's facts (none for a run recorded
    before provenance)."""
    run = db.run
    n = len(names(db))
    totals = metrics.llm_totals(db.con, db.run_id)
    spread = fact_spread(db) if traced(db) else {}
    outcome = [f"{f}: {s.aware}/{n} aware, {s.told} told" for f, s in spread.items()]
    last = db.one("select max(sim_time) from ticks where run_id = ?", (db.run_id,))
    return {
        "scenario": run.get("scenario"), "status": run.get("status"), "seed": run.get("seed"),
        "backend": run.get("backend"), "model": run.get("model"), "agents": n,
        "ticks": f"{run.get('ticks_done') or 0}/{run.get('ticks_planned')}",
        "ticks_done": run.get("ticks_done") or 0,
        "game time": f"{run.get('start_time') or '-'} to {last or '-'}",
        "LLM calls": totals.calls, "tokens": totals.tokens, "parse failures": totals.parse_failures,
        "cache hits": totals.cache_hits,
        "conversations": metrics.count(db.con, db.run_id, "conversations"),
        "utterances": metrics.count(db.con, db.run_id, "utterances"),
        "outcomes": "; ".join(outcome) or "-",
        "aware": {f: s.aware for f, s in spread.items()},
        "probe answers": metrics.count(db.con, db.run_id, "probes"),
        "fork of": fork_of(run),
        "started": run.get("started_at"),
    }


def lineage_of(db: RunDB) -> tuple[str, str | None, int | None]:
    """(this run's id, its parent's run id, the tick where they part): the parent is None for a run
    that is no fork (or one recorded before schema 11)."""
    run = db.run
    tick = run.get("fork_tick")
    return db.run_id, run.get("parent_run_id") or None, int(tick) if tick is not None else None


def fork_of(run: dict[str, Any]) -> str:
    """A fork's parent, the tick where they part and what it changed there ("" for a run that is
    no fork, or one recorded before schema 11)."""
    parent = run.get("parent_run_id")
    if not parent:
        return ""
    try:
        changes = json.loads(run.get("interventions") or "[]")
    except ValueError:
        changes = []
    said = "; ".join(f"{c.get('kind')} {c.get('to') or c.get('place') or ''}: {c.get('text')}".replace(" :", ":")
                     for c in changes)
    return f"{parent} from tick {run.get('fork_tick')}" + (f" ({said})" if said else " (no intervention)")
