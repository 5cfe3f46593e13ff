"""The town: places and objects on a networkx graph whose edges are walking paths (minutes),
and the Mesa discrete space built over the same graph so agents occupy place cells."""

from __future__ import annotations

import random
from functools import cached_property

import networkx as nx
from mesa.discrete_space import Network

from simulation.scenario import Place, Town


class TownMap:
    def __init__(self, town: Town):
        self.places: dict[str, Place] = {p.id: p for p in town.places}
        self.graph = nx.Graph()
        for place in town.places:
            self.graph.add_node(place.id, name=place.name, kind=place.kind)
        for path in town.paths:
            self.graph.add_edge(*path.between, minutes=path.minutes)

    @cached_property
    def _routes(self) -> dict[str, dict[str, list[str]]]:
        # All pairs once: towns are small and every agent walks many times a day.
        return {src: paths for src, paths in nx.all_pairs_dijkstra_path(self.graph, weight="minutes")}

    def route(self, start: str, goal: str) -> list[str]:
        """Places passed through walking from ``start`` to ``goal`` (both included), fastest way."""
        return list(self._routes[start][goal])

    def leg_minutes(self, a: str, b: str) -> int:
        return int(self.graph.edges[a, b]["minutes"])

    def walking_minutes(self, start: str, goal: str) -> int:
        path = self.route(start, goal)
        return sum(self.leg_minutes(a, b) for a, b in zip(path, path[1:]))

    def name(self, place_id: str) -> str:
        return self.places[place_id].name

    def hub(self) -> str:
        """The best-connected public place (where people run into each other); ties by id."""
        public = [p for p in self.places.values() if p.kind != "home"] or list(self.places.values())
        return min(public, key=lambda p: (-self.graph.degree(p.id), p.id)).id

    def layout(self) -> dict[str, tuple[float, float]]:
        """Map positions: the scenario's where given, a seeded spring layout for the rest."""
        fixed = {pid: p.position for pid, p in self.places.items() if p.position is not None}
        if len(fixed) == len(self.places):
            return fixed  # type: ignore[return-value]
        pos = nx.spring_layout(
            self.graph, pos=fixed or None, fixed=list(fixed) or None, seed=0, weight=None
        )
        scale = 100.0 if not fixed else 1.0
        return {pid: (float(x) * scale, float(y) * scale) for pid, (x, y) in pos.items()}

    def space(self, rng: random.Random) -> Network:
        """A Mesa Network space whose cells are the town's places."""
        return Network(self.graph, random=rng)
