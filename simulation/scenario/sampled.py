"""A scenario's ``population:``: sample its people from the spec and place them in the town.

It belongs to loading a scenario (it turns the entry into resolved, placed people, with
problems located in the scenario file); the sampling itself is ``simulation.population``'s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulation.errors import InputError, Problem
from simulation.formats.paths import resolve_path
from simulation.formats.yamlfile import YamlDocument
from simulation.population.names import TooFewNames
from simulation.population.sampler import sample
from simulation.population.spec import load_spec
from simulation.scenario.resolved import ResolvedPersona
from simulation.scenario.schema import Scenario

__all__ = ["resolve_population"]


def resolve_population(doc: YamlDocument, sc: Scenario, taken: set[str]) -> list[ResolvedPersona]:
    """Sample a scenario's ``population:`` and place its people in the town; errors are located."""
    entry = sc.population
    assert entry is not None
    here = ("population",)
    spec_path = resolve_path(entry.spec, Path(doc.path).parent)
    if not spec_path.is_file():
        what = "is a directory" if spec_path.is_dir() else "not found"
        raise InputError(doc.problem(here + ("spec",), f"population spec {what}: {spec_path}"))
    spec = load_spec(spec_path)  # its own problems name the spec file
    places = {p.id: p for p in sc.town.places}
    problems: list[Problem] = []
    for j, home in enumerate(entry.homes):
        if home not in places:
            problems.append(doc.problem(here + ("homes", j), f"unknown place {home!r}"))
    kinds = {o.workplace for o in spec.occupations if o.workplace}
    for kind, place in entry.workplaces.items():
        if kind not in kinds:
            problems.append(doc.problem(here + ("workplaces", kind),
                                        f"no occupation in {spec_path.name} works at a {kind!r}; "
                                        f"its workplace kinds are {', '.join(sorted(kinds)) or 'none'}"))
        elif place not in places:
            problems.append(doc.problem(here + ("workplaces", kind), f"unknown place {place!r}"))
    homes = list(entry.homes) or [p.id for p in sc.town.places if p.kind.strip().lower() == "home"]
    if not homes:
        problems.append(doc.problem(here, "the town has no place of kind 'home'; list the homes under 'homes'"))
    if problems:
        raise InputError(problems)
    seed = sc.seed if entry.seed is None else entry.seed
    try:
        people = sample(spec, entry.n, seed, taken)
    except TooFewNames as exc:
        raise InputError(doc.problem(here + ("n",), str(exc))) from None
    rng = np.random.default_rng([seed, 1])  # placement has its own stream: it never changes who is sampled
    order = [homes[int(i)] for i in rng.permutation(len(homes))]
    by_kind: dict[str, list[str]] = {}
    for p in sc.town.places:
        by_kind.setdefault(p.kind.strip().lower(), []).append(p.id)
    resolved = []
    for i, s in enumerate(people):
        home = order[i % len(order)]
        workplace = None
        if s.workplace_kind:
            candidates = [entry.workplaces[s.workplace_kind]] if s.workplace_kind in entry.workplaces \
                else by_kind.get(s.workplace_kind, [])
            if candidates:
                workplace = candidates[int(rng.integers(len(candidates)))]
        start = workplace if entry.start == "workplace" and workplace else home
        resolved.append(ResolvedPersona(persona=s.persona, home=home, start_place=start, workplace=workplace,
                                        source=f"{spec_path} (sampled {i + 1} of {entry.n}, seed {seed})",
                                        crowd=entry.crowd, llm_group=entry.llm))
    return resolved
