"""Fork a run: a new run whose ticks before TICK are its parent's, bit for bit, then its own way.

Why a replay and not a copy: a run's checkpoint is its latest tick only, but the engine is
deterministic and every answer it got is in the replay cache. So a fork is a new run of the
scenario *as its parent ran it* (people resolved, LLM settings applied: ``resume_state``), with
the parent's seed, fed the whispers the parent was typed at the ticks it got them, and stepped
to TICK with answers from the cache (no LLM call is repeated: the backend starts only on a
miss). Its ticks before TICK are then the parent's rows, table by table (``rundb.diff`` with
``before_tick``), and from TICK on it goes its own way.

The interventions are scheduled events of the forked scenario at the fork's game time: a
whisper to a person, or a place event. Being part of the scenario the fork runs, they are in its
``resume_state``: ``agora resume`` and ``agora verify`` treat a fork like any run, and forking a
fork works. run.db records the lineage: ``runs.parent_run_id``, ``parent_dir``, ``fork_tick``
and ``interventions`` (schema 11).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from simulation.errors import InputError, Problem
from simulation.llm.factory import BackendChoice
from simulation.rundb.connect import connect_ro, db_path
from simulation.run.settings import RunSettings
from simulation.run.recorded import deliver_whispers, recorded_run, recorded_whispers
from simulation.scenario import LoadedScenario
from simulation.scenario.timeline import CHANGEABLE, ScheduledEvent

if TYPE_CHECKING:
    from simulation.run.simulation import Simulation

__all__ = ["Intervention", "Parent", "fork_settings", "forked_scenario", "parse_event", "parse_setting",
           "parse_whisper", "read_parent", "replay"]


@dataclass(frozen=True)
class Intervention:
    """What a fork changes at its first tick: a whisper to a person or an event at a place."""

    kind: Literal["whisper", "place_event", "setting"]
    text: str
    to: str | None = None
    place: str | None = None
    minutes: int = 60
    fact: str | None = None
    """The scenario fact it brings into the town, if any (tracked like the scenario's own)."""
    setting: str | None = None
    """A setting event's setting (``scenario.timeline.CHANGEABLE``) and its new value."""
    value: bool | int | float | str | None = None


def parse_whisper(spec: str, fact: str | None = None) -> Intervention:
    """``PERSON=TEXT`` (``--whisper``)."""
    person, sep, text = spec.partition("=")
    if not sep or not person.strip() or not text.strip():
        raise InputError(Problem("--whisper", f"{spec!r}: expected PERSON=TEXT, e.g. walter_hughes=Isabella is "
                                 "throwing a party"))
    return Intervention("whisper", text.strip(), to=person.strip(), fact=fact)


def parse_setting(spec: str) -> Intervention:
    """``SETTING=VALUE`` (``--set``), e.g. ``cognition.reactions_per_hour=1``: true/false, a number or text."""
    name, sep, raw = spec.partition("=")
    name, raw = name.strip(), raw.strip()
    if not sep or not name or not raw:
        raise InputError(Problem("--set", f"{spec!r}: expected SETTING=VALUE, e.g. cognition.reactions_per_hour=1"))
    value: bool | int | float | str
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                value = raw
    return Intervention("setting", f"{name} = {raw}", setting=name, value=value)


def parse_event(spec: str, fact: str | None = None) -> Intervention:
    """``PLACE=TEXT`` or ``PLACE:MINUTES=TEXT`` (``--event``)."""
    head, sep, text = spec.partition("=")
    place, _, minutes = head.partition(":")
    if not sep or not place.strip() or not text.strip() or (minutes and not minutes.strip().isdigit()):
        raise InputError(Problem("--event", f"{spec!r}: expected PLACE=TEXT or PLACE:MINUTES=TEXT, e.g. "
                                 "town_square:90=A fire engine stops by the fountain"))
    return Intervention("place_event", text.strip(), place=place.strip(), minutes=int(minutes or 60), fact=fact)


@dataclass(frozen=True)
class Parent:
    """What a fork needs of its parent, read from its run.db alone."""

    run_dir: Path
    run_id: str
    loaded: LoadedScenario
    """The scenario as the parent ran it."""
    seed: int
    ticks_done: int
    ticks_planned: int
    whispers: list[dict]
    """The whispers typed into the parent (the viewer's inbox), with the tick each was delivered at."""


def read_parent(run_dir: Path | str) -> Parent:
    run_dir = Path(run_dir)
    if not db_path(run_dir).is_file():
        raise InputError(Problem(str(run_dir), "no run.db here: give a run directory to fork"))
    con = connect_ro(db_path(run_dir))
    try:
        row, scenario_json = recorded_run(con, run_dir)
        whispers = recorded_whispers(con)
    finally:
        con.close()
    return Parent(run_dir, row["run_id"], LoadedScenario.model_validate_json(scenario_json), int(row["seed"]),
                  int(row["ticks_done"] or 0), int(row["ticks_planned"] or 0), whispers)


def forked_scenario(parent: Parent, at: int, interventions: Sequence[Intervention]) -> LoadedScenario:
    """The parent's scenario as run, with the interventions as scheduled events at tick ``at``'s
    game time; InputError naming the option for an unknown person, place or fact, or a tick the
    parent has not reached."""
    sc = parent.loaded.scenario
    if not 0 <= at <= parent.ticks_done:
        raise InputError(Problem("--at", f"tick {at} is outside what {parent.run_dir} ran (ticks 0-"
                                 f"{parent.ticks_done - 1}; a fork may start at 0 to {parent.ticks_done})"))
    if at >= sc.clock.total_ticks:
        raise InputError(Problem("--at", f"tick {at} is at or past the scenario's end ({sc.clock.total_ticks} ticks)"))
    people = {rp.persona.id for rp in parent.loaded.people}
    places = {p.id for p in sc.town.places}
    facts = {f.id for f in sc.facts}
    when = sc.clock.start + timedelta(minutes=at * sc.clock.tick_minutes)
    events = list(sc.events)
    for iv in interventions:
        option = {"whisper": "--whisper", "place_event": "--event", "setting": "--set"}[iv.kind]
        if iv.kind == "setting":
            if iv.setting not in CHANGEABLE:
                raise InputError(Problem(option, f"{iv.setting!r} cannot change during a run; these can: "
                                         f"{', '.join(CHANGEABLE)}"))
            try:
                sc.with_setting(iv.setting, iv.value)
            except ValueError as exc:
                raise InputError(Problem(option, str(exc))) from None
        if iv.to is not None and iv.to not in people:
            raise InputError(Problem(option, f"unknown person {iv.to!r}; the run's people: {', '.join(sorted(people))}"))
        if iv.place is not None and iv.place not in places:
            raise InputError(Problem(option, f"unknown place {iv.place!r}; the town's places: {', '.join(sorted(places))}"))
        if iv.fact is not None and iv.fact not in facts:
            raise InputError(Problem("--fact", f"unknown fact {iv.fact!r}; the scenario's facts: "
                                     f"{', '.join(sorted(facts)) or '(none)'}"))
        events.append(ScheduledEvent(at=when, kind=iv.kind, text=iv.text, to=iv.to, place=iv.place,
                                     duration_minutes=iv.minutes, fact=iv.fact, setting=iv.setting, value=iv.value))
    return parent.loaded.model_copy(update={"scenario": sc.model_copy(update={"events": events})})


def fork_settings(run_dir: Path | str, *, at: int, out: Path | str, interventions: Sequence[Intervention] = (),
                  ticks: int | None = None, llm: BackendChoice | None = None) -> tuple[Parent, RunSettings]:
    """The parent, and the settings of a fork of it at tick ``at`` with ``interventions``, run for
    ``ticks`` after the fork (default: to the parent's planned end), into ``out``."""
    parent = read_parent(run_dir)
    loaded = forked_scenario(parent, at, interventions)
    total = at + ticks if ticks is not None else max(parent.ticks_planned, at + 1)
    return parent, RunSettings.resolve(loaded, llm=llm or BackendChoice(), seed=parent.seed, ticks=total, out=out)


def replay(sim: Simulation, parent: Parent, at: int, interventions: Sequence[Intervention],
           on_tick: Callable[[Simulation], None] | None = None) -> None:
    """Record ``sim``'s lineage, then step it through the parent's first ``at`` ticks, feeding it
    the whispers the parent got then. On any failure the fork is closed as failed, resumable."""
    try:
        sim.record_lineage(parent_run_id=parent.run_id, parent_dir=str(parent.run_dir.resolve()), fork_tick=at,
                           interventions=json.dumps([asdict(iv) for iv in interventions]))
        for tick in range(at):
            deliver_whispers(sim, parent.whispers, tick)
            sim.step()
            if on_tick is not None:
                on_tick(sim)
    except BaseException:
        sim.close("failed", f"the fork stopped while replaying its parent, at tick {sim.tick}")
        raise
