"""What an evaluation is about: agents, from persona files, scenarios or recorded runs.

A persona file is one agent with its seed memories. A scenario is every person in it (named
and sampled). A run directory (or its run.db) is every agent of the run, with the memories it
formed during the run and its logged actions and utterances, read from run.db alone.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from simulation.errors import InputError, Problem
from simulation.llm import registry
from simulation.rundb import connect_ro, table_names
from simulation.scenario import LLMSettings, Persona, load, load_persona
from simulation.yamlfile import load_yaml

RUN_MEMORIES = 12
"""Most recent run memories (beyond the seed memories) shown with a run agent's persona."""
BEHAVIOUR_KINDS = ("action", "move", "utterance")


@dataclass
class Behaviour:
    """One logged thing an agent did or said (an ``events`` row)."""

    event_id: int
    tick: int
    sim_time: str
    kind: str
    text: str


@dataclass
class Target:
    key: str
    """Unique within an evaluation: the persona id, or ``run_id/agent_id`` for run agents."""
    persona: Persona
    source: str
    run_id: str | None = None
    run_db: Path | None = None
    memories: list[str] = field(default_factory=list)
    behaviour: list[Behaviour] = field(default_factory=list)
    llm: LLMSettings | None = None
    """The run's (or scenario's) LLM settings, the default agent model for it."""
    llm_base: Path | None = None

    @property
    def agent_id(self) -> str:
        return self.persona.id


def _run_targets(db_path: Path, shown: str) -> list[Target]:
    """Every agent of a run, with its run memories and behaviour."""
    try:
        con = connect_ro(db_path)  # evaluating a run never changes it (evaluations are written separately)
        tables = table_names(con)
    except sqlite3.Error as exc:
        raise InputError(Problem(shown, f"cannot read run.db: {exc}")) from None
    try:
        missing = {"runs", "agents", "memories", "events"} - tables
        if missing:
            raise InputError(Problem(shown, f"not an Agora run.db (no {', '.join(sorted(missing))} table)"))
        run = con.execute("select run_id, scenario_yaml, scenario_path from runs limit 1").fetchone()
        if run is None:
            raise InputError(Problem(shown, "run.db holds no run"))
        run_id, scenario_yaml, scenario_path = run
        llm, llm_base = _run_llm(scenario_yaml, scenario_path)
        rows = con.execute("select agent_id, persona from agents where run_id = ? order by rowid", (run_id,)).fetchall()
        if not rows:
            raise InputError(Problem(shown, "the run has no agents"))
        targets = []
        for agent_id, persona_json in rows:
            try:
                persona = Persona.model_validate(json.loads(persona_json))
            except (ValueError, ValidationError) as exc:
                raise InputError(Problem(shown, f"agents row {agent_id!r}: persona is not valid: {exc}")) from None
            mems = con.execute(
                "select text from memories where run_id = ? and agent_id = ? and kind != 'seed' "
                "order by id desc limit ?",
                (run_id, agent_id, RUN_MEMORIES)).fetchall()
            marks = ",".join("?" * len(BEHAVIOUR_KINDS))
            events = con.execute(
                f"select id, tick, sim_time, kind, text from events where run_id = ? and agent_id = ? "
                f"and kind in ({marks}) order by id", (run_id, agent_id, *BEHAVIOUR_KINDS)).fetchall()
            targets.append(Target(
                key=f"{run_id}/{agent_id}", persona=persona, source=shown, run_id=run_id, run_db=db_path,
                memories=[m[0] for m in reversed(mems)], behaviour=[Behaviour(*e) for e in events],
                llm=llm, llm_base=llm_base,
            ))
        return targets
    except sqlite3.Error as exc:
        raise InputError(Problem(shown, f"cannot read run.db: {exc}")) from None
    finally:
        con.close()


def _run_llm(scenario_yaml: str | None, scenario_path: str | None) -> tuple[LLMSettings | None, Path | None]:
    """The run's ``llm:`` block, so its agents are evaluated with the model they ran on by default."""
    import yaml

    try:
        data = yaml.safe_load(scenario_yaml or "") or {}
        # The run's own scenario, valid when it ran: settings of other backends that older
        # versions accepted in one flat block are dropped rather than losing the whole default.
        llm = registry.parse_settings(registry.own_fields(data.get("llm") or {}))
    except Exception:  # an unreadable block only loses the default; the options can still name a model
        return None, None
    return llm, Path(scenario_path).parent if scenario_path else None


def resolve(paths: list[Path]) -> list[Target]:
    """Targets from command-line paths; every bad path is reported, together, as InputError."""
    targets: list[Target] = []
    problems: list[Problem] = []
    for path in paths:
        shown = str(path)
        try:
            if not path.exists():
                raise InputError(Problem(
                    shown, "target not found (give a persona file, a scenario or a run directory)"))
            if path.is_dir():
                db = path / "run.db"
                if not db.is_file():
                    raise InputError(Problem(shown, "not a run directory (no run.db inside); give a persona file, "
                                                    "a scenario or a run directory"))
                targets.extend(_run_targets(db, shown))
            elif path.suffix == ".db":
                targets.extend(_run_targets(path, shown))
            elif path.suffix.lower() in (".yaml", ".yml"):
                doc = load_yaml(path, "target file")
                if isinstance(doc.data, dict) and ("town" in doc.data or "clock" in doc.data):
                    loaded = load(path)
                    for person in loaded.people:
                        targets.append(Target(key=person.persona.id, persona=person.persona, source=shown,
                                              llm=loaded.scenario.llm, llm_base=path.parent))
                else:
                    persona = load_persona(path)
                    targets.append(Target(key=persona.id, persona=persona, source=shown))
            else:
                raise InputError(Problem(
                    shown, "expected a persona or scenario YAML file, a run directory or a run.db"))
        except InputError as exc:
            problems.extend(exc.problems)
    seen: dict[str, str] = {}
    for t in targets:
        if t.key in seen:
            problems.append(Problem(
                t.source, f"agent {t.key!r} is also in {seen[t.key]}; each agent may be given once"))
        seen.setdefault(t.key, t.source)
    if problems:
        raise InputError(problems)
    if not targets:
        raise InputError(Problem("command line", "no agents to evaluate"))
    return targets
