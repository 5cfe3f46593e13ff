"""Loading a scenario or persona file: YAML in, a validated and resolved model out, or every problem located.

Errors name file, line and field (``file:LINE:COL: field: message``), and a scenario's
problems are collected and reported together rather than one per attempt.
"""

from __future__ import annotations

from pathlib import Path

from simulation.errors import InputError, Problem
from simulation.formats.persona import HOME, WORK, Persona
from simulation.formats.validation import validate_document
from simulation.formats.yamlfile import load_yaml, missing_file, parse_yaml
from simulation.scenario.references import check_references
from simulation.scenario.resolved import LoadedScenario, ResolvedPersona
from simulation.scenario.schema import Scenario, explain

__all__ = ["load", "load_persona", "problem_at"]


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
        if entry.persona is not None:
            persona, source = entry.persona, f"{doc.path} (inline)"
            where, at = doc, ("personas", i, "persona")
        else:
            persona_path = Path(doc.path).parent / entry.file  # type: ignore[operator]
            why = missing_file(persona_path)
            if why is not None:
                problems.append(doc.problem(("personas", i, "file"), f"persona file {why}: {persona_path}"))
                continue
            try:
                where, at = load_yaml(persona_path, "persona file"), ()
                persona = validate_document(where, Persona, "persona")
            except InputError as exc:
                problems.extend(exc.problems)
                continue
            source = str(persona_path)
        # Habits at places this town lacks: an inline persona was written for this town, so they
        # are mistakes; a persona file travels between towns, so they are left out here (and
        # `agora validate` says which).
        misplaced = [j for j, h in enumerate(persona.routine.day)
                     if (h.place == WORK and entry.workplace is None) or h.place not in (HOME, WORK, *places)]
        left_out: list[str] = []
        if entry.persona is not None:
            for j in misplaced:
                habit = persona.routine.day[j]
                problems.append(where.problem(
                    (*at, "routine", "day", j, "place"),
                    f"'work', but the scenario gives {persona.id} no workplace (personas[{i}].workplace)"
                    if habit.place == WORK else f"unknown place {habit.place!r} (home, work or a place of the town)"))
        elif misplaced:
            left_out = [f"{persona.routine.day[j].at:%H:%M} {persona.routine.day[j].activity} ({persona.routine.day[j].place})"
                        for j in misplaced]
            day = [h for j, h in enumerate(persona.routine.day) if j not in misplaced]
            persona = persona.model_copy(update={"routine": persona.routine.model_copy(update={"day": day})})
        people.append(
            ResolvedPersona(persona=persona, home=entry.home, start_place=entry.start_place or entry.home,
                            workplace=entry.workplace, source=source, habits_left_out=left_out,
                            crowd=entry.crowd, llm_group=entry.llm)
        )
    if problems:
        raise InputError(problems)
    sampled: list[ResolvedPersona] = []
    if sc.population is not None:
        # Imported here, not above: the population package builds on this package's persona
        # schema, so importing it while this package initialises would be circular.
        from simulation.scenario.sampled import resolve_population

        try:
            sampled = resolve_population(doc, sc, {p.persona.id for p in people})
        except InputError as exc:
            problems.extend(exc.problems)
    problems += check_references(doc, sc, people, sampled)
    if problems:
        raise InputError(problems)
    return LoadedScenario(path=str(doc.path), scenario=sc, people=people + sampled, source_text=doc.text)
