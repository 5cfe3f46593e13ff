"""TownMap: fastest routes by walking minutes, map layout and the Mesa space over the town graph."""

from __future__ import annotations

import heapq
import itertools
import math
import random
from pathlib import Path

import pytest

from simulation.scenario import Town, load
from simulation.world.town_map import TownMap

ROOT = Path(__file__).resolve().parent.parent
FLAGSHIP = ROOT / "scenarios" / "valentines-small.yaml"


def make_town(places: list[str], paths: list[tuple[str, str, int]], positions: dict | None = None) -> Town:
    positions = positions or {}
    return Town.model_validate(
        {
            "places": [
                {"id": p, "name": p.replace("_", " ").title(), "kind": "place", "position": positions.get(p)}
                for p in places
            ],
            "paths": [{"between": [a, b], "minutes": m} for a, b, m in paths],
        }
    )


def shortest_minutes(town: Town, start: str) -> dict[str, int]:
    """Independent Dijkstra over the scenario's paths (stdlib only)."""
    adj: dict[str, list[tuple[str, int]]] = {p.id: [] for p in town.places}
    for path in town.paths:
        a, b = path.between
        adj[a].append((b, path.minutes))
        adj[b].append((a, path.minutes))
    dist = {start: 0}
    heap = [(0, start)]
    while heap:
        d, node = heapq.heappop(heap)
        if d > dist[node]:
            continue
        for nxt, m in adj[node]:
            if d + m < dist.get(nxt, math.inf):
                dist[nxt] = d + m
                heapq.heappush(heap, (d + m, nxt))
    return dist


# A small town where the direct path a-b (10 min) is slower than going round by c (3 + 4 min).
SMALL_PLACES = ["a", "b", "c", "d"]
SMALL_PATHS = [("a", "b", 10), ("a", "c", 3), ("c", "b", 4), ("b", "d", 2)]


@pytest.fixture
def small() -> TownMap:
    return TownMap(make_town(SMALL_PLACES, SMALL_PATHS))


@pytest.fixture(scope="module")
def flagship_town() -> Town:
    return load(FLAGSHIP).scenario.town


@pytest.fixture(scope="module")
def flagship(flagship_town: Town) -> TownMap:
    return TownMap(flagship_town)


# --------------------------------------------------------------------------- routes


def test_two_hops_beat_slow_direct_edge(small: TownMap) -> None:
    assert small.route("a", "b") == ["a", "c", "b"]
    assert small.walking_minutes("a", "b") == 7
    assert small.route("b", "a") == ["b", "c", "a"]
    assert small.walking_minutes("b", "a") == 7


def test_walking_minutes_sums_legs(small: TownMap) -> None:
    assert small.route("a", "d") == ["a", "c", "b", "d"]
    assert small.walking_minutes("a", "d") == 3 + 4 + 2
    assert small.leg_minutes("a", "b") == 10
    assert small.leg_minutes("b", "a") == 10
    assert small.walking_minutes("c", "d") == 6


def test_direct_edge_used_when_fastest() -> None:
    town = TownMap(make_town(["a", "b", "c"], [("a", "b", 5), ("a", "c", 3), ("c", "b", 4)]))
    assert town.route("a", "b") == ["a", "b"]
    assert town.walking_minutes("a", "b") == 5


@pytest.mark.parametrize("place", SMALL_PLACES)
def test_route_to_itself(small: TownMap, place: str) -> None:
    assert small.route(place, place) == [place]
    assert small.walking_minutes(place, place) == 0


def test_route_returns_a_fresh_list(small: TownMap) -> None:
    route = small.route("a", "d")
    route.append("zzz")
    assert small.route("a", "d") == ["a", "c", "b", "d"]


def test_single_place_town() -> None:
    town = TownMap(make_town(["only"], []))
    assert town.route("only", "only") == ["only"]
    assert town.walking_minutes("only", "only") == 0
    assert set(town.layout()) == {"only"}


def test_names(small: TownMap) -> None:
    assert small.name("a") == "A"


