"""How each of a run's facts spread, read from its provenance (``fact_memories``), defined once.

* **aware**: a person knows a fact from their first memory carrying it that reached them from
  outside (``provenance.rules.AWARE_SOURCES``: seeded, whispered, perceived, heard; a recap, the
  person's own summary of a conversation, never makes them aware: see ``provenance.rules``);
* **told** (the headline): the aware who are not a root, i.e. people other than the fact's
  sources who learnt it from someone's line;
* **cascade**: a tree over the aware. A person told it (heard) hangs under whoever
  told them first; a person who learned it from the scenario (a whisper, a seed, a place event)
  or by seeing someone is a root. Depth counts tellings from a root (Isabella 0, whoever she
  told 1, whoever they told 2). A teller who was not aware when they told (they made it up) is
  marked ``teller_aware = False``; their listener still hangs under them;
* **distortion**: of the people told, the share whose first version *changed* a detail (named
  another place, day or time); a version that *lost* details (said "a party at the cafe" with
  no time) is counted apart, as detail retention = kept / (kept + lost + changed);
* **invented**: memories carrying a fact, from the person's own plan, line or reflection,
  before they were aware of it;
* **aware share**: of the people in the town at the end of the run (``rundb.presence``: not those
  who left; those who arrived, yes), the share aware of it. In a run nobody left, aware / people.

Standard library only (see the package's docstring).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from simulation.provenance.rules import AWARE_SOURCES, TOLD_SOURCES, VERDICTS, corrections
from simulation.rundb.connect import column_names, table_names
from simulation.rundb.metrics import people
from simulation.rundb.presence import stays


@dataclass(frozen=True)
class FactInfo:
    id: str
    text: str
    details: list[dict[str, Any]] = field(default_factory=list)
    corrected: int | None = None
    """The tick of the correction that gave ``text`` and ``details`` (None: the scenario's own)."""


def facts(con: Any, run_id: str) -> dict[str, FactInfo]:
    """fact id -> the fact as it stands at the end of what was run: the scenario's ``facts:`` (from
    ``resume_state``), with the corrections the run made (``provenance.rules.corrections``)."""
    found = _started(con, run_id)
    for fact_id, (tick, text, details) in corrections(con, run_id).items():
        if fact_id in found:
            found[fact_id] = FactInfo(fact_id, text, details, corrected=tick)
    return found


def scenario_part(con: Any, run_id: str, key: str) -> Any:
    """The scenario's ``key`` section as the run was started (from ``resume_state``; None when the
    run has none or it cannot be read)."""
    if "resume_state" not in table_names(con):
        return None
    try:
        row = con.execute("select json_extract(scenario, ?) from resume_state where run_id = ?",
                          [f"$.scenario.{key}", run_id]).fetchone()
        return json.loads(row[0]) if row and row[0] else None
    except (sqlite3.OperationalError, TypeError, ValueError):
        row = con.execute("select scenario from resume_state where run_id = ?", [run_id]).fetchone()
        try:
            return ((json.loads(row[0]) or {}).get("scenario") or {}).get(key) if row else None
        except (TypeError, ValueError, AttributeError):
            return None


def _started(con: Any, run_id: str) -> dict[str, FactInfo]:
    """fact id -> the fact as the run was started (the scenario's ``facts:``, from ``resume_state``)."""
    items = scenario_part(con, run_id, "facts") or []
    return {str(f["id"]): FactInfo(str(f["id"]), str(f.get("text", "")), list(f.get("details") or []))
            for f in items if isinstance(f, dict) and "id" in f}


def traced(con: Any) -> bool:
    """Whether the run records provenance (run.db schema 4 and later)."""
    return "fact_memories" in table_names(con)


@dataclass(frozen=True)
class Learned:
    """How one person first became aware of a fact."""

    agent_id: str
    name: str
    tick: int
    sim_time: str
    source: str
    from_agent: str | None
    """Who told them (heard) or whom they saw (perceived); None otherwise."""
    utterance_id: int | None
    conversation_id: int | None
    memory_id: int
    kept: int
    lost: int
    changed: int
    details: dict[str, str]
    parent: str | None = None
    """Their parent in the cascade: the teller (heard), else None (a root)."""
    depth: int = 0
    teller_aware: bool = True
    """False when the teller had not been told it themselves (invented it)."""


def first_aware(con: Any, run_id: str) -> dict[str, list[Learned]]:
    """fact id -> each aware person's first learning, earliest first, with cascade parent and depth.
    Every fact of the scenario is a key (an empty list while nobody knows)."""
    out: dict[str, list[Learned]] = {f: [] for f in facts(con, run_id)}
    if not traced(con):
        return out
    who = people(con, run_id)
    marks = ", ".join("?" for _ in AWARE_SOURCES)
    rows = con.execute(
        "select fact_id, agent_id, tick, sim_time, source, from_agent, utterance_id, conversation_id, memory_id, "
        f"kept, lost, changed, details from fact_memories where run_id = ? and source in ({marks}) "
        "order by tick, id", [run_id, *AWARE_SOURCES]).fetchall()
    seen: dict[str, dict[str, Learned]] = defaultdict(dict)
    for (fact_id, agent_id, tick, sim_time, source, from_agent, utterance_id, conversation_id, memory_id, kept, lost,
         changed, details) in rows:
        known = seen[fact_id]
        if agent_id in known or agent_id not in who:
            continue
        parent, depth, teller_aware = None, 0, True
        if source in TOLD_SOURCES and from_agent:
            parent = from_agent
            teller = known.get(from_agent)
            teller_aware = teller is not None
            depth = (teller.depth if teller else 0) + 1
        known[agent_id] = Learned(
            agent_id, who[agent_id], int(tick), sim_time, source, from_agent, utterance_id, conversation_id,
            int(memory_id), int(kept or 0), int(lost or 0), int(changed or 0), _details(details), parent, depth,
            teller_aware)
        out.setdefault(fact_id, []).append(known[agent_id])
    return out


def _details(text: str | None) -> dict[str, str]:
    try:
        value = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def awareness_curve(con: Any, run_id: str) -> dict[str, list[tuple[int, str, int]]]:
    """fact id -> (tick, sim_time, people aware by the end of it) for every recorded tick."""
    learned = first_aware(con, run_id)
    ticks = con.execute("select tick, sim_time from ticks where run_id = ? order by tick", [run_id]).fetchall()
    out: dict[str, list[tuple[int, str, int]]] = {}
    for fact_id, items in learned.items():
        firsts = sorted(item.tick for item in items)
        curve, n = [], 0
        for tick, sim_time in ticks:
            while n < len(firsts) and firsts[n] <= tick:
                n += 1
            curve.append((int(tick), sim_time, n))
        out[fact_id] = curve
    return out


@dataclass(frozen=True)
class Spread:
    """One fact's spread over a whole run."""

    fact_id: str
    people: int
    """The people in the town at the end of the run (whoever left is not; ``rundb.presence``)."""
    aware: int
    """Everyone ever aware of it, who left the town since included."""
    told: int
    """Aware because someone passed it on (heard): people other than the fact's sources."""
    roots: int
    depth: int
    """The cascade's depth: the most tellings between a root and anyone."""
    distorted: int
    """People told whose first version changed a detail."""
    kept: int
    lost: int
    changed: int
    """Details kept, lost and changed over the told people's first versions."""
    invented: int
    """Memories carrying it from a person's own plan, line or reflection before they were aware."""
    from_unaware: int
    """People told by someone who was not aware themselves."""
    aware_here: int | None = None
    """Of ``people`` (those in the town at the end), how many are aware (None: ``aware``)."""

    @property
    def aware_share(self) -> float:
        """The share of the people in the town at the end who are aware of it (those who left are
        in neither count; in a run nobody left, ``aware / people``)."""
        here = self.aware if self.aware_here is None else self.aware_here
        return here / self.people if self.people else 0.0

    @property
    def distortion(self) -> float | None:
        return self.distorted / self.told if self.told else None

    @property
    def retention(self) -> float | None:
        total = self.kept + self.lost + self.changed
        return self.kept / total if total else None


def spread(con: Any, run_id: str) -> dict[str, Spread]:
    """fact id -> its spread (see the module's docstring for each definition)."""
    here = {a for a, s in stays(con, run_id).items() if s.left is None}  # in the town at the end
    learned = first_aware(con, run_id)
    invented = _invented(con, run_id, learned)
    out = {}
    for fact_id, items in learned.items():
        told = [i for i in items if i.parent is not None]
        out[fact_id] = Spread(
            fact_id, len(here), len(items), len(told), len(items) - len(told), max((i.depth for i in items), default=0),
            sum(i.changed > 0 for i in told), sum(i.kept for i in told), sum(i.lost for i in told),
            sum(i.changed for i in told), invented.get(fact_id, 0), sum(not i.teller_aware for i in told),
            sum(i.agent_id in here for i in items))
    return out


def _invented(con: Any, run_id: str, learned: dict[str, list[Learned]]) -> dict[str, int]:
    if not traced(con):
        return {}
    since = {(f, i.agent_id): i.tick for f, items in learned.items() for i in items}
    marks = ", ".join("?" for _ in AWARE_SOURCES)
    counts: Counter[str] = Counter()
    for fact_id, agent_id, tick in con.execute(
            f"select fact_id, agent_id, tick from fact_memories where run_id = ? and source not in ({marks})",
            [run_id, *AWARE_SOURCES]):
        if tick < since.get((fact_id, agent_id), 1 << 60):
            counts[fact_id] += 1
    return dict(counts)


def probe_verdicts(con: Any, run_id: str) -> dict[str, Counter[str]]:
    """fact id -> how many probe answers got each verdict (``provenance.rules.VERDICTS``)."""
    if "probes" not in table_names(con) or "verdict" not in column_names(con, "probes"):
        return {}
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for fact_id, verdict, n in con.execute(
            "select fact_id, verdict, count(*) from probes where run_id = ? and fact_id is not null "
            "group by fact_id, verdict", [run_id]):
        if verdict in VERDICTS:
            out[fact_id][verdict] += int(n)
    return dict(out)
