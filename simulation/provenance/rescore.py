"""Re-scoring a finished run's probe answers with the current rules.

A probe's verdict is computed when the answer is given, from the answer, the question, the fact's
details and whether the person was aware (all stored in run.db). When the scoring rules improve,
old runs should be judged by the same rules as new ones, without asking the model again: this
reads the stored answers back and writes fresh verdicts, against each fact as it stood when they
were asked (the run's corrections applied: ``rules.corrections``). Awareness is not recomputed; it comes
from the tracker at the time and is kept as stored. Whether the model gave a usable answer is
read from ``probes.ok`` (a failed answer is scored ``failed``); a run that stored no ``ok``
(NULL, or an older run.db without the column) counts its answers as usable.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import date
from typing import Any

import yaml

from simulation.provenance.details import Detail, DetailReader, place_aliases
from simulation.provenance.probes import score_answer
from simulation.provenance.rules import corrections


def rescore_probes(con: sqlite3.Connection, run_id: str) -> int:
    """Re-score every fact probe of ``run_id`` in place (the caller commits); returns how many."""
    scoring = probe_scoring(con, run_id)
    if scoring is None:
        return 0
    reader, facts = scoring
    has_ok = any(c[1] == "ok" for c in con.execute("pragma table_info(probes)"))
    rows = con.execute(f"select id, sim_time, question, answer, fact_id, aware, {'ok' if has_ok else 'null'} "
                       "from probes where run_id = ? and fact_id is not null", (run_id,)).fetchall()
    done = 0
    for pid, sim_time, question, answer, fact_id, aware, ok in rows:
        details = facts.get(fact_id)
        if details is None or aware is None:
            continue
        when = date.fromisoformat(sim_time[:10])
        result = score_answer(reader, answer or "", question or "", details, when, bool(aware),
                              ok=ok is None or bool(ok))
        con.execute("update probes set verdict = ?, details = ? where id = ?",
                    (result.verdict, json.dumps(result.details, ensure_ascii=False), pid))
        done += 1
    return done


def probe_scoring(con: sqlite3.Connection, run_id: str) -> tuple[DetailReader, dict[str, tuple[Detail, ...]]] | None:
    """What a run's probes are scored with: the detail reader of its places, and each fact's details as
    they stood when the probes were asked (at the end: the run's corrections applied); None for a run
    that stored no scenario."""
    row = con.execute("select scenario_yaml from runs where run_id = ?", (run_id,)).fetchone()
    if row is None or not row[0]:
        return None
    doc = yaml.safe_load(row[0]) or {}
    facts = {f["id"]: _details(f.get("details") or [])
             for f in doc.get("facts") or [] if isinstance(f, dict) and "id" in f}
    for fact_id, (_, _, details) in corrections(con, run_id).items():
        if fact_id in facts:
            facts[fact_id] = _details(details)
    places = {pid: (name, kind or "") for pid, name, kind in
              con.execute("select place_id, name, kind from places where run_id = ?", (run_id,))}
    return DetailReader(place_aliases(places)), facts


def _details(items: Iterable[Any]) -> tuple[Detail, ...]:
    """A fact's details as the run stored them (its scenario's ``facts:``, validated when the run was
    made, or a correction's ``data.details``), as scoring reads them (``provenance.facts.fact_text``
    does the same for a ``Fact``). Read without the scenario package: it imports this one
    (``scenario.references`` reads details as the probes do), so this one may not import it back."""
    return tuple(Detail(str(d["name"]), str(d["kind"]), str(d["value"]), tuple(str(a) for a in d.get("aliases") or []))
                 for d in items if isinstance(d, dict))


__all__ = ["probe_scoring", "rescore_probes"]
