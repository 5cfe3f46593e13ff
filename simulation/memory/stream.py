"""The memory stream of one agent: an append-only list of timestamped nodes.

A node is what the agent observed, heard, said, planned, was told or concluded. Scoring
and retrieval live in ``simulation.memory.town`` (one FAISS index for the whole town);
this module holds the nodes and the cheap list queries that need no vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from simulation.core import MemoryKind
from simulation.core.provenance import Provenance

UNRATED_IMPORTANCE = 3.0
"""What retrieval assumes for a node whose importance has not been rated yet."""
NOT_COUNTED = (MemoryKind.REFLECTION, MemoryKind.SUMMARY)
"""Kinds whose importance does not count towards the next reflection (its own products)."""


@dataclass(eq=False)
class MemoryNode:
    id: int
    agent_id: str
    kind: str
    """A ``MemoryKind`` (run.db stores its value; a node read back has the plain string)."""
    text: str
    tick: int
    created: datetime
    last_accessed: datetime
    importance: float | None = None
    """1-10; None until the LLM has rated it (trivial events are created with 1)."""
    evidence: tuple[int, ...] = ()
    """For reflections: the ids of the nodes the insight rests on."""
    depth: int = 0
    """0 for what happened; a reflection is one deeper than its deepest evidence."""
    row: int = -1
    """Row in the town's vector index once embedded (-1 before)."""
    provenance: Provenance | None = None
    """Where it came from (None only for rows recorded before run.db schema 4)."""

    @property
    def time(self) -> datetime:
        return self.created

    @property
    def rated_importance(self) -> float:
        return UNRATED_IMPORTANCE if self.importance is None else self.importance


@dataclass
class StreamState:
    """A stream's reflection counters between ticks (what the checkpoint stores for it)."""

    since_reflection: float
    reflected_upto: int


@dataclass
class MemoryStream:
    """One agent's nodes, and the counter that says when it reflects next. The stream is the
    counter's only writer: adding or rating a node counts it, ``reflected`` restarts it, and
    ``state`` / ``restore`` carry it across a resume."""

    nodes: list[MemoryNode] = field(default_factory=list)
    since_reflection: float = 0.0
    """Summed importance of rated nodes (reflections excluded) since the last reflection."""
    reflected_upto: int = 0
    """Id of the newest node when the agent last reflected: older nodes rated later do not count
    towards the next reflection (their ratings can wait a while, see cognition.importance)."""
    unrated: list[MemoryNode] = field(default_factory=list)
    """Nodes waiting for an importance rating (utterances wait for their conversation's recap)."""

    def add(self, node: MemoryNode) -> MemoryNode:
        """Append ``node``; a node created rated counts towards the next reflection."""
        self.nodes.append(node)
        if node.importance is None and node.kind != MemoryKind.UTTERANCE:
            self.unrated.append(node)
        if node.importance is not None and node.kind not in NOT_COUNTED:
            self.since_reflection += node.importance
        return node

    def rate(self, node: MemoryNode, importance: float) -> None:
        """Give ``node`` its importance; a first rating of a node newer than the last reflection counts."""
        if node.importance is None and node.kind not in NOT_COUNTED and node.id > self.reflected_upto:
            self.since_reflection += importance
        node.importance = importance
        if node in self.unrated:
            self.unrated.remove(node)

    def reflected(self) -> None:
        """The agent reflected now: the counter restarts from the newest node."""
        self.since_reflection = 0.0
        self.reflected_upto = self.nodes[-1].id if self.nodes else 0

    def recount(self) -> None:
        """The counter as the nodes say it must be (a stream rebuilt from run.db): the importance
        of the counted nodes after the newest reflection."""
        last = max((i for i, n in enumerate(self.nodes) if n.kind == MemoryKind.REFLECTION), default=-1)
        self.reflected_upto = self.nodes[last].id if last >= 0 else 0
        self.since_reflection = sum(n.importance for n in self.nodes[last + 1:]
                                    if n.importance is not None and n.kind not in NOT_COUNTED)

    def state(self) -> StreamState:
        return StreamState(self.since_reflection, self.reflected_upto)

    def restore(self, state: StreamState) -> None:
        self.since_reflection, self.reflected_upto = state.since_reflection, state.reflected_upto

    def recent(self, n: int, kinds: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> list[MemoryNode]:
        """The ``n`` newest nodes (oldest first), optionally of some kinds only."""
        out: list[MemoryNode] = []
        for node in reversed(self.nodes):
            if (kinds is None or node.kind in kinds) and node.kind not in exclude:
                out.append(node)
                if len(out) == n:
                    break
        return out[::-1]


class MemoryView:
    """One person's stream as a phase sees it: the nodes, the counter and the recent-node query,
    none of them writable. Phases add, rate and restart the counter through ``Mind`` (``remember``,
    ``rate``, ``reflected``), so the stream stays the counter's only writer and a phase cannot
    reorder or drop a node behind the index's back."""

    __slots__ = ("_stream",)

    def __init__(self, stream: MemoryStream):
        self._stream = stream

    @property
    def nodes(self) -> tuple[MemoryNode, ...]:
        """Every node, oldest first (a snapshot)."""
        return tuple(self._stream.nodes)

    @property
    def unrated(self) -> tuple[MemoryNode, ...]:
        """Nodes waiting for an importance rating, oldest first (a snapshot)."""
        return tuple(self._stream.unrated)

    @property
    def since_reflection(self) -> float:
        """Summed importance counted towards the next reflection."""
        return self._stream.since_reflection

    def recent(self, n: int, kinds: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> list[MemoryNode]:
        """The ``n`` newest nodes (oldest first), optionally of some kinds only."""
        return self._stream.recent(n, kinds, exclude)