def test_flagship_routes_are_shortest(flagship: TownMap, flagship_town: Town) -> None:
    ids = [p.id for p in flagship_town.places]
    for start in ids:
        expected = shortest_minutes(flagship_town, start)
        assert set(expected) == set(ids)  # connected
        for goal in ids:
            route = flagship.route(start, goal)
            assert route[0] == start and route[-1] == goal
            assert len(set(route)) == len(route)  # no place twice
            legs = sum(flagship.leg_minutes(a, b) for a, b in itertools.pairwise(route))
            assert flagship.walking_minutes(start, goal) == legs == expected[goal], (start, goal, route)


def test_flagship_known_routes(flagship: TownMap) -> None:
    assert flagship.route("rodriguez_flat", "hobbs_cafe") == ["rodriguez_flat", "hobbs_cafe"]
    assert flagship.walking_minutes("rodriguez_flat", "hobbs_cafe") == 2
    # flat -> cafe -> square -> pharmacy: 2 + 3 + 2
    assert flagship.route("rodriguez_flat", "willow_pharmacy") == [
        "rodriguez_flat", "hobbs_cafe", "town_square", "willow_pharmacy",
    ]
    assert flagship.walking_minutes("rodriguez_flat", "willow_pharmacy") == 7
    # to the college, the library road (2 + 4 + 8 = 14 from the square) loses to the supply store (3 + 9 = 12)
    assert flagship.route("town_square", "oak_hill_college") == ["town_square", "harvey_oak_supply", "oak_hill_college"]
    assert flagship.walking_minutes("town_square", "oak_hill_college") == 12


# --------------------------------------------------------------------------- layout


def test_layout_keeps_given_positions(flagship: TownMap, flagship_town: Town) -> None:
    layout = flagship.layout()
    assert set(layout) == {p.id for p in flagship_town.places}
    for place in flagship_town.places:
        assert tuple(layout[place.id]) == tuple(place.position)


def test_layout_without_positions_is_stable() -> None:
    town = make_town(SMALL_PLACES, SMALL_PATHS)
    first = TownMap(town).layout()
    again = TownMap(town).layout()
    assert first == TownMap(town).layout() == again
    m = TownMap(town)
    assert m.layout() == m.layout() == first
    assert set(first) == set(SMALL_PLACES)
    for x, y in first.values():
        assert isinstance(x, float) and isinstance(y, float)
        assert math.isfinite(x) and math.isfinite(y)
    assert len(set(first.values())) == len(SMALL_PLACES)  # places do not sit on top of each other


def test_layout_mixed_positions_keeps_given_ones() -> None:
    town = make_town(["a", "b", "c"], [("a", "b", 3), ("b", "c", 3)], positions={"a": (10, 10), "c": (90, 90)})
    m = TownMap(town)
    layout = m.layout()
    assert set(layout) == {"a", "b", "c"}
    assert layout["a"] == (10.0, 10.0)
    assert layout["c"] == (90.0, 90.0)
    assert all(math.isfinite(v) for v in layout["b"])
    assert m.layout() == layout


# --------------------------------------------------------------------------- Mesa space


def _expected_neighbours(town: Town) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {p.id: set() for p in town.places}
    for path in town.paths:
        a, b = path.between
        out[a].add(b)
        out[b].add(a)
    return out


@pytest.mark.parametrize("which", ["small", "flagship"])
def test_space_one_cell_per_place_with_path_neighbours(which: str, flagship_town: Town) -> None:
    from mesa.discrete_space import Network

    town = make_town(SMALL_PLACES, SMALL_PATHS) if which == "small" else flagship_town
    space = TownMap(town).space(random.Random(0))
    assert isinstance(space, Network)
    cells = list(space.all_cells)
    assert len(cells) == len(town.places)
    assert {c.coordinate for c in cells} == {p.id for p in town.places}
    expected = _expected_neighbours(town)
    for cell in cells:
        assert {n.coordinate for n in cell.neighborhood} == expected[cell.coordinate]
