"""Fork a run: a new run whose ticks before TICK are its parent's, bit for bit, then its own way.

Why a replay and not a copy: a run's checkpoint is its latest tick only, but the engine is
deterministic and every answer it got is in the replay cache. So a fork is a new run of the
scenario *as its parent ran it* (people resolved, LLM settings applied: ``resume_state``), with
the parent's seed, fed the whispers the parent was typed at the ticks it got them, and stepped
to TICK with answers from the cache (no LLM call is repeated: the backend starts only on a
miss). Its ticks before TICK are then the parent's rows, table by table (``rundb.diff`` with
``before_tick``), and from TICK on it goes its own way.

The interventions are scheduled events of the forked scenario at the fork's game time
(``scenario.timeline``): a whisper to a person, a place event, a setting changed, a person who
leaves the town or one who arrives, a fact's text corrected. Being part of the scenario the fork
runs, they are in its ``resume_state``: ``agora resume`` and ``agora verify`` treat a fork like
any run, and forking a fork works. run.db records the lineage: ``runs.parent_run_id``, ``parent_dir``, ``fork_tick``
and ``interventions`` (schema 11).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from simulation.errors import InputError, Problem
from simulation.formats.yamlfile import missing_file
from simulation.llm.factory import BackendChoice
from simulation.rundb.connect import connect_ro, db_path
from simulation.run.settings import RunSettings
from simulation.run.recorded import deliver_whispers, recorded_run, recorded_whispers
from simulation.scenario import FactDetail, LoadedScenario, PersonaEntry, ResolvedPersona, load_persona
from simulation.scenario.loading import place_persona
from simulation.scenario.references import shown_detail, unnamed_details
from simulation.scenario.timeline import CHANGEABLE, ScheduledEvent

if TYPE_CHECKING:
    from simulation.run.simulation import Simulation
    from simulation.scenario import Scenario

__all__ = ["OPTIONS", "Intervention", "Parent", "fork_settings", "forked_scenario", "parse_addition",
           "parse_corrections", "parse_event", "parse_interventions", "parse_removal", "parse_setting",
           "parse_whisper", "read_parent", "replay"]

OPTIONS = {"whisper": "--whisper", "place_event": "--event", "setting": "--set", "arrival": "--add",
           "departure": "--remove", "correction": "--correct"}
"""Each kind of intervention's ``agora fork`` option (what an error about it names)."""


@dataclass(frozen=True)
class Intervention:
    """What a fork changes at its first tick: a scheduled event of the forked scenario
    (``scenario.timeline.ScheduledEvent``) of the same kind, at the fork's game time."""

    kind: Literal["whisper", "place_event", "setting", "arrival", "departure", "correction"]
    text: str
    """A whisper's or place event's words; a correction's new text of the fact; an arrival's or
    departure's words in the record ("" for the engine's: "Eli Novak arrives in town at ...")."""
    to: str | None = None
    """Whom a whisper is for; who leaves (a departure)."""
    place: str | None = None
    """Where a place event happens; where someone arrives."""
    minutes: int = 60
    fact: str | None = None
    """The scenario fact a whisper or place event brings into the town, if any (tracked like the
    scenario's own); the fact a correction corrects."""
    setting: str | None = None
    """A setting event's setting (``scenario.timeline.CHANGEABLE``) and its new value."""
    value: bool | int | float | str | None = None
    persona: str | None = None
    """An arrival: the persona file of who arrives."""
    home: str | None = None
    """An arrival: their home (default: the place they arrive at, where a visitor stays)."""
    workplace: str | None = None
    crowd: bool = False
    """An arrival: one of the background crowd (docs/cognition.md)."""
    details: tuple[tuple[str, str], ...] = ()
    """A correction: (detail name, new value) of each of the fact's details it changes."""


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


def parse_removal(spec: str) -> Intervention:
    """``PERSON`` or ``PERSON=TEXT`` (``--remove``): the person leaves the town (TEXT: the record's
    words for it, default "NAME leaves the town.")."""
    person, _, text = spec.partition("=")
    if not person.strip():
        raise InputError(Problem("--remove", f"{spec!r}: expected PERSON or PERSON=TEXT, e.g. walter_hughes"))
    return Intervention("departure", text.strip(), to=person.strip())


