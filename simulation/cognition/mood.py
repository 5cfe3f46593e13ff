"""Moods: how each person feels, moved by what happens to them (``cognition.moods``).

Why (issue 37; SimsChat's emotions): a person who has just heard that the ferry is cancelled, or
been snubbed, should sound and choose like it, and a designer should see the town's mood move
with its news. A mood is one label of a fixed set, each a point of Russell's circumplex
(``MOODS``: valence from unpleasant to pleasant, arousal from sleepy to keyed up), plus the
person's valence and arousal.

It is **scored, not written**: at most once a game hour, a named person to whom something new
happened (a line heard, a happening seen, a whispered thought, a conversation recapped: not their
own doings, nor the people they merely saw) is asked "How does she feel now?" over the labels,
shown what happened and how she felt before. The model's probabilities over the labels,
calibrated against the same question with the situation blanked (so the model's liking for
"happy" is not the person's), give the valence and arousal as expected values and the label as
the most probable. Nothing is drawn (only a backend that cannot score options samples one, as for
every scored question), so the same run gives the same moods. A question the model cannot answer
leaves the mood as it was.

The mood shows in the situation of every prompt that shows where the person is ("Isabella feels
excited."), and is stored per tick with the person (``agent_states.mood``, ``valence``,
``arousal``) and in their saved state.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.calibrate import BLANK, SYSTEM, calibrated
from simulation.cognition.context import situation
from simulation.cognition.phase import Phase
from simulation.core import Purpose, Source, Status

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

__all__ = ["FELT", "MOODS", "Moods"]

MOODS: dict[str, tuple[float, float]] = {
    "happy": (0.8, 0.4),
    "excited": (0.6, 0.9),
    "content": (0.6, -0.4),
    "calm": (0.2, -0.7),
    "bored": (-0.4, -0.6),
    "sad": (-0.7, -0.4),
    "anxious": (-0.5, 0.7),
    "angry": (-0.7, 0.8),
}
"""Each label's (valence, arousal), in the order the question lists them."""

FELT = (Source.HEARD, Source.PERCEIVED, Source.WHISPERED, Source.RECAPPED)
"""The memories that are something happening *to* a person (not what they did, said or planned). Of
what was perceived, only a happening (a place event, a prop's change: ``event_id`` set) counts:
"Bob is serving coffee" is seen nearly every tick and would ask everyone every hour."""

SHOWN = 6
"""What happened: the newest this many such memories since the mood was last asked."""


class Moods(Phase):
    name = "mood"

    def select(self, mind: Mind) -> list[AgentState]:
        if not mind.settings.moods:
            return []
        return [me for me in mind.people() if self._due(me, mind)]

    def _due(self, me: AgentState, mind: Mind) -> bool:
        if me.crowd or me.status == Status.SLEEPING:
            return False
        if me.mood_at is not None and (mind.now - me.mood_at).total_seconds() < 3600:
            return False
        return bool(self._new(me, mind))

    def _new(self, me: AgentState, mind: Mind) -> list:
        new = []
        for n in reversed(mind.memories(me.id).nodes):  # ids only grow: read back to the last one asked after
            if n.id <= me.mood_seen:
                break
            p = n.provenance
            if p is not None and p.source in FELT and (p.source != Source.PERCEIVED or p.event_id is not None):
                new.append(n)
        return new[::-1]

    async def run(self, me: AgentState, mind: Mind) -> None:
        new = self._new(me, mind)
        labels = list(MOODS)
        ctx = situation(me, mind) | {"mood": ""}  # how she felt is said as "before"
        msgs = prompts.messages(me.system_prompt, "mood.j2", **ctx, before=me.mood,
                                happened=[n.text for n in new[-SHOWN:]], options=labels)
        numbers = [str(i) for i in range(1, len(labels) + 1)]
        rate = mind.ask_rating(me, msgs, numbers, [float(i) for i in range(1, len(labels) + 1)], default=0.0,
                               purpose=Purpose.MOOD)
        if mind.settings.calibrate:  # asked beside the question, so the phase is one batch
            # The labels stay in the content-free question (Zhao et al. keep the answer options): what
            # it measures is the model's liking for each mood word with nothing happening.
            free = prompts.messages(SYSTEM, "mood.j2", content_free=True, first=BLANK, options=labels)
            rating, baseline = await asyncio.gather(rate, mind.baseline(me, free, numbers))
        else:
            rating, baseline = await rate, None
        me.mood_seen, me.mood_at = max(n.id for n in new), mind.now
        if not rating.probabilities:
            return
        p = calibrated(rating.probabilities, baseline if not rating.sampled else None)
        me.mood = labels[max(range(len(p)), key=lambda i: (p[i], -i))]
        me.valence = round(sum(pi * MOODS[label][0] for pi, label in zip(p, labels, strict=True)), 4)
        me.arousal = round(sum(pi * MOODS[label][1] for pi, label in zip(p, labels, strict=True)), 4)
