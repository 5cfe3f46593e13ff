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
from simulation.formats.yamlfile import load_yaml
from simulation.llm import registry
from simulation.rundb import connect_ro, table_names
from simulation.scenario import LLMSettings, Persona, load, load_persona

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
    """The run's (or scenario's) LLM settings, the default agent model for it (None for a persona
    file, or where the run's settings cannot be read: see ``llm_problem``)."""
    llm_base: Path | None = None
    """The folder relative model paths in ``llm`` are taken from (the scenario's)."""
    llm_source: str | None = None
    """Where ``llm`` was read, in words, for the report's "agent model" line."""
    llm_problem: Problem | None = None
    """Why the target's own model cannot be used (unreadable settings, or settings that do not
    describe the backend the run recorded); ``simulation.evaluation.models`` refuses to evaluate
    such a target unless the command line names a model."""
    recorded: tuple[str, str] | None = None
    """(backend, model id) the run recorded in ``runs`` (None for persona files and scenarios)."""

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
        run = con.execute("select * from runs limit 1").fetchone()
        if run is None:
            raise InputError(Problem(shown, "run.db holds no run"))
        cols = run.keys()
        run_id = run["run_id"]
        saved = (con.execute("select scenario from resume_state where run_id = ?", (run_id,)).fetchone()
                 if "resume_state" in tables else None)
        llm, source, problem = _run_llm(shown, saved[0] if saved else None,
                                        run["scenario_yaml"] if "scenario_yaml" in cols else None)
        recorded = ((run["backend"], run["model"]) if "backend" in cols and "model" in cols and run["backend"]
                    else None)
        if llm is not None and problem is None and recorded is not None and recorded[0] != llm.backend:
            problem = Problem(shown, f"the run ran on the {recorded[0]!r} backend (model {recorded[1]!r}), which "
                                     f"its recorded LLM settings ({llm.backend}) do not describe, so its agents "
                                     "cannot be asked on the model they ran on", field="runs.backend")
        scenario_path = run["scenario_path"] if "scenario_path" in cols else None
        llm_base = Path(scenario_path).parent if scenario_path else None
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
                llm=llm, llm_base=llm_base, llm_source=source, llm_problem=problem, recorded=recorded,
            ))
        return targets
    except sqlite3.Error as exc:
        raise InputError(Problem(shown, f"cannot read run.db: {exc}")) from None
    finally:
        con.close()


def _run_llm(shown: str, saved: str | None, scenario_yaml: str | None
             ) -> tuple[LLMSettings | None, str | None, Problem | None]:
    """The LLM settings the run was started with, so its agents are evaluated on the model they
    ran on: (settings, where they were read, why they cannot be used).

    ``resume_state`` holds the scenario as run, with the command line's overrides (``agora run
    --model ...``); a run.db from before it existed has only the scenario text, whose ``llm:``
    block misses any such override, and the source says so. Settings that cannot be read are a
    problem of the target (never a silent switch to the bundled model)."""
    import yaml

    if saved is not None:
        field_name, source = "resume_state.scenario", f"the LLM settings run {shown} was started with"
        try:
            data = json.loads(saved)
        except ValueError as exc:
            return None, None, Problem(shown, f"is not valid JSON ({exc})", field=field_name)
        block = data.get("scenario", {}).get("llm") if isinstance(data, dict) and isinstance(
            data.get("scenario"), dict) else None
        field_name += ".llm"
    else:
        field_name = "runs.scenario_yaml"
        source = (f"the llm: block of the scenario text in {shown} (an old run.db without resume_state: "
                  "any command-line override of that run's model is not recorded)")
        try:
            data = yaml.safe_load(scenario_yaml or "") or {}
        except yaml.YAMLError as exc:
            return None, None, Problem(shown, f"is not valid YAML ({exc})", field=field_name)
        block = data.get("llm") if isinstance(data, dict) else None
        field_name += ": llm"
        if block is None and isinstance(data, dict):
            block = {}  # a scenario without an llm: block ran on the default model
    if not isinstance(block, dict):
        return None, None, Problem(shown, "holds no LLM settings (expected a mapping)", field=field_name)
    try:
        # The run's own settings, valid when it ran: settings of other backends that older
        # versions stored in one flat block are dropped (own_fields) rather than refused.
        return registry.parse_settings(registry.own_fields(block)), source, None
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        return None, None, Problem(shown, f"LLM settings are not valid: {exc}", field=field_name)


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
                    for person in loaded.everyone():  # those who arrive during a run too
                        targets.append(Target(key=person.persona.id, persona=person.persona, source=shown,
                                              llm=loaded.scenario.llm, llm_base=path.parent,
                                              llm_source=f"the llm: settings of scenario {shown}"))
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