def parse_addition(spec: str, base: Path | None = None) -> Intervention:
    """``PERSONA_FILE@PLACE[,home=PLACE][,workplace=PLACE][,crowd]`` (``--add``): the person of the
    persona file arrives at PLACE; their home is PLACE unless given; ``crowd``: one of the
    background crowd. A relative file is taken from ``base`` (default: the working directory)."""
    head, at, tail = spec.rpartition("@")
    place, *extras = [part.strip() for part in tail.split(",")]
    usage = ("expected PERSONA_FILE@PLACE[,home=PLACE][,workplace=PLACE][,crowd], e.g. "
             "personas/townsfolk/eli_novak.yaml@town_square,crowd")
    if not at or not head.strip() or not place:
        raise InputError(Problem("--add", f"{spec!r}: {usage}"))
    found: dict[str, str] = {}
    crowd = False
    for extra in extras:
        key, eq, value = (p.strip() for p in extra.partition("="))
        if key == "crowd" and not eq:
            crowd = True
        elif key in ("home", "workplace") and value and key not in found:
            found[key] = value
        else:
            raise InputError(Problem("--add", f"{spec!r}: {extra!r} is not home=PLACE, workplace=PLACE or crowd; "
                                     f"{usage}"))
    path = Path(head.strip()).expanduser()
    path = (path if path.is_absolute() else (base or Path.cwd()) / path).resolve()
    return Intervention("arrival", "", place=place, persona=str(path), home=found.get("home"),
                        workplace=found.get("workplace"), crowd=crowd)


def parse_corrections(corrections: Sequence[str], details: Sequence[str] = ()) -> list[Intervention]:
    """``FACT=TEXT`` (``--correct``): the fact's text from the fork on; with ``FACT.DETAIL=VALUE``
    (``--detail``), one of its details changed with it (its kind kept), e.g. ``party.place=
    the_rose_and_crown_pub``. A detail changes only with the text that says it."""
    texts: dict[str, str] = {}
    for spec in corrections:
        fact, sep, text = (p.strip() for p in spec.partition("="))
        if not sep or not fact or not text or "." in fact:
            raise InputError(Problem("--correct", f"{spec!r}: expected FACT=TEXT, e.g. party=Isabella's party is at "
                                     "the Rose and Crown Pub on February 14, from 5pm to 7pm"))
        if fact in texts:
            raise InputError(Problem("--correct", f"fact {fact!r} is corrected twice; give its text once"))
        texts[fact] = text
    changed: dict[str, list[tuple[str, str]]] = {fact: [] for fact in texts}
    for spec in details:
        head, sep, value = (p.strip() for p in spec.partition("="))
        fact, dot, name = head.partition(".")
        if not sep or not dot or not fact or not name or not value:
            raise InputError(Problem("--detail", f"{spec!r}: expected FACT.DETAIL=VALUE, e.g. "
                                     "party.place=the_rose_and_crown_pub"))
        if fact not in texts:
            raise InputError(Problem("--detail", f"{spec!r}: a detail changes with the fact's text; give "
                                     f"--correct {fact}=TEXT too"))
        changed[fact].append((name, value))
    return [Intervention("correction", text, fact=fact, details=tuple(changed[fact])) for fact, text in texts.items()]


