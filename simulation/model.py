"""TownModel: the Mesa model that steps the town, one tick of game time at a time.

A tick runs the phases of docs/design.md in order: scheduled events, routine (wake/bed,
no LLM), perceive (no LLM), importance (the deciding agents' unrated memories), decide
(daily plan / reaction / the hour's steps), converse (one utterance per open conversation),
recap (both sides of every conversation that ended), reflect (agents past their importance
threshold), act (movement and the queued steps, no LLM), commit (everything the tick
produced, one transaction). Each LLM phase is one batch across agents (sequential steps of
one agent, such as plan then steps, make successive batches). Activation is simultaneous:
every agent decides on the state observed at the start of the tick, then all act.
See docs/cognition.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import mesa

from simulation.agent import ACTING, IDLE, SLEEPING, TALKING, WAKING, Action, Focus, PersonaAgent
from simulation.batching import BatchLoop
from simulation.checkpoint import capture, restore
from simulation.cognition import prompts
from simulation.cognition.converse import recap, utter
from simulation.cognition.importance import rate_unrated, rating_due
from simulation.cognition.perceive import perceive
from simulation.cognition.plan import daily_plan, plan_steps
from simulation.cognition.probe import answer_probe
from simulation.cognition.react import REACT, TALK, react
from simulation.cognition.reflect import reflect
from simulation.cognition.schemas import PlanItem
from simulation.conversation import Conversation
from simulation.llm.backend import Backend
from simulation.llm.client import ClientStats, LLMClient
from simulation.llm.types import CallRecord, RawCompletion
from simulation.memory import TownMemory
from simulation.memory.embeddings import get_embedder
from simulation.relationships import SocialGraph
from simulation.scenario import LoadedScenario, resolve_path
from simulation.store import RunStore, dumps, sim_iso
from simulation.town import TownMap


@dataclass
class ActivePlaceEvent:
    id: int
    place: str
    text: str
    until: datetime


class TownModel(mesa.Model):
    def __init__(
        self,
        loaded: LoadedScenario,
        backend: Backend,
        store: RunStore,
        *,
        seed: int | None = None,
        on_llm: Callable[[RawCompletion], None] | None = None,
        resume_state: str | None = None,
    ):
        """A new run's model, or with ``resume_state`` (``checkpoint.capture``'s JSON) the model of a
        run continued after its last committed tick: memories and the index then come from run.db."""
        sc = loaded.scenario
        self.seed_value = sc.seed if seed is None else seed
        super().__init__(seed=self.seed_value)
        self.loaded = loaded
        self.scenario = sc
        self.clock = sc.clock
        self.town = TownMap(sc.town)
        self.space = self.town.space(self.random)
        self.place_ids = tuple(self.town.places)
        self.hub = self.town.hub()
        self.store = store
        self.buffer = store.buffer()
        self.tick = 0
        self.now = self.clock.start
        self.llm = LLMClient(
            backend, run_seed=self.seed_value, temperature=sc.llm.temperature,
            max_tokens=sc.llm.max_tokens, on_call=self._log_call, on_progress=on_llm,
        )
        folder = sc.memory.embedding_model
        embedder = get_embedder(str(resolve_path(folder, Path(loaded.path).parent)) if folder else None)
        if resume_state is None:
            self.memory = TownMemory(sc.memory, epoch=self.clock.start, embedder=embedder, buffer=self.buffer)
        else:
            self.memory = TownMemory.from_db(store.db, store.run_id, sc.memory, self.clock.start, embedder)
            self.memory.buffer = self.buffer
        self.memory.set_time(0, self.now)
        self.social = SocialGraph([rp.persona.id for rp in loaded.people])
        self.people: dict[str, PersonaAgent] = {}
        for rp in loaded.people:
            agent = PersonaAgent(self, rp.persona, rp.home, rp.start_place, rp.workplace)
            agent.system_prompt = prompts.render(
                "system.j2", p=rp.persona, home=f"{self.town.name(rp.home)} ({rp.home})",
                places=[(pid, f"{place.name} ({place.kind})") for pid, place in self.town.places.items()],
            )
            self.people[agent.agent_id] = agent
        self.order = [self.people[k] for k in sorted(self.people)]
        # Our own event loop, not asyncio.run(): asyncio.run's SIGINT handler would let a
        # running batch finish before Ctrl-C is seen; here it interrupts between tokens. A
        # BatchLoop sends each phase's requests as one batch and turns a stuck phase into an error.
        self.loop = BatchLoop()
        self.conversations: dict[int, Conversation] = {}
        self.ended: list[Conversation] = []
        """Conversations ended this tick, waiting for both sides' recaps."""
        self.place_events: list[ActivePlaceEvent] = []
        self.scheduled = sorted(
            ((self.clock.tick_at(ev.at), i, ev) for i, ev in enumerate(sc.events)), key=lambda t: (t[0], t[1])
        )
        if resume_state is not None:
            restore(self, resume_state)
            return
        for agent in self.order:
            for text in agent.persona.memories:
                agent.remember("seed", text)
            for other_id, view in sorted(agent.persona.relationships.items()):
                self.social.seed(agent.agent_id, other_id, view)
            if agent.awake_at(self.now):
                agent.status = WAKING  # up already: plans its day on the first tick
            state = "asleep" if agent.status == SLEEPING else "up"
            self.log_event(agent, "start", f"{agent.persona.name} starts the run at "
                           f"{self.town.name(agent.place)}", {"state": state})

    # ------------------------------------------------------------------ recording

    def log_event(self, agent: PersonaAgent | None, kind: str, text: str, data: dict[str, Any] | None = None,
                  place: str | None = None) -> int | None:
        return self.buffer.add("events", {
            "tick": self.tick, "sim_time": sim_iso(self.now), "agent_id": agent.agent_id if agent else None,
            "place": place or (agent.place if agent else None), "kind": kind, "text": text,
            "data": dumps(data) if data else None,
        })

    def log_plan(self, agent: PersonaAgent, items: list[PlanItem], ok: bool) -> None:
        self.buffer.add("plans", {
            "tick": self.tick, "sim_time": sim_iso(self.now), "agent_id": agent.agent_id,
            "day": self.now.date().isoformat(), "items": dumps([i.model_dump() for i in items]), "ok": int(ok),
        })

    def log_schedule(self, agent: PersonaAgent, level: str, parent: str, items: list[dict[str, Any]],
                     ok: bool) -> None:
        self.buffer.add("schedules", {
            "tick": self.tick, "sim_time": sim_iso(self.now), "agent_id": agent.agent_id, "level": level,
            "parent": parent, "items": dumps(items), "ok": int(ok),
        })

    def _log_call(self, rec: CallRecord) -> int | None:
        req, out = rec.request, rec.completion
        return self.buffer.add("llm_calls", {
            "tick": req.tick, "sim_time": sim_iso(self.now), "agent_id": req.agent_id, "purpose": req.purpose,
            "backend": rec.backend, "model": rec.model, "attempt": rec.attempt, "seed": req.seed,
            "temperature": req.temperature, "max_tokens": req.max_tokens, "messages": dumps(req.messages),
            "json_schema": dumps(req.json_schema) if req.json_schema else None, "completion": out.text,
            "finish_reason": out.finish_reason, "parse_ok": int(rec.parse_ok),
            "parse_error": rec.parse_error or out.error, "fallback": int(rec.fallback),
            "cache_hit": int(rec.cache_hit), "prompt_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens, "latency_s": round(out.latency_s, 4),
        })

    # ------------------------------------------------------------------ the tick

    def step(self) -> None:
        started = time.perf_counter()
        before = dataclasses.replace(self.llm.stats)
        self.now = self.clock.time_at(self.tick)
        self.memory.set_time(self.tick, self.now)
        self._deliver_scheduled()
        self._routine()
        self._perceive()
        deciding = self._think()
        self._act()
        self._record_states()
        self._commit(started, before, deciding)
        self.tick += 1

    def _deliver_inbox(self) -> None:
        """Whispers typed into the viewer since the last tick become thoughts now."""
        rows = self.store.db.execute(
            "select id, agent_id, text from inbox where delivered_tick is null order by id").fetchall()
        for inbox_id, agent_id, text in rows:
            agent = self.people.get(agent_id)
            if agent is not None and text:
                agent.remember("thought", text)
                self.log_event(agent, "whisper", text, {"inbox_id": inbox_id})
            self.buffer.upsert("inbox", {"id": inbox_id, "delivered_tick": self.tick,
                                         "delivered_at": sim_iso(self.now)})

    def _deliver_scheduled(self) -> None:
        self._deliver_inbox()
        self.place_events = [e for e in self.place_events if e.until > self.now]
        while self.scheduled and self.scheduled[0][0] <= self.tick:
            _, _, ev = self.scheduled.pop(0)
            if ev.kind == "whisper":
                agent = self.people[ev.to]  # type: ignore[index]
                agent.remember("thought", ev.text)
                self.log_event(agent, "whisper", ev.text)
            else:
                event_id = self.log_event(None, "place_event", ev.text, {"minutes": ev.duration_minutes}, place=ev.place)
                self.place_events.append(ActivePlaceEvent(
                    event_id or 0, ev.place or "", ev.text, ev.at + timedelta(minutes=ev.duration_minutes)))

    def _routine(self) -> None:
        for agent in self.order:
            awake = agent.awake_at(self.now)
            if agent.status == SLEEPING and awake:
                agent.status = WAKING
                self.log_event(agent, "wake", f"{agent.persona.name} wakes up at {self.town.name(agent.place)}")
            elif agent.status != SLEEPING and not awake and not (agent.action and agent.action.bedtime):
                if agent.conversation:
                    self._end_conversation(agent.conversation, "bedtime")
                agent.steps.clear()
                agent.replan = None
                agent.start_action(Action("going to bed", agent.home, 0, bedtime=True))

    def _perceive(self) -> None:
        by_place: dict[str, list[PersonaAgent]] = {}
        for agent in self.order:
            by_place.setdefault(agent.place, []).append(agent)
        for agent in self.order:
            events = [e for e in self.place_events if e.place == agent.place]
            agent.perceived = perceive(agent, by_place[agent.place], events, self.tick)

    def _can_talk(self, agent: PersonaAgent, other: PersonaAgent) -> bool:
        cooldown = timedelta(minutes=self.scenario.cognition.conversation_cooldown_minutes)
        last = agent.last_talk.get(other.agent_id)
        return other.free and other.place == agent.place and (last is None or self.now - last >= cooldown)

    def _focus(self, agent: PersonaAgent) -> Focus | None:
        """What a free agent reacts to this tick: a new place event, someone free to talk."""
        if not agent.free:
            return None
        event = agent.perceived.events[0] if agent.perceived.events else None
        other = next((self.people[o] for o in agent.perceived.people if self._can_talk(agent, self.people[o])), None)
        return Focus(event, other) if event or other else None

    def _needs_thought(self, agent: PersonaAgent) -> bool:
        """Waking, out of steps for the hour, or noticing something: everyone else costs no call."""
        agent.focus = self._focus(agent)
        if agent.status == WAKING or agent.focus is not None:
            return True
        return agent.status == IDLE and not agent.has_steps(self.now)

    async def _decide(self, agent: PersonaAgent, intents: dict[str, tuple[str, str, int | None]]) -> None:
        if agent.status == WAKING:
            await daily_plan(agent)
            agent.status = IDLE
        if agent.focus is not None:
            reaction = await react(agent, agent.focus)
            if reaction.decision == TALK and agent.focus.other is not None:
                intents[agent.agent_id] = (agent.focus.other.agent_id, reaction.detail, reaction.call_id)
                return  # the hour's steps can wait until after the conversation
            if reaction.decision == REACT:
                self.log_event(agent, "reaction", f"{agent.persona.name}: {reaction.detail}",
                               {"event_id": agent.focus.event.id if agent.focus.event else None,
                                "other": agent.focus.other.agent_id if agent.focus.other else None})
                agent.interrupt(reaction.detail)
        if agent.status == IDLE and not agent.has_steps(self.now):
            await plan_steps(agent)

    def _think(self) -> int:
        """The LLM phases, each run for all its agents together (simulation/batching.py: one batch
        per round of requests); returns how many agents and conversations asked the LLM anything.
        A phase that cannot make progress raises ``PhaseStuck`` (a RunError) before the commit."""
        run = self.loop.run_phase
        intents: dict[str, tuple[str, str, int | None]] = {}
        deciding = [a for a in self.order if self._needs_thought(a)]
        run("importance", [(a.agent_id, rate_unrated(a)) for a in deciding if rating_due(a, self.now)])
        run("decide", [(a.agent_id, self._decide(a, intents)) for a in deciding])
        self._open_conversations(intents)
        talking = sorted((c for c in self.conversations.values() if c.open), key=lambda c: c.id)
        run("converse", [(c.next_speaker, self._advance(c)) for c in talking])
        ended, self.ended = self.ended, []
        run("recap", [(a, recap(self.people[a], c)) for c in ended for a in c.participants])
        thinking = {a.agent_id for a in deciding} | {a for c in talking for a in c.participants}
        threshold = self.scenario.memory.reflection_threshold
        run("reflect", [(a.agent_id, reflect(a)) for a in self.order
                        if a.agent_id in thinking and a.memory.since_reflection >= threshold])
        return len(deciding) + len(talking)

    # ------------------------------------------------------------------ conversations

    def _open_conversations(self, intents: dict[str, tuple[str, str, int | None]]) -> None:
        for initiator_id in sorted(intents):
            target_id, greeting, call_id = intents[initiator_id]
            a, b = self.people[initiator_id], self.people[target_id]
            if not (a.free and b.free and a.place == b.place):
                continue
            conv = Conversation(
                id=self.store.next_id("conversations"), place=a.place, participants=(a.agent_id, b.agent_id),
                started_tick=self.tick, started_at=self.now, next_speaker=b.agent_id,
            )
            self.conversations[conv.id] = conv
            for agent in (a, b):
                agent.resume_status = ACTING if agent.status == ACTING else IDLE
                agent.status = TALKING
                agent.conversation = conv
                agent.last_talk[agent.conversation.partner(agent.agent_id)] = self.now
            self.log_event(a, "conversation_start", f"{a.persona.name} starts talking with {b.persona.name}",
                           {"conversation_id": conv.id, "with": b.agent_id})
            self._add_utterance(conv, a, greeting, call_id)

    def _add_utterance(self, conv: Conversation, speaker: PersonaAgent, text: str, call_id: int | None) -> None:
        listener = self.people[conv.partner(speaker.agent_id)]
        conv.lines.append((speaker.agent_id, text))
        self.buffer.add("utterances", {
            "conversation_id": conv.id, "tick": self.tick, "sim_time": sim_iso(self.now), "turn": conv.turns - 1,
            "speaker_id": speaker.agent_id, "listener_id": listener.agent_id, "text": text, "llm_call_id": call_id,
        })
        self.log_event(speaker, "utterance", f'{speaker.persona.name} to {listener.persona.name}: "{text}"',
                       {"conversation_id": conv.id})
        for agent in (speaker, listener):
            node = agent.remember("utterance", f'{speaker.persona.name} said to {listener.persona.name}: "{text}"')
            conv.memory_ids.setdefault(agent.agent_id, []).append(node.id)
        self._save_conversation(conv)

    async def _advance(self, conv: Conversation) -> None:
        speaker = self.people[conv.next_speaker]
        answer, call_id = await utter(speaker, conv)
        self._add_utterance(conv, speaker, answer.say, call_id)
        if answer.end_conversation:
            self._end_conversation(conv, "goodbye")
        elif conv.turns >= self.scenario.cognition.max_conversation_turns:
            self._end_conversation(conv, "turn limit")
        else:
            conv.next_speaker = conv.partner(speaker.agent_id)

    def _end_conversation(self, conv: Conversation, reason: str) -> None:
        """Close it now; both sides' recaps (summary memory, relationship) follow in this tick's recap phase."""
        conv.ended_reason = reason
        conv.ended_tick, conv.ended_at = self.tick, self.now
        names = {a: self.people[a].persona.name for a in conv.participants}
        self.ended.append(conv)
        for agent_id in conv.participants:
            agent = self.people[agent_id]
            agent.conversation = None
            if agent.status == TALKING:
                agent.status = agent.resume_status
        first = self.people[conv.participants[0]]
        self.log_event(first, "conversation_end", f"{' and '.join(names.values())} stop talking ({reason})",
                       {"conversation_id": conv.id, "turns": conv.turns})
        self._save_conversation(conv)
        del self.conversations[conv.id]

    def _save_conversation(self, conv: Conversation) -> None:
        """Queue the conversation's row (the buffer keeps only the last version per tick)."""
        self.buffer.upsert("conversations", {
            "id": conv.id, "place": conv.place, "participants": dumps(list(conv.participants)),
            "started_tick": conv.started_tick, "started_at": sim_iso(conv.started_at),
            "ended_tick": conv.ended_tick, "ended_at": sim_iso(conv.ended_at) if conv.ended_at else None,
            "turns": conv.turns, "end_reason": conv.ended_reason,
        })

    # ------------------------------------------------------------------ act & commit

    def _act(self) -> None:
        minutes = float(self.clock.tick_minutes)
        for agent in self.order:
            if agent.status == IDLE:
                step = agent.next_step(self.now)
                if step is not None:
                    agent.start_action(step)
            agent.advance(minutes)

    def _record_states(self) -> None:
        for agent in self.order:
            self.buffer.add("agent_states", {
                "tick": self.tick, "sim_time": sim_iso(self.now), "agent_id": agent.agent_id, "place": agent.place,
                "status": agent.status, "action": agent.doing(),
                "destination": agent.action.place if agent.action else None,
                "conversation_id": agent.conversation.id if agent.conversation else None,
            })

    def _commit(self, started: float, before: ClientStats, deciding: int) -> None:
        s = self.llm.stats
        self.buffer.add("ticks", {
            "tick": self.tick, "sim_time": sim_iso(self.now), "wall_s": round(time.perf_counter() - started, 4),
            "llm_calls": s.calls - before.calls, "llm_s": round(s.llm_seconds - before.llm_seconds, 4),
            "prompt_tokens": s.prompt_tokens - before.prompt_tokens,
            "completion_tokens": s.completion_tokens - before.completion_tokens,
            "parse_failures": s.parse_failures - before.parse_failures, "fallbacks": s.fallbacks - before.fallbacks,
            "cache_hits": s.cache_hits - before.cache_hits,
            "batches": s.batches - before.batches, "deciding_agents": deciding,
        })
        self._flush_memory()
        self.store.commit(self.buffer, {"ticks_done": self.tick + 1}, state=(self.tick, capture(self)))

    def _flush_memory(self) -> None:
        """Vectors of the tick's new memories, changed importance / last access, changed relationships."""
        self.memory.flush_rows()
        for row in self.social.changed_rows():
            self.buffer.add("relationships", {"tick": self.tick, "sim_time": sim_iso(self.now), **row})

    # ------------------------------------------------------------------ end of run

    def ask_probes(self) -> None:
        """Ask every probe question of its agents (one batch), at the time the run ended."""
        self.now = self.clock.time_at(self.tick)
        self.memory.set_time(self.tick, self.now)
        jobs = []
        for index, probe in enumerate(self.scenario.probes):
            ids = sorted(self.people) if probe.agents == "all" else probe.agents
            jobs += [(self.people[a], probe.question, index) for a in ids]

        answers = self.loop.run_phase("probe", [(a.agent_id, answer_probe(a, q, i)) for a, q, i in jobs])
        for (agent, question, _), (answer, ok, call_id) in zip(jobs, answers, strict=True):
            self.buffer.add("probes", {
                "tick": self.tick, "sim_time": sim_iso(self.now), "agent_id": agent.agent_id,
                "question": question, "answer": answer, "ok": int(ok), "llm_call_id": call_id,
            })
        self._flush_memory()
        self.store.commit(self.buffer)
