"""The deterministic sampler: a spec, n and a seed in, the same complete people out every time.

Why: a town needs more people than anyone wants to write by hand (TinyTroupe's factory idea),
but a study needs to know what its population is made of and to get the same people again.
One seeded numpy generator draws every field in a fixed order, so spec + n + seed always
give the same people, and names never repeat. Text fields (traits, speaking style, the
SPeCtrum identity fields, routine) are composed from the sampled values, so every sampled
persona is complete and valid without an LLM; an LLM may add a backstory afterwards
(``simulation.population.backstory``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import time
from typing import Any

import numpy as np

from simulation.formats.persona import BigFive, Persona, Routine
from simulation.population.names import draw_names, slug
from simulation.population.spec import (FACTORS, Choice, Household, Occupation, PopulationSpec, TimeWindow,
                                        TraitDistribution, allowed_at, weights)
from simulation.population.traits import speaking_style_for, traits_for

__all__ = ["Sampled", "sample"]


@dataclass
class Sampled:
    """One sampled person and what the town placement needs to know."""

    persona: Persona
    workplace_kind: str | None


def _pick(rng: np.random.Generator, items: list[Any], age: int) -> Any:
    idx = allowed_at(items, age)
    return items[idx[int(rng.choice(len(idx), p=weights([items[i] for i in idx])))]]


def _pick_some(rng: np.random.Generator, items: list[Choice], k: int) -> list[str]:
    k = min(k, len(items))
    if k <= 0:
        return []
    chosen = rng.choice(len(items), size=k, replace=False, p=weights(items))
    return [items[int(i)].text for i in sorted(chosen)]


def _truncated_normal(rng: np.random.Generator, dist: TraitDistribution) -> float:
    for _ in range(10_000):  # rejection: exact, and cheap unless the mass in [0, 1] is tiny
        x = rng.normal(dist.mean, dist.sd)
        if 0.0 <= x <= 1.0:
            return round(float(x), 2)
    return round(min(1.0, max(0.0, dist.mean)), 2)


def _time_in(rng: np.random.Generator, window: TimeWindow) -> time:
    start = window.earliest.hour * 60 + window.earliest.minute
    end = window.latest.hour * 60 + window.latest.minute
    minute = start + 10 * int(rng.integers(0, (end - start) // 10 + 1))
    return time(minute // 60, minute % 60)


def _an(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _persona(rng: np.random.Generator, spec: PopulationSpec, first: str, last: str) -> Sampled:
    """One person; the order of draws is fixed, so a seed always gives the same person."""
    bin_ = spec.ages[int(rng.choice(len(spec.ages), p=weights(spec.ages)))]
    age = int(rng.integers(bin_.range[0], bin_.range[1] + 1))
    occ: Occupation = _pick(rng, spec.occupations, age)
    household: Household = _pick(rng, spec.households, age)
    b5 = BigFive(**{f: _truncated_normal(rng, getattr(spec.big_five, f)) for f in FACTORS})
    wake, sleep = _time_in(rng, spec.routine.wake), _time_in(rng, spec.routine.sleep)
    values = _pick_some(rng, spec.values, 2)
    groups = _pick_some(rng, spec.affiliations, int(rng.integers(0, 3)))
    concern = _pick_some(rng, spec.concerns, 1)
    memory_idx = rng.permutation(len(occ.memories))[:2] if occ.memories else []

    name = f"{first} {last}"
    traits = traits_for(b5)
    social = f"{age}-year-old {occ.title}."
    if groups:
        social += f" Belongs to {_join(groups)}."
    personal = f"{first} is {_join(traits)}."
    if values:
        personal += f" Cares most about {_join(values)}."
    context = household.text.rstrip(".") + "."
    if concern:
        context += f" {first} {concern[0].rstrip('.')}."
    day = f"{first} {occ.day.rstrip('.')}." if occ.day else f"{first} spends the day around town."
    memories = [occ.memories[int(i)].format(first=first, name=name) for i in sorted(memory_idx)]
    if concern:
        memories.append(f"{first} {concern[0].rstrip('.')}.")
    persona = Persona(
        id=slug(name), name=name, age=age, occupation=occ.title, household=household.text,
        traits=traits, big_five=b5, social_identity=social, personal_identity=personal, life_context=context,
        speaking_style=speaking_style_for(b5),
        routine=Routine(wake=wake, sleep=sleep,
                        description=f"{first} gets up at {wake:%H:%M}. {day} Bed at about {sleep:%H:%M}."),
        memories=memories,
    )
    return Sampled(persona, occ.workplace)


def sample(spec: PopulationSpec, n: int, seed: int, exclude: set[str] | frozenset[str] = frozenset()) -> list[Sampled]:
    """``n`` people from ``spec``; ``exclude`` holds ids already taken (e.g. a scenario's named people).

    Raises TooFewNames when the name lists cannot name ``n`` people without repeats."""
    rng = np.random.default_rng(seed)
    names = draw_names(rng, spec.names.first, spec.names.last, n, set(exclude))
    people = [_persona(rng, spec, first, last) for first, last in names]
    if spec.acquaintances and len(people) > 1:
        for i, person in enumerate(people):
            others = [j for j in range(len(people)) if j != i]
            k = min(spec.acquaintances, len(others))
            for j in sorted(int(x) for x in rng.choice(others, size=k, replace=False)):
                a, b = person.persona, people[j].persona
                for x, y in ((a, b), (b, a)):
                    x.relationships.setdefault(
                        y.id, f"Knows {y.name.split()[0]} from around town; {_an(y.occupation)}.")
    return people