def parse_interventions(*, whisper: Sequence[str] = (), event: Sequence[str] = (), set_: Sequence[str] = (),
                        fact: str | None = None, remove: Sequence[str] = (), add: Sequence[str] = (),
                        correct: Sequence[str] = (), detail: Sequence[str] = (),
                        base: Path | None = None) -> list[Intervention]:
    """``agora fork``'s intervention options (and an experiment's fork conditions, whose persona
    files are taken from ``base``), parsed, in the order they happen at the fork: corrections
    first (what follows is measured against the new text), then arrivals (so a whisper can be
    for a newcomer), whispers, place events, settings, and departures last."""
    return ([*parse_corrections(correct, detail), *(parse_addition(a, base) for a in add),
             *(parse_whisper(w, fact) for w in whisper), *(parse_event(e, fact) for e in event),
             *(parse_setting(s) for s in set_), *(parse_removal(r) for r in remove)])


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
    game time, in their order; InputError naming the option for an unknown person, place or fact,
    a person not in the town at the fork (or already one of its people, for an arrival), or a tick
    the parent has not reached."""
    sc = parent.loaded.scenario
    if not 0 <= at <= parent.ticks_done:
        raise InputError(Problem("--at", f"tick {at} is outside what {parent.run_dir} ran (ticks 0-"
                                 f"{parent.ticks_done - 1}; a fork may start at 0 to {parent.ticks_done})"))
    if at >= sc.clock.total_ticks:
        raise InputError(Problem("--at", f"tick {at} is at or past the scenario's end ({sc.clock.total_ticks} ticks)"))
    town = _Town(parent.loaded, at)
    when = sc.clock.start + timedelta(minutes=at * sc.clock.tick_minutes)
    events = list(sc.events)
    arrivals = dict(parent.loaded.arrivals)
    for iv in interventions:
        option = OPTIONS[iv.kind]
        if iv.kind == "setting":
            if iv.setting not in CHANGEABLE:
                raise InputError(Problem(option, f"{iv.setting!r} cannot change during a run; these can: "
                                         f"{', '.join(CHANGEABLE)}"))
            try:
                sc.with_setting(iv.setting, iv.value)
            except ValueError as exc:
                raise InputError(Problem(option, str(exc))) from None
        if iv.to is not None:
            town.check_present(option, iv.to)
        for place in (iv.place, iv.home, iv.workplace):
            if place is not None and place not in town.places:
                raise InputError(Problem(option, f"unknown place {place!r}; the town's places: "
                                         f"{', '.join(sorted(town.places))}"))
        if iv.fact is not None and iv.fact not in town.facts:
            raise InputError(Problem(option if iv.kind == "correction" else "--fact", f"unknown fact {iv.fact!r}; "
                                     f"the scenario's facts: {', '.join(sorted(town.facts)) or '(none)'}"))
        text, person, details = iv.text, None, None
        if iv.kind == "arrival":
            rp = town.arrive(iv)
            arrivals[len(events)] = rp
            person = PersonaEntry(file=iv.persona, home=rp.home, workplace=rp.workplace, crowd=rp.crowd)
            text = text or f"{rp.persona.name} arrives in town at {town.places[rp.start_place]}."
        elif iv.kind == "departure":
            text = text or f"{town.leave(iv.to or '')} leaves the town."
        elif iv.kind == "correction":
            details = town.corrected_details(iv)
            _check_agrees(sc, iv, details if details is not None else town.facts[iv.fact or ""].details, when)
        try:
            events.append(ScheduledEvent(at=when, kind=iv.kind, text=text, to=iv.to, place=iv.place,
                                         duration_minutes=iv.minutes, fact=iv.fact, setting=iv.setting, value=iv.value,
                                         person=person, details=details))
        except ValidationError as exc:
            raise InputError(Problem(option, "; ".join(e["msg"] for e in exc.errors()))) from None
    return parent.loaded.model_copy(update={"scenario": sc.model_copy(update={"events": events}),
                                            "arrivals": arrivals})


def _check_agrees(sc: Scenario, iv: Intervention, details: Sequence[FactDetail], when: datetime) -> None:
    """InputError (``--correct``) when the corrected text does not name the fact's place or date as
    they will stand (``scenario.references.unnamed_details``): the probes and the tracker would
    score the new text itself as wrong."""
    missing = unnamed_details(sc, iv.text, details, when.date())
    if missing:
        said = ", ".join(f"its {d.name} {shown_detail(sc, d)}" for d in missing)
        how = " ".join(f"--detail {iv.fact}.{d.name}=NEW_{d.kind.upper()}" for d in missing)
        raise InputError(Problem("--correct", f"the new text of fact {iv.fact!r} does not name {said}; a fact's "
                                 f"text and details must agree: if that changed too, give it, e.g. {how}"))


class _Town:
    """The parent's town as it stands at the fork (its own arrivals and departures up to the fork
    tick applied, those at the tick itself included: they come before the interventions), which
    the interventions are checked against one after another."""

    def __init__(self, loaded: LoadedScenario, at: int) -> None:
        sc = loaded.scenario
        self.loaded = loaded
        self.places = {p.id: p.name for p in sc.town.places}
        self.names = {p.persona.id: p.persona.name for p in loaded.everyone()}
        """Everyone of the run, those who arrive after the fork too: nobody new may take an id."""
        self.present = loaded.in_town(at)
        standing = sc
        for tick, _, ev in sc.delivery_order():
            if tick > at:
                break
            if ev.kind == "correction":
                standing = standing.with_correction(ev.fact or "", ev.text, ev.details)
        self.facts = {f.id: f for f in standing.facts}
        """The facts as they stand at the fork (the parent's corrections before it applied)."""

    def check_present(self, option: str, person: str) -> None:
        if person not in self.names:
            raise InputError(Problem(option, f"unknown person {person!r}; the run's people: "
                                     f"{', '.join(sorted(self.present))}"))
        if person not in self.present:
            raise InputError(Problem(option, f"{person!r} is not in the town at the fork (left it or not yet "
                                     f"arrived); in the town: {', '.join(sorted(self.present))}"))

    def leave(self, person: str) -> str:
        """``person`` leaves (checked present already); their name."""
        self.present.discard(person)
        return self.names[person]

    def arrive(self, iv: Intervention) -> ResolvedPersona:
        """The person of ``iv``'s persona file, placed in the town (their home: ``iv.home``, else
        where they arrive); they are in the town from now on."""
        if not iv.persona or not iv.place:
            raise InputError(Problem("--add", "an arrival needs a persona file and the place they arrive at "
                                     "(PERSONA_FILE@PLACE)"))
        path = Path(iv.persona)
        why = missing_file(path)
        if why is not None:
            raise InputError(Problem("--add", f"persona file {why}: {path}"))
        persona = load_persona(path)  # its own problems name the file, line and field
        if persona.id in self.names:
            raise InputError(Problem("--add", f"{persona.id!r} ({path}) is already one of the run's people; "
                                     "an arrival brings someone new"))
        entry = PersonaEntry(file=str(path), home=iv.home or iv.place, workplace=iv.workplace, crowd=iv.crowd)
        person, _ = place_persona(persona, entry, str(path), set(self.places), start_place=iv.place)
        self.names[persona.id] = persona.name
        self.present.add(persona.id)
        return person

    def corrected_details(self, iv: Intervention) -> list[FactDetail] | None:
        """The fact's details with ``iv.details``' values (each keeps its kind; a place, date or time
        drops the aliases of the value it had, a text detail's value is its one alias), or None
        when it changes none."""
        if not iv.details:
            return None
        fact = self.facts[iv.fact or ""]
        by_name = {d.name: d for d in fact.details}
        new = dict(by_name)
        for name, value in iv.details:
            old = by_name.get(name)
            if old is None:
                raise InputError(Problem("--detail", f"fact {fact.id!r} has no detail {name!r}; its details: "
                                         f"{', '.join(by_name) or '(none)'}"))
            if old.kind == "place" and value not in self.places:
                raise InputError(Problem("--detail", f"{fact.id}.{name}: unknown place {value!r}; the town's places: "
                                         f"{', '.join(sorted(self.places))}"))
            try:
                new[name] = FactDetail(name=name, kind=old.kind, value=value,
                                       aliases=[value] if old.kind == "text" else [])
            except ValidationError as exc:
                raise InputError(Problem("--detail", f"{fact.id}.{name}: "
                                         + "; ".join(e["msg"] for e in exc.errors()))) from None
        return list(new.values())


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
