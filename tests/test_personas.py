"""The persona library: every file validates and is complete, and the town hangs together.

The library is every persona YAML under personas/ (the flagship cast at the top level, more
townsfolk in personas/townsfolk/); population specs in personas/populations/ are not personas.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulation.scenario import Persona, load, load_persona

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = sorted(p for p in (ROOT / "personas").rglob("*.yaml") if "populations" not in p.relative_to(ROOT).parts)
FACTORS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")


@pytest.fixture(scope="module")
def library() -> dict[str, Persona]:
    return {p.stem: load_persona(p) for p in LIBRARY}


def test_a_town_sized_library() -> None:
    assert len(LIBRARY) >= 25


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.stem)
def test_persona_file_is_complete(path: Path) -> None:
    p = load_persona(path)
    assert p.id == path.stem
    for field in ("household", "social_identity", "personal_identity", "life_context", "speaking_style"):
        assert len(getattr(p, field)) >= 40, f"{field} is missing or too thin"
    assert p.routine.description and p.routine.wake != p.routine.sleep
    assert len(p.traits) >= 3
    assert len(p.memories) >= 3
    assert len(p.relationships) >= 2
    assert p.id not in p.relationships


def test_relationships_point_into_the_library(library: dict[str, Persona]) -> None:
    for pid, p in library.items():
        unknown = set(p.relationships) - set(library)
        assert not unknown, f"{pid} knows unknown people: {unknown}"


def test_everyone_is_known_by_someone(library: dict[str, Persona]) -> None:
    known = {other for p in library.values() for other in p.relationships}
    assert set(library) <= known


def test_names_are_unique(library: dict[str, Persona]) -> None:
    names = [p.name for p in library.values()]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("factor", FACTORS)
def test_library_spans_each_factor(library: dict[str, Persona], factor: str) -> None:
    """Per-factor correlations in the bigfive suite need personas at both ends of every factor."""
    values = [getattr(p.big_five, factor) for p in library.values()]
    assert sum(v >= 0.65 for v in values) >= 3
    assert sum(v <= 0.35 for v in values) >= 3


def test_the_small_flagship_still_loads_its_eight() -> None:
    loaded = load(ROOT / "scenarios" / "valentines-small.yaml")
    assert len(loaded.people) == 8
    assert all(p.persona.social_identity for p in loaded.people)
