"""What a schema cannot check: that every id a scenario names exists, and that its files are there.

Places, paths, people, events, facts, probes and topics refer to each other by id; each dangling or
duplicate id is a problem at the line that names it, all of them reported together.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta
from pathlib import Path

import networkx as nx

from simulation.errors import Problem
from simulation.formats.paths import resolve_path
from simulation.formats.yamlfile import YamlDocument, missing_file
from simulation.provenance.details import Detail, DetailReader, place_aliases
from simulation.scenario.measures import FactDetail
from simulation.scenario.resolved import ResolvedPersona
from simulation.scenario.schema import Scenario

__all__ = ["check_references", "unnamed_details"]


def unnamed_details(sc: Scenario, text: str, details: Sequence[FactDetail], when: date) -> list[FactDetail]:
    """The place and date details of a fact that its ``text`` (said on ``when``) does not name, by
    the rules probes and the tracker read them with (``provenance.details``): a correction whose
    new text moves the party to the Rose and Crown but keeps Hobbs Cafe as its place would score
    everyone who repeats it as wrong. Both ``agora fork --correct`` and a scenario's ``correction``
    event are refused for it."""
    reader = DetailReader(place_aliases({p.id: (p.name, p.kind) for p in sc.town.places}))
    missing = {d.name for d in reader.unnamed(text, [Detail(d.name, d.kind, d.value, tuple(d.aliases))
                                                      for d in details], when)}
    return [d for d in details if d.name in missing]


def shown_detail(sc: Scenario, detail: FactDetail) -> str:
    """A detail's value as a person would say it (a place's name), for messages."""
    names = {p.id: p.name for p in sc.town.places}
    return f"{names[detail.value]} ({detail.value})" if detail.kind == "place" and detail.value in names \
        else detail.value


def check_references(doc: YamlDocument, sc: Scenario, people: list[ResolvedPersona],
                     sampled: list[ResolvedPersona] | None = None,
                     arrivals: dict[int, ResolvedPersona] | None = None) -> list[Problem]:
    """Every broken reference of ``sc`` (whose named people are ``people``; ``sampled`` were placed by
    the sampler; ``arrivals``: event index -> the person an arrival brings)."""
    problems: list[Problem] = []
    place_ids: dict[str, int] = {}
    for i, place in enumerate(sc.town.places):
        if place.id in place_ids:
            problems.append(doc.problem(("town", "places", i, "id"), f"duplicate place id {place.id!r}"))
        place_ids[place.id] = i
    for i, path in enumerate(sc.town.paths):
        a, b = path.between
        for j, end in enumerate((a, b)):
            if end not in place_ids:
                problems.append(doc.problem(("town", "paths", i, "between", j), f"unknown place {end!r}"))
        if a == b:
            problems.append(doc.problem(("town", "paths", i, "between"), f"a path from {a!r} to itself"))
    if not problems and len(place_ids) > 1:
        graph = nx.Graph()
        graph.add_nodes_from(place_ids)
        graph.add_edges_from(p.between for p in sc.town.paths)
        parts = sorted(nx.connected_components(graph), key=len, reverse=True)
        for part in parts[1:]:
            cut_off = sorted(part)[0]
            problems.append(
                doc.problem(
                    ("town", "places", place_ids[cut_off], "id"),
                    f"place {cut_off!r} cannot be reached from {sorted(parts[0])[0]!r}; add a path",
                )
            )
    agent_ids: dict[str, int] = {}
    for i, person in enumerate(people):
        pid = person.persona.id
        if pid in agent_ids:
            problems.append(doc.problem(("personas", i), f"duplicate persona id {pid!r} (also personas[{agent_ids[pid]}])"))
        agent_ids.setdefault(pid, i)
        for key in ("home", "start_place", "workplace"):
            place = getattr(sc.personas[i], key)
            if place is not None and place not in place_ids:
                problems.append(doc.problem(("personas", i, key), f"unknown place {place!r}"))
    for person in sampled or []:  # the sampler placed them in known places and kept their ids unique
        agent_ids.setdefault(person.persona.id, -1)
    starting = set(agent_ids)
    arriving = {a.persona.id for a in (arrivals or {}).values()}
    for i, person in sorted((arrivals or {}).items()):
        pid, entry = person.persona.id, sc.events[i].person
        assert entry is not None
        if pid in agent_ids:
            problems.append(doc.problem(("events", i, "person"), f"persona id {pid!r} is already in the town "
                                        "(an arrival brings someone new)"))
        agent_ids.setdefault(pid, -1)
        for key in ("home", "workplace"):
            place = getattr(entry, key)
            if place is not None and place not in place_ids:
                problems.append(doc.problem(("events", i, "person", key), f"unknown place {place!r}"))
        if entry.persona is not None:  # inline: written for this scenario, so its ties must be too
            for other in entry.persona.relationships:
                if other not in agent_ids and other not in arriving:
                    problems.append(doc.problem(("events", i, "person", "persona", "relationships", other),
                                                f"unknown persona {other!r}"))
    end = sc.clock.start + timedelta(hours=sc.clock.duration_hours)
    for i, ev in enumerate(sc.events):
        if ev.to is not None and ev.to not in agent_ids:
            problems.append(doc.problem(("events", i, "to"), f"unknown persona {ev.to!r}"))
        if ev.place is not None and ev.place not in place_ids:
            problems.append(doc.problem(("events", i, "place"), f"unknown place {ev.place!r}"))
        elif ev.object is not None and ev.place is not None and \
                ev.object not in sc.town.places[place_ids[ev.place]].objects:
            problems.append(doc.problem(("events", i, "object"), f"{ev.object!r} is not one of the objects at "
                                        f"{ev.place!r} ({', '.join(sc.town.places[place_ids[ev.place]].objects)})"))
        if ev.kind == "setting" and ev.setting is not None:
            try:
                sc.with_setting(ev.setting, ev.value)
            except ValueError as exc:
                problems.append(doc.problem(("events", i, "value"), str(exc)))
        if not sc.clock.start <= ev.at < end or sc.clock.tick_at(ev.at) >= sc.clock.total_ticks:
            problems.append(
                doc.problem(("events", i, "at"), f"{ev.at:%Y-%m-%d %H:%M} is outside the run "
                            f"({sc.clock.start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M})")
            )
    problems += _presence(doc, sc, starting, arrivals or {}, set(agent_ids))
    fact_ids: dict[str, int] = {}
    for i, fact in enumerate(sc.facts):
        if fact.id in fact_ids:
            problems.append(doc.problem(("facts", i, "id"), f"duplicate fact id {fact.id!r}"))
        fact_ids.setdefault(fact.id, i)
        for j, detail in enumerate(fact.details):
            if detail.kind == "place" and detail.value not in place_ids:
                problems.append(doc.problem(("facts", i, "details", j, "value"), f"unknown place {detail.value!r}"))
        for j, aid in enumerate(fact.known_by):
            if aid not in agent_ids:
                problems.append(doc.problem(("facts", i, "known_by", j), f"unknown persona {aid!r}"))
    for i, ev in enumerate(sc.events):
        if ev.fact is not None and ev.fact not in fact_ids:
            problems.append(doc.problem(("events", i, "fact"), f"unknown fact {ev.fact!r}"))
        for j, detail in enumerate(ev.details or []):
            if detail.kind == "place" and detail.value not in place_ids:
                problems.append(doc.problem(("events", i, "details", j, "value"), f"unknown place {detail.value!r}"))
    problems += _corrections(doc, sc, fact_ids)
    for i, probe in enumerate(sc.probes):
        if probe.fact is not None and probe.fact not in fact_ids:
            problems.append(doc.problem(("probes", i, "fact"), f"unknown fact {probe.fact!r}"))
        if probe.agents != "all":
            for j, aid in enumerate(probe.agents):
                if aid not in agent_ids:
                    problems.append(doc.problem(("probes", i, "agents", j), f"unknown persona {aid!r}"))
    crowd = {p.persona.id for p in [*people, *(sampled or []), *(arrivals or {}).values()] if p.crowd}
    problems += _beats(doc, sc, place_ids, fact_ids, agent_ids, crowd, end)
    topic_ids: set[str] = set()
    for i, topic in enumerate(sc.topics):
        if topic.id in topic_ids:
            problems.append(doc.problem(("topics", i, "id"), f"duplicate topic id {topic.id!r}"))
        topic_ids.add(topic.id)
    why = sc.llm.model_problem(Path(doc.path).parent)
    if why is not None:
        problems.append(doc.problem(("llm", "model"), why))
    problems += _model_groups(doc, sc)
    if sc.memory.embedding_model is not None:
        folder = resolve_path(sc.memory.embedding_model, Path(doc.path).parent)
        if missing_file(folder / "modules.json") is not None:
            problems.append(doc.problem(("memory", "embedding_model"),
                                        f"no sentence-transformers model folder (with modules.json) at {folder}"))
    for i, entry in enumerate(sc.personas):  # an inline persona belongs to this scenario: its ties must too
        if entry.persona is not None:
            for other in entry.persona.relationships:
                if other not in agent_ids:
                    problems.append(doc.problem(("personas", i, "persona", "relationships", other),
                                                f"unknown persona {other!r}"))
    return problems


def _beats(doc: YamlDocument, sc: Scenario, place_ids: dict[str, int], fact_ids: dict[str, int],
           agent_ids: dict[str, int], crowd: set[str], end: datetime) -> list[Problem]:
    """A beat names a fact, a place and people that exist, and a deadline at a tick the run records
    (one at the run's very end could never be decided: the last tick is one tick before it)."""
    problems: list[Problem] = []
    seen: set[str] = set()
    named = len(agent_ids) - len(crowd)
    for i, beat in enumerate(sc.story.beats):
        at = ("story", "beats", i)
        if beat.id in seen:
            problems.append(doc.problem((*at, "id"), f"duplicate beat id {beat.id!r}"))
        seen.add(beat.id)
        if beat.fact is not None and beat.fact not in fact_ids:
            problems.append(doc.problem((*at, "fact"), f"unknown fact {beat.fact!r}"))
        if beat.place is not None and beat.place not in place_ids:
            problems.append(doc.problem((*at, "place"), f"unknown place {beat.place!r}"))
        for j, aid in enumerate(beat.people if isinstance(beat.people, list) else []):
            if aid not in agent_ids:
                problems.append(doc.problem((*at, "people", j), f"unknown persona {aid!r}"))
        if beat.people == "all" and beat.count is not None and beat.count > named:
            problems.append(doc.problem((*at, "count"), f"{beat.count} is more than the {named} named people "
                                        "who are ever in the town (all leaves the background crowd out)"))
        for key in ("after", "by"):
            when = getattr(beat, key)
            last = sc.clock.time_at(sc.clock.total_ticks - 1)
            if when is not None and not sc.clock.start <= when <= last:
                problems.append(doc.problem((*at, key), f"{when:%Y-%m-%d %H:%M} is not a time the run records "
                                            f"(its ticks run from {sc.clock.start:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M})"))
    return problems


def _corrections(doc: YamlDocument, sc: Scenario, fact_ids: dict[str, int]) -> list[Problem]:
    """A ``correction`` whose new text does not name the fact's place or date as they stand after it
    (its own ``details``, else those the fact had then: ``unnamed_details``). The events are walked
    in the order the run delivers them, so a second correction is read against the first's."""
    problems: list[Problem] = []
    standing = {fact.id: list(fact.details) for fact in sc.facts}
    for _, i, ev in sc.delivery_order():
        if ev.kind != "correction" or ev.fact not in fact_ids:
            continue
        details = standing[ev.fact] = list(ev.details) if ev.details is not None else standing[ev.fact]
        for detail in unnamed_details(sc, ev.text, details, ev.at.date()):
            problems.append(doc.problem(("events", i, "text"), (
                f"the corrected text of fact {ev.fact!r} does not name its {detail.name} "
                f"{shown_detail(sc, detail)}; a fact's text and details must agree: if the {detail.name} "
                f"changed, give the new one in this event's details ({{name: {detail.name}, kind: "
                f"{detail.kind}, value: ...}})")))
    return problems


def _model_groups(doc: YamlDocument, sc: Scenario) -> list[Problem]:
    """A person or population naming a model group the ``llm:`` block lacks, and a group's model
    file that is not there (a model taken from the block around it is checked there, once)."""
    problems: list[Problem] = []
    groups = sc.llm.groups
    known = (f"the scenario's groups: {', '.join(sorted(groups))}" if groups
             else "the scenario has no llm.groups")
    named = [(("personas", i, "llm"), entry.llm) for i, entry in enumerate(sc.personas)]
    named += [(("events", i, "person", "llm"), ev.person.llm) for i, ev in enumerate(sc.events)
              if ev.person is not None]
    if sc.population is not None:
        named.append((("population", "llm"), sc.population.llm))
    for where, group in named:
        if group is not None and group not in groups:
            problems.append(doc.problem(where, f"unknown model group {group!r}; {known}"))
    for name, settings in groups.items():
        if settings.model is None or (settings.backend, settings.model) == (sc.llm.backend, sc.llm.model):
            continue
        why = settings.model_problem(Path(doc.path).parent)
        if why is not None:
            problems.append(doc.problem(("llm", "groups", name, "model"), why))
    return problems


def _presence(doc: YamlDocument, sc: Scenario, starting: set[str], arrivals: dict[int, ResolvedPersona],
              known: set[str]) -> list[Problem]:
    """A whisper or a departure for someone who is not in the town at its time: not arrived yet,
    or gone already. The events are walked in the order the run delivers them (by tick, then as
    listed); an unknown id is the reference check's problem, not this one's."""
    problems: list[Problem] = []
    present = set(starting)
    came: dict[str, int] = {}
    for i, person in sorted(arrivals.items(), reverse=True):
        came[person.persona.id] = i
    went: dict[str, int] = {}
    for _, i, ev in sc.delivery_order():
        if ev.kind in ("whisper", "departure") and ev.to in known and ev.to not in present:
            why = (f"they left at {sc.events[went[ev.to]].at:%Y-%m-%d %H:%M} (events[{went[ev.to]}])" if ev.to in went
                   else f"they arrive at {sc.events[came[ev.to]].at:%Y-%m-%d %H:%M} (events[{came[ev.to]}])"
                   if ev.to in came else "they never arrive")
            problems.append(doc.problem(("events", i, "to"), f"{ev.to!r} is not in the town at "
                                        f"{ev.at:%Y-%m-%d %H:%M}: {why}"))
        if ev.kind == "departure" and ev.to in present:
            present.discard(ev.to)
            went[ev.to] = i
        elif ev.kind == "arrival" and i in arrivals:
            present.add(arrivals[i].persona.id)
    return problems
