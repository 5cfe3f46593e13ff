"""The numbers every reader of a run reports, each defined once, from run.db alone.

The CLI summary (``simulation.rundb.summary``), the viewer (``ui.queries``) and the benches compute
the same outcomes of a run: how dense the who-knows-whom graph is at each tick, and what the
LLM cost. They used to write these twice, and the two relationship densities did not agree;
here each has one definition that all of them call. How facts spread is ``rundb.facts``; the
behaviour report built on all of them is ``rundb.behaviour``.

Every function takes ``con``, anything with sqlite3's ``execute(sql, params)`` (a read-only
``sqlite3.Connection`` from ``connect_ro``, or the writer's ``sqlite_utils.Database``), and reads
rows by position, so it works whatever the row factory. Standard library only (see the
package's docstring).

Who-knows-whom density
----------------------
Two people *know* each other at tick *t* when either has a relationship with the other by
then: a ``relationships`` row for the pair, in either direction, with ``tick <= t`` (tick 0
holds the relationships the personas start with; conversation recaps add the rest). The
graph is undirected and the density is the share of possible pairs that know each other::

    density(t) = pairs known at t / (n * (n - 1) / 2)        (0 for fewer than two people)

Why undirected: knowing someone is mutual in this model (a conversation updates both sides
at the same tick), while the directed count made a pair that a persona file seeds from one
side only count half, and depended on whether the other side's recap had been written yet.
It is also what the engine tracks while it runs (``SocialGraph.density``), so the summary,
the viewer and the live model agree (in a run where nobody arrived or left: the live graph keeps
whoever left, as the others remember them). A run recorded before the ``relationships`` table
existed falls back to the pairs that have had a conversation (from the tick it started),
with the same formula.

*n* and the pairs are those of the people in the town at *t* (``rundb.presence``: arrived by
then and not yet left), so someone who arrives later is not a stranger to everyone before they
come, and someone who left stops counting; in a run where everyone was there throughout, *n* is
everyone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from simulation.rundb.connect import column_names, table_names
from simulation.rundb.presence import everyone_throughout, here_at, stays

GraphSource = Literal["relationships", "conversations"]


# ---------------------------------------------------------------------- the cast and the counts

def people(con: Any, run_id: str) -> dict[str, str]:
    """agent id -> name, in id order."""
    return {r[0]: r[1] for r in con.execute(
        "select agent_id, name from agents where run_id = ? order by agent_id", [run_id])}


def crowd(con: Any, run_id: str) -> set[str]:
    """Ids of the background crowd (``agents.crowd``, run.db schema 7); empty in older layouts."""
    if "crowd" not in column_names(con, "agents"):
        return set()
    return {a for a, in con.execute("select agent_id from agents where run_id = ? and crowd", [run_id])}


def count(con: Any, run_id: str, table: str) -> int:
    """Rows of ``table`` for the run; 0 when the run has no such table (an older layout)."""
    if table not in table_names(con):
        return 0
    return int(con.execute(f"select count(*) from [{table}] where run_id = ?", [run_id]).fetchone()[0])


# ---------------------------------------------------------------------- the LLM

@dataclass(frozen=True)
class LLMTotals:
    """Every LLM call of the run (probes included)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    generated_tokens: int
    """Completion tokens the backend generated: cache hits excluded (what tokens/s is about)."""
    cache_hits: int
    """Calls the replay cache answered (no backend work)."""
    parse_failures: int
    fallbacks: int
    """Answers replaced by the safe default."""
    latency_s: float
    """Summed call latency."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def mean_latency_s(self) -> float | None:
        return self.latency_s / self.calls if self.calls else None


def llm_totals(con: Any, run_id: str) -> LLMTotals:
    # Runs before schema 2 have no cache_hit column: nothing was answered from a cache then.
    cached = "cache_hit" if "cache_hit" in column_names(con, "llm_calls") else "0"
    row = con.execute(
        "select count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), "
        f"coalesce(sum(case when {cached} then 0 else completion_tokens end), 0), coalesce(sum({cached}), 0), "
        "coalesce(sum(1 - parse_ok), 0), coalesce(sum(fallback), 0), coalesce(sum(latency_s), 0.0) "
        "from llm_calls where run_id = ?", [run_id]).fetchone()
    return LLMTotals(int(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]), int(row[5]), int(row[6]),
                     float(row[7]))


@dataclass(frozen=True)
class AgentLLM:
    calls: int
    tokens: int
    """Prompt plus completion tokens."""


def llm_by_agent(con: Any, run_id: str) -> dict[str, AgentLLM]:
    """agent id -> its calls and tokens (agents without a call are absent)."""
    return {r[0]: AgentLLM(int(r[1]), int(r[2])) for r in con.execute(
        "select agent_id, count(*), coalesce(sum(prompt_tokens + completion_tokens), 0) from llm_calls "
        "where run_id = ? group by agent_id", [run_id])}


# ---------------------------------------------------------------------- who knows whom

def pair_density(n_people: int, pairs: int) -> float:
    """Share of the n(n-1)/2 possible pairs that are linked (0 for fewer than two people)."""
    possible = n_people * (n_people - 1) / 2
    return pairs / possible if possible else 0.0


def knows_pairs(edges: Iterable[tuple[str, str]], people_ids: Iterable[str]) -> set[frozenset[str]]:
    """Undirected pairs of distinct people from directed edges (a -> b and b -> a are one pair);
    edges naming someone outside ``people_ids`` are dropped."""
    known = set(people_ids)
    return {frozenset((a, b)) for a, b in edges if a != b and a in known and b in known}


def graph_source(con: Any) -> GraphSource:
    """``relationships`` when the run records them, else ``conversations`` (who has talked)."""
    return "relationships" if "relationships" in table_names(con) else "conversations"


def conversation_pairs(con: Any, run_id: str, until_tick: int | None = None) -> list[tuple[str, str, int]]:
    """(initiator, partner, started tick) of every two-person conversation, in start order."""
    sql = "select participants, started_tick from conversations where run_id = ?"
    params: list[Any] = [run_id]
    if until_tick is not None:
        sql += " and started_tick <= ?"
        params.append(until_tick)
    out = []
    for participants, started in con.execute(sql + " order by started_tick, id", params):
        try:
            pair = json.loads(participants or "[]")
        except (TypeError, ValueError):
            continue
        if isinstance(pair, list) and len(pair) == 2:
            out.append((str(pair[0]), str(pair[1]), int(started)))
    return out


def _edges_born(con: Any, run_id: str, source: GraphSource) -> list[tuple[str, str, int]]:
    """(a, b, the first tick the directed edge a -> b exists)."""
    if source == "relationships":
        return [(r[0], r[1], int(r[2])) for r in con.execute(
            "select agent_id, other_id, min(tick) from relationships where run_id = ? group by agent_id, other_id",
            [run_id])]
    return conversation_pairs(con, run_id)


@dataclass(frozen=True)
class Knows:
    """The who-knows-whom graph at one tick."""

    tick: int
    sim_time: str
    people: int
    pairs: int
    """Pairs of people who know each other."""

    @property
    def density(self) -> float:
        return pair_density(self.people, self.pairs)


def knows_by_tick(con: Any, run_id: str, source: GraphSource | None = None) -> list[Knows]:
    """The who-knows-whom graph at every recorded tick, in tick order, over the people in the
    town at that tick (see the module's docstring for the definition); ``source`` defaults to
    ``graph_source(con)``."""
    stayed = stays(con, run_id)
    ids = list(stayed)
    born: dict[frozenset[str], int] = {}
    for a, b, tick in _edges_born(con, run_id, source or graph_source(con)):
        for pair in knows_pairs([(a, b)], ids):
            born[pair] = min(tick, born.get(pair, tick))
    ticks = con.execute("select tick, sim_time from ticks where run_id = ? order by tick", [run_id]).fetchall()
    out: list[Knows] = []
    if everyone_throughout(stayed):  # everyone at every tick: count the pairs as they are born
        firsts = sorted(born.values())
        known = 0
        for tick, sim_time in ticks:
            while known < len(firsts) and firsts[known] <= tick:
                known += 1
            out.append(Knows(int(tick), sim_time, len(ids), known))
        return out
    for tick, sim_time in ticks:
        here = set(here_at(stayed, int(tick)))
        known = sum(1 for pair, first in born.items() if first <= tick and pair <= here)
        out.append(Knows(int(tick), sim_time, len(here), known))
    return out


def density_by_tick(con: Any, run_id: str) -> list[tuple[int, str, float]]:
    """(tick, sim_time, who-knows-whom density) for every recorded tick."""
    return [(k.tick, k.sim_time, k.density) for k in knows_by_tick(con, run_id)]
