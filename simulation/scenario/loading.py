"""Loading a scenario or persona file: YAML in, a validated and resolved model out, or every problem located.

Errors name file, line and field (``file:LINE:COL: field: message``), and a scenario's
problems are collected and reported together rather than one per attempt.
"""

from __future__ import annotations

from pathlib import Path

from simulation.errors import FieldPath, InputError, Problem
from simulation.formats.persona import HOME, WORK, Persona
from simulation.formats.validation import validate_document
from simulation.formats.yamlfile import YamlDocument, load_yaml, missing_file, parse_yaml
from simulation.scenario.references import check_references
from simulation.scenario.people import PersonaEntry
from simulation.scenario.resolved import LoadedScenario, ResolvedPersona
from simulation.scenario.schema import Scenario, explain

__all__ = ["load", "load_persona", "place_persona", "problem_at"]


def problem_at(loaded: LoadedScenario, path: tuple[str | int, ...], message: str) -> Problem:
    """A problem found after loading (by a part the scenario names, e.g. its cognition phases),
    located in the scenario file as it was loaded: file, line, column and field."""
    return parse_yaml(loaded.source_text, Path(loaded.path), "scenario file").problem(path, message)


def load_persona(path: Path | str) -> Persona:
    """Load and validate one persona file."""
    return validate_document(load_yaml(path, "persona file"), Persona, "persona")


def load(path: Path | str, text: str | None = None) -> LoadedScenario:
    """Load, validate and resolve a scenario file. Raises InputError naming file, line and field.
    ``text``: the file's text as changed in memory (an experiment's condition), read as if it
    were ``path`` (its relative paths are taken from there)."""
    doc = load_yaml(path, "scenario file") if text is None else parse_yaml(text, Path(path), "scenario file")
    sc = validate_document(doc, Scenario, "scenario", explain=explain)
    people: list[ResolvedPersona] = []
    problems: list[Problem] = []
    places = {p.id for p in sc.town.places}
    for i, entry in enumerate(sc.personas):
        person, found = _person(doc, entry, ("personas", i), places)
        people += [person] if person is not None else []
        problems += found
    arrivals: dict[int, ResolvedPersona] = {}
    for i, ev in enumerate(sc.events):
        if ev.kind == "arrival" and ev.person is not None:
            person, found = _person(doc, ev.person, ("events", i, "person"), places, start_place=ev.place)
            if person is not None:
                arrivals[i] = person
            problems += found
    if problems:
        raise InputError(problems)
    sampled: list[ResolvedPersona] = []
    if sc.population is not None:
        # Imported here, not above: the population package builds on this package's persona
        # schema, so importing it while this package initialises would be circular.
        from simulation.scenario.sampled import resolve_population

        try:
            sampled = resolve_population(doc, sc, {p.persona.id for p in [*people, *arrivals.values()]})
        except InputError as exc:
            problems.extend(exc.problems)
    problems += check_references(doc, sc, people, sampled, arrivals)
    if problems:
        raise InputError(problems)
    return LoadedScenario(path=str(doc.path), scenario=sc, people=people + sampled, source_text=doc.text,
                          arrivals=arrivals)


def _person(doc: YamlDocument, entry: PersonaEntry, at: FieldPath, places: set[str],
            start_place: str | None = None) -> tuple[ResolvedPersona | None, list[Problem]]:
    """One person of the scenario (``personas[i]``, or an arrival's ``person`` at ``at``) read and
    placed (``start_place``: where they are first, default the entry's own or their home); None
    and the problems when their persona cannot be read."""
    if entry.persona is not None:
        persona, where, inline = entry.persona, doc, (*at, "persona")
        source = f"{doc.path} (inline)"
    else:
        persona_path = Path(doc.path).parent / entry.file  # type: ignore[operator]
        why = missing_file(persona_path)
        if why is not None:
            return None, [doc.problem((*at, "file"), f"persona file {why}: {persona_path}")]
        try:
            where = load_yaml(persona_path, "persona file")
            persona = validate_document(where, Persona, "persona")
        except InputError as exc:
            return None, list(exc.problems)
        source, inline = str(persona_path), None
    person, misplaced = place_persona(persona, entry, source, places, start_place=start_place,
                                      keep_misplaced=inline is not None)
    # Habits at places this town lacks: an inline persona was written for this town, so they
    # are mistakes; a persona file travels between towns, so they were left out (and `agora
    # validate` says which).
    problems = [where.problem((*inline, "routine", "day", j, "place"),
                              f"'work', but the scenario gives {persona.id} no workplace ({_dotted(at)}.workplace)"
                              if persona.routine.day[j].place == WORK else
                              f"unknown place {persona.routine.day[j].place!r} (home, work or a place of the town)")
                for j in misplaced] if inline is not None else []
    return person, problems


def place_persona(persona: Persona, entry: PersonaEntry, source: str, places: set[str], *,
                  start_place: str | None = None, keep_misplaced: bool = False) -> tuple[ResolvedPersona, list[int]]:
    """``persona`` placed in the town as ``entry`` says (home, workplace, crowd, model group), at
    ``start_place`` (default: the entry's, else home), and the indexes of its habits at places the
    town lacks (or at 'work' without a workplace). Those are left out of the person's usual day
    (``habits_left_out`` names them) unless ``keep_misplaced`` (an inline persona's, reported as
    mistakes instead). Also what a fork that adds someone uses (``simulation.run.fork``)."""
    misplaced = [j for j, h in enumerate(persona.routine.day)
                 if (h.place == WORK and entry.workplace is None) or h.place not in (HOME, WORK, *places)]
    left_out: list[str] = []
    if misplaced and not keep_misplaced:
        day = persona.routine.day
        left_out = [f"{day[j].at:%H:%M} {day[j].activity} ({day[j].place})" for j in misplaced]
        persona = persona.model_copy(update={"routine": persona.routine.model_copy(
            update={"day": [h for j, h in enumerate(day) if j not in misplaced]})})
    person = ResolvedPersona(persona=persona, home=entry.home,
                             start_place=start_place or entry.start_place or entry.home, workplace=entry.workplace,
                             source=source, habits_left_out=left_out, crowd=entry.crowd, llm_group=entry.llm)
    return person, misplaced


def _dotted(at: FieldPath) -> str:
    """``("personas", 2)`` as the file's readers write it: ``personas[2]``."""
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if k else str(p)) for k, p in enumerate(at))
