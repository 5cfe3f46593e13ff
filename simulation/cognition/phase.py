"""Phase: one faculty of the tick (perceive, rate importance, decide, converse, recap, reflect …).

The model runs a list of phases in order each tick (``simulation/cognition/phases.py`` has the
default list). A phase says which people it is due for (``select``, by default everyone for
whom ``due`` holds, in id order), runs all of them together (``run``, one coroutine per person:
their LLM questions and memory retrievals go out as one batch, simulation/llm/batching.py), and may
then act on what they decided together (``finish``, e.g. open the conversations people chose to
start). A phase reaches the world only through ``Mind``, and keeps whatever it needs between
``select`` and ``finish`` on itself; what later phases of the same tick need goes in
``mind.notes``, declared (``reads``, ``writes``): a list of phases in a wrong order is bad input
when the scenario is loaded, and a phase that touches a note it did not declare fails at once.
What it keeps from tick to tick it saves and takes back itself (``state``, ``restore``). See
docs/cognition.md, "Writing a phase".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind


class Phase(ABC):
    name: ClassVar[str]
    """Names the phase in the scenario's ``cognition.phases`` list and in a stuck-phase error."""
    reads: ClassVar[frozenset[str]] = frozenset()
    """The tick's notes (``cognition.mind.NOTES``) this phase needs an earlier phase to have written:
    a list where no earlier phase writes one is refused when the scenario is loaded."""
    reads_if_any: ClassVar[frozenset[str]] = frozenset()
    """Notes this phase reads when an earlier phase wrote them, and takes as empty when no phase
    does (reflection counts people who talked, and a town without conversations has none); a
    list where only a later phase writes one is refused all the same."""
    writes: ClassVar[frozenset[str]] = frozenset()
    """The notes this phase writes for later phases (``mind.notes.<name> = ...``)."""

    def select(self, mind: Mind) -> list[AgentState]:
        """The people this phase runs for this tick, in the order their requests are batched."""
        return [me for me in mind.people() if self.due(me, mind)]

    def due(self, me: AgentState, mind: Mind) -> bool:
        return True

    @abstractmethod
    async def run(self, me: AgentState, mind: Mind) -> None:
        """What one person does in this phase (awaiting the LLM and memory as it goes)."""

    def finish(self, mind: Mind) -> None:
        """After everyone's ``run``: act on what they decided together."""

    def state(self) -> Any:
        """What this phase keeps from one tick to the next, JSON-able (None: nothing). The checkpoint
        stores it under the phase's name after every tick and hands it to ``restore`` on resume, so
        a phase that remembers across ticks resumes exactly without the checkpoint knowing how."""
        return None

    def restore(self, state: Any) -> None:
        """Take back what ``state`` returned after the last committed tick (a resumed run)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
