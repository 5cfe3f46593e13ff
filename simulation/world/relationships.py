"""The town's social graph: who knows whom, how often they talked, and how each feels about the other.

A directed networkx graph: the edge a -> b is a's side of the relationship (a's view of b
in words, a's sentiment from -1 to 1, and the conversations they have had). Edges start
from the personas' ``relationships``; after every conversation each side's recap updates
its edge. Changed edges become ``relationships`` rows at the tick they changed, so the
graph (and its density) can be rebuilt for any tick from run.db alone: that reading side,
and the definition of the density itself, live in ``simulation.rundb.metrics``
(``density_by_tick`` is re-exported here for older callers).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from simulation.rundb.metrics import density_by_tick, knows_pairs, pair_density

__all__ = ["SocialGraph", "Tie", "density_by_tick"]


@dataclass(frozen=True)
class Tie:
    conversations: int
    sentiment: float
    view: str


class SocialGraph:
    def __init__(self, people: list[str]):
        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(sorted(people))
        self._changed: set[tuple[str, str]] = set()
        self.gone: set[str] = set()
        """Who left the town: still nodes (those who stay remember them), not counted by ``density``."""

    def add_person(self, agent_id: str) -> None:
        """Someone who arrived during the run (their ties are seeded as they arrive)."""
        self.graph.add_node(agent_id)

    def remove_person(self, agent_id: str) -> None:
        """Someone who left the town (a ``departure``): their ties stay, as memories do, but the
        density counts the people here, as run.db's readers (``rundb.metrics.knows_by_tick``) do."""
        self.gone.add(agent_id)

    def seed(self, agent_id: str, other_id: str, view: str) -> None:
        """A relationship known before the run (from the persona file)."""
        if other_id in self.graph and other_id != agent_id:
            self.graph.add_edge(agent_id, other_id, conversations=0, sentiment=0.0, view=view)
            self._changed.add((agent_id, other_id))

    def tie(self, agent_id: str, other_id: str) -> Tie | None:
        data = self.graph.get_edge_data(agent_id, other_id)
        return None if data is None else Tie(data["conversations"], data["sentiment"], data["view"])

    def after_conversation(self, agent_id: str, other_id: str, sentiment: float, view: str) -> Tie:
        """``agent_id``'s side after talking with ``other_id``."""
        old = self.tie(agent_id, other_id)
        tie = Tie((old.conversations if old else 0) + 1, max(-1.0, min(1.0, float(sentiment))),
                  view.strip() or (old.view if old else ""))
        self.graph.add_edge(agent_id, other_id, conversations=tie.conversations, sentiment=tie.sentiment,
                            view=tie.view)
        self._changed.add((agent_id, other_id))
        return tie

    def knows(self) -> nx.Graph:
        """Undirected: two people know each other when either has a relationship with the other."""
        g = nx.Graph()
        g.add_nodes_from(self.graph.nodes)
        g.add_edges_from(self.graph.edges)
        return g

    def density(self) -> float:
        """Who-knows-whom density now, over the people in the town, by the definition run.db's
        readers use (``rundb.metrics``)."""
        here = [n for n in self.graph.nodes if n not in self.gone]
        return pair_density(len(here), len(knows_pairs(self.graph.edges, here)))

    def state(self) -> list[tuple[str, str, int, float, str]]:
        """Every edge as (person, other, conversations, sentiment, view): what the checkpoint stores."""
        return [(a, b, d["conversations"], d["sentiment"], d["view"]) for a, b, d in self.graph.edges(data=True)]

    def restore(self, edges: list[tuple[str, str, int, float, str]]) -> None:
        """The edges ``state`` gave, put back (a graph rebuilt for the same people)."""
        for a, b, talks, sentiment, view in edges:
            self.graph.add_edge(a, b, conversations=talks, sentiment=sentiment, view=view)

    def changed_rows(self) -> list[dict[str, object]]:
        """Rows for the edges changed since the last call (then forgotten), in a stable order."""
        rows = []
        for a, b in sorted(self._changed):
            t = self.tie(a, b)
            assert t is not None
            rows.append({"agent_id": a, "other_id": b, "conversations": t.conversations,
                         "sentiment": round(t.sentiment, 4), "view": t.view})
        self._changed.clear()
        return rows
