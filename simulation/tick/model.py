"""TownModel: the Mesa model that steps the town, one tick of game time at a time.

A tick: scheduled events and whispers, the routine (wake / bed, no LLM), the cognition phases
(``cognition.phases``: by default perceive, importance, decide, converse, recap, reflect; each
one batch across the people it is due for), act (walking and the queued steps, no LLM), and
the commit (everything the tick produced, one transaction, with the engine's state for
resume). Activation is simultaneous: every person decides on the state observed at the start
of the tick, then all act. The people are Mesa agents (``model.agents``) in a network space
whose cells are the town's places. See docs/design.md and docs/cognition.md.

Scheduled events can change the town itself: someone arrives (an agent built then, with their
``agents`` row, seed memories and ties), someone leaves (out of Mesa's space and agent set,
so nobody sees or meets them and no phase runs for them; their conversation ends), a fact's
text is corrected (the tracker scores what follows against the new version). On resume, the
ones delivered before the checkpoint are made again, without their rows (``restore``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from datetime import date, datetime, timedelta
from datetime import time as clock_time

import mesa

from simulation.agents import AgentState, PersonaAgent
from simulation.cognition import Phase, TickNotes, prompts, scenario_phases
from simulation.cognition.probe import answer_probe
from simulation.core import Action, EventKind, Happening, MemoryKind, Moment, PlaceEvent, Provenance, Source, Status
from simulation.llm.batching import BatchLoop
from simulation.llm.client import ClientStats, LLMClient
from simulation.llm.types import RawCompletion
from simulation.memory import TownMemory
from simulation.memory.embeddings import Embedder, get_embedder
from simulation.provenance.conveys import ConveysDetector
from simulation.provenance.details import DetailReader, place_aliases
from simulation.provenance.facts import fact_text
from simulation.provenance.probes import score_answer
from simulation.provenance.tracker import FactTracker
from simulation.record.recorder import Recorder, person_row
from simulation.record.store import RunStore, dumps, sim_iso
from simulation.scenario import resolve_path
from simulation.tick.checkpoint import ModelState, capture, restore
from simulation.tick.town_mind import TownMind
from simulation.world.conversations import Conversations
from simulation.world.props import Props
from simulation.world.relationships import SocialGraph
from simulation.world.town_map import TownMap

if TYPE_CHECKING:
    from simulation.llm.groups import RunBackends
    from simulation.scenario import Fact, ResolvedPersona
    from simulation.scenario.timeline import ScheduledEvent
    from simulation.run.settings import RunSettings


SEED_IMPORTANCE = 5.0
"""Importance of a persona's seed memories (the middle of the 1-10 scale): part of who the person
is, identical in every run, so not rated by the LLM at the start of each run (in the 25-person
flagship that was three quarters of the first tick's questions). Seeds of a fact the person
knows (``facts[].known_by``) are news, and are rated."""


class TownModel(mesa.Model):
    def __init__(
        self,
        settings: RunSettings,
        backends: RunBackends,
        store: RunStore,
        *,
        on_llm: Callable[[RawCompletion], None] | None = None,
        resume_state: str | None = None,
        phases: Sequence[Phase] | None = None,
    ):
        """A new run's model, or with ``resume_state`` (``checkpoint.capture``'s JSON) the model of a
        run continued after its last committed tick: memories and the index then come from run.db.
        ``phases`` replaces the cognition phases (default: the scenario's ``cognition.phases``).
        Everything is built from ``settings`` (resolved once, ``simulation.run.settings``), in an
        order that never changes: the random generators are drawn from while the town is built."""
        super().__init__(seed=settings.seed)
        self.settings = settings
        self.seed_value = settings.seed
        self.loaded = settings.loaded
        self.scenario = sc = settings.loaded.scenario
        self.clock = sc.clock
        self.town = TownMap(sc.town)
        self.space = self.town.space(self.random)
        self.hub = self.town.hub()
        self.store = store
        self.buffer = store.buffer()
        self.moment = Moment(0, self.clock.start)
        self.recorder = Recorder(self.buffer, self.moment)
        # One client for everyone: each person's questions go to their model group's backend (routes).
        self.llm = LLMClient(backends.default, run_seed=self.seed_value, temperature=settings.llm.temperature,
                             max_tokens=settings.llm.max_tokens, on_call=self.recorder.llm_call, on_progress=on_llm,
                             call_timeout_s=settings.llm.call_timeout_s, groups=backends.routes(settings.llm),
                             group_of=settings.loaded.llm_groups())
        folder = sc.memory.embedding_model
        embedder = get_embedder(str(resolve_path(folder, settings.base_dir)) if folder else None)
        self.memory = self._memory(embedder, resume_state is not None)
        self.social = SocialGraph([rp.persona.id for rp in self.loaded.people])
        self._people()
        # Our own event loop, not asyncio.run(): asyncio.run's SIGINT handler would let a
        # running batch finish before Ctrl-C is seen; here it interrupts between tokens. A
        # BatchLoop sends each phase's requests as one batch and turns a stuck phase into an error.
        self.loop = BatchLoop()
        self.conversations = Conversations(self._states, self.memory, self.recorder,
                                           self.buffer, self.moment, lambda: store.next_id("conversations"))
        self.place_events: list[PlaceEvent] = []
        self.props = Props(sc.town.places)
        self.scheduled = sc.delivery_order()
        self._as_now = sc
        """The scenario with the setting and correction events delivered so far applied
        (``_change_setting``, ``_correct``): the settings cognition reads, the facts as they stand."""
        self.mind = TownMind(
            settings=settings.cognition(), moment=self.moment, llm=self.llm, memory=self.memory, town=self.town,
            hub=self.hub, social=self.social, agents=self.people, order=[a.state for a in self.order],
            conversations=self.conversations, recorder=self.recorder, place_events=lambda: self.place_events,
            happenings=self._happenings, models=settings.llm.groups,
            props=self.props,
            aware=lambda fact: self.facts.aware.get(fact, set()) if self.facts is not None else set(),
            facts=lambda: {f.id: (f.name or f.id.replace("_", " "), f.text) for f in self._as_now.facts},
        )
        self.phases: list[Phase] = (list(phases) if phases is not None
                                    else scenario_phases(sc.cognition.phases, self.loaded))
        self.facts = self._fact_tracker(embedder)
        if resume_state is not None:
            restore(self, resume_state)
            if self.facts is not None:
                self.facts.load(store.db, store.run_id)
        else:
            self._start()

    def _memory(self, embedder: Embedder, resumed: bool) -> TownMemory:
        """The town's memory: empty for a new run, rebuilt from run.db for a resumed one."""
        sc = self.scenario
        if resumed:
            memory = TownMemory.from_db(self.store.db, self.store.run_id, sc.memory, self.clock.start, embedder)
            memory.buffer = self.buffer
        else:
            memory = TownMemory(sc.memory, epoch=self.clock.start, embedder=embedder, buffer=self.buffer)
        memory.set_time(0, self.now)
        return memory

    def _person(self, rp: ResolvedPersona) -> PersonaAgent:
        """One person, as a Mesa agent at their start place, with the system prompt built from who
        they are and the town as they need it: every public place, and of the homes only their
        own (in the 25-person flagship the other 21 homes were half of every persona's tokens)."""
        own = {rp.home, rp.start_place, rp.workplace}
        places = [(pid, f"{place.name} ({place.kind})") for pid, place in self.town.places.items()
                  if place.kind != "home" or pid in own]
        return PersonaAgent(self, AgentState(
            id=rp.persona.id, persona=rp.persona, home=rp.home, workplace=rp.workplace, place=rp.start_place,
            crowd=rp.crowd,
            system_prompt=prompts.render("system.j2", p=rp.persona, home=f"{self.town.name(rp.home)} ({rp.home})",
                                         places=places),
        ))

    def _people(self) -> None:
        """The people the run starts with (those who arrive later are built then: ``_arrive``)."""
        for rp in self.loaded.people:
            self._person(rp)
        self.people: dict[str, PersonaAgent] = {a.agent_id: a for a in self.agents}
        """Everyone who has been in the town, by id (those who left too: others remember them)."""
        self.gone: set[str] = set()
        """Who left the town (``departure`` events)."""
        self.order: list[PersonaAgent] = sorted(self.agents, key=lambda a: a.agent_id)
        """The people in the town now, in id order: every phase runs in it."""
        self._states = {a.agent_id: a.state for a in self.order}
        """Everyone's state by id, as the conversations look people up."""

    def _town_changed(self) -> None:
        """After an arrival or a departure: who is in the town now, for the model and the mind."""
        self.order = sorted((a for pid, a in self.people.items() if pid not in self.gone), key=lambda a: a.agent_id)
        self.mind.set_people([a.state for a in self.order])

    def _start(self) -> None:
        """A new run's first state: everyone settled in (``_settle``) and a start event each."""
        for agent in self.order:
            s = agent.state
            state = self._settle(agent, self.scenario.facts)
            self.log_event(s, EventKind.START, f"{s.persona.name} starts the run at {self.town.name(s.place)}",
                           {"state": state})

    def _settle(self, agent: PersonaAgent, facts: Sequence[Fact]) -> str:
        """A person's first state, when the run starts or when they arrive: their seed memories,
        the ``facts`` they know from the start (``known_by``), the relationships their persona
        brings, and whether they are up; returns "up" or "asleep"."""
        s = agent.state
        for text in s.persona.memories:  # who they are: the same in every run, not worth a question each
            self.memory.add(s.id, MemoryKind.SEED, text, Provenance(Source.SEEDED), importance=SEED_IMPORTANCE)
        for fact in facts:
            if s.id in fact.known_by:
                node = self.memory.add(s.id, MemoryKind.SEED, fact.text, Provenance(Source.SEEDED, fact=fact.id))
                s.news.append(node.id)
        for other_id, view in sorted(s.persona.relationships.items()):
            self.social.seed(s.id, other_id, view)
        if s.awake_at(self.now):
            s.status = Status.WAKING  # up already: plans their day on the first tick
        return "asleep" if s.status == Status.SLEEPING else "up"

    def _fact_tracker(self, embedder: Embedder) -> FactTracker | None:
        """The tracker of the scenario's facts (None when it declares none)."""
        if not self.scenario.facts:
            return None
        facts = [fact_text(f) for f in self.scenario.facts]
        names = {pid: place.name for pid, place in self.town.places.items()}
        reader = DetailReader(place_aliases({pid: (p.name, p.kind) for pid, p in self.town.places.items()}))
        people = [rp.persona.name for rp in self.loaded.people]
        return FactTracker(facts, ConveysDetector(embedder, facts, names, people), reader, self.buffer)

    def _happenings(self, person_id: str) -> list[Happening]:
        """The facts ``person_id`` is aware of that say where and when something happens (a place,
        a date and a time detail), as happenings, and those they accepted an invitation to, by start.
        Each as the version the person holds (``FactTracker.version_held``): after a correction,
        whoever has not been told it still goes where and when they heard."""
        out = []
        tracker = self.facts
        for fact in self._as_now.facts:
            held = tracker.version_held(fact.id, person_id) if tracker is not None else None
            if held is None:
                continue
            kinds = {d.kind: d.value for d in held.details}
            if not {"place", "date", "time"} <= kinds.keys():
                continue
            day = date.fromisoformat(kinds["date"])
            times = [datetime.combine(day, clock_time.fromisoformat(t.strip())) for t in kinds["time"].split("-", 1)]
            out.append(Happening(fact.id, kinds["place"], times[0],
                                 times[-1] if len(times) > 1 else times[0] + timedelta(hours=1), fact.name))
        known = {h.fact for h in out}
        out += [h for h in self.people[person_id].state.going if h.fact not in known]
        return sorted(out, key=lambda h: (h.start, h.fact))

    # ------------------------------------------------------------------ time

    @property
    def tick(self) -> int:
        """The tick being stepped (between ticks: the next one)."""
        return self.moment.tick

    @property
    def now(self) -> datetime:
        return self.moment.now

    @now.setter
    def now(self, value: datetime) -> None:
        self.moment.now = value
        self.memory.set_time(self.moment.tick, value)

    def _set_tick(self, tick: int) -> None:
        self.moment.tick, self.moment.now = tick, self.clock.time_at(tick)
        self.memory.set_time(tick, self.moment.now)

    # ------------------------------------------------------------------ state between ticks

    def state(self) -> ModelState:
        """Everything between ticks that run.db's other tables do not hold, each part's as that part
        gives it (``simulation.tick.checkpoint`` stores it)."""
        version, internal, gauss = self.random.getstate()
        return ModelState(  # everyone who has been in the town: others still look up who left
            tick=self.tick, agents={pid: self.people[pid].state.stored() for pid in sorted(self.people)},
            streams=self.memory.stream_states(), conversations=self.conversations.state(),
            place_events=list(self.place_events), scheduled=[index for _, index, _ in self.scheduled],
            edges=self.social.state(), random_state=[version, list(internal), gauss],
            numpy_state=self.rng.bit_generator.state,
            phases={p.name: kept for p in self.phases if (kept := p.state()) is not None},
            baselines=self.mind.baselines(),
        )

    def restore(self, state: ModelState) -> None:
        """Continue after the tick ``state`` was captured at: every part takes its own state back."""
        self._set_tick(state.tick + 1)
        self.conversations.restore(state.conversations)
        self.place_events = list(state.place_events)
        pending = set(state.scheduled)
        for _, index, ev in self.scheduled:  # what changed before the checkpoint holds after it
            if index not in pending:
                self._deliver(index, ev, fresh=False)
        self.scheduled = [item for item in self.scheduled if item[1] in pending]
        self.social.restore(state.edges)
        version, internal, gauss = state.random_state
        self.random.setstate((version, tuple(internal), gauss))
        self.rng.bit_generator.state = state.numpy_state
        for agent_id, stored in state.agents.items():
            agent = self.people[agent_id]
            agent.state.restore(stored)
            if agent_id not in self.gone:  # whoever left is out of the town's space
                agent.move_to(agent.state.place)
        self.memory.restore_streams(state.streams)
        for phase in self.phases:
            if phase.name in state.phases:
                phase.restore(state.phases[phase.name])
        self.mind.restore_baselines(state.baselines)

    # ------------------------------------------------------------------ recording

    def log_event(self, who: AgentState | None, kind: EventKind, text: str, data: dict | None = None,
                  place: str | None = None) -> int | None:
        return self.recorder.event(who, kind, text, data, place)

    def doing(self, state: AgentState) -> str:
        return self.mind.doing(state)

    # ------------------------------------------------------------------ the tick

    def step(self) -> None:
        started = time.perf_counter()
        before = dataclasses.replace(self.llm.stats)
        self._set_tick(self.tick)
        self._deliver_scheduled()
        self._routine()
        deciding = self._think()
        self._act()
        self._record_states()
        self._commit(started, before, deciding)
        self._set_tick(self.tick + 1)

    def _deliver_inbox(self) -> None:
        """Whispers typed into the viewer since the last tick become thoughts now (for someone who
        has left the town, nothing: the whisper is marked delivered)."""
        for inbox_id, agent_id, text in self.store.whispers_waiting():
            agent = self.people.get(agent_id)
            if agent is not None and agent_id not in self.gone and text:
                event_id = self.log_event(agent.state, EventKind.WHISPER, text, {"inbox_id": inbox_id})
                node = self.memory.add(agent_id, MemoryKind.THOUGHT, text,
                                       Provenance(Source.WHISPERED, event_id=event_id))
                agent.state.news.append(node.id)
            self.buffer.upsert("inbox", {"id": inbox_id, "delivered_tick": self.tick,
                                         "delivered_at": sim_iso(self.now)})

    def _deliver_scheduled(self) -> None:
        self._deliver_inbox()
        self.place_events = [e for e in self.place_events if e.until > self.now]
        while self.scheduled and self.scheduled[0][0] <= self.tick:
            _, index, ev = self.scheduled.pop(0)
            self._deliver(index, ev)

    def _deliver(self, index: int, ev: ScheduledEvent, *, fresh: bool = True) -> None:
        """Scheduled event ``index`` happens now. ``fresh`` False: it happened before the checkpoint
        a resumed run starts from, and only what holds from then on is made again (a setting, who
        arrived or left, a fact's text), not its rows, memories or place event (those are stored)."""
        if ev.kind == "setting":
            self._change_setting(ev, log=fresh)
        elif ev.kind == "arrival":
            self._arrive(index, ev, fresh=fresh)
        elif ev.kind == "departure":
            self._depart(ev, fresh=fresh)
        elif ev.kind == "correction":
            self._correct(ev, fresh=fresh)
        elif ev.kind == "prop":
            self._prop(ev, fresh=fresh)
        elif not fresh:
            return
        elif ev.kind == "whisper":
            agent = self.people.get(ev.to or "")
            if agent is None or agent.agent_id in self.gone:
                return  # a fork removed them before a whisper the scenario had for them later
            event_id = self.log_event(agent.state, EventKind.WHISPER, ev.text, {"fact": ev.fact} if ev.fact else None)
            node = self.memory.add(agent.agent_id, MemoryKind.THOUGHT, ev.text,
                                   Provenance(Source.WHISPERED, event_id=event_id, fact=ev.fact))
            agent.state.news.append(node.id)
        else:
            data = {"minutes": ev.duration_minutes, **({"fact": ev.fact} if ev.fact else {})}
            event_id = self.log_event(None, EventKind.PLACE_EVENT, ev.text, data, place=ev.place)
            self.place_events.append(PlaceEvent(
                event_id or 0, ev.place or "", ev.text, ev.at + timedelta(minutes=ev.duration_minutes), ev.fact))

    def _prop(self, ev: ScheduledEvent, *, fresh: bool = True) -> None:
        """A prop event: the object's state is the event's text from now on. Fresh, a ``prop`` event is
        written and the change is news at the place for ``duration_minutes`` (a place event, so the
        people there notice it as any happening); resumed, only the state is made again."""
        place, name = ev.place or "", ev.object or ""
        was = self.props.set(place, name, ev.text.strip())
        if not fresh:
            return
        seen = f"The {name} is now {ev.text.strip().rstrip('.')}."  # noticed as "At <place>: ..."
        event_id = self.log_event(None, EventKind.PROP, seen, {"object": name, "state": ev.text, "was": was},
                                  place=place)
        self.place_events.append(PlaceEvent(event_id or 0, place, seen, ev.at + timedelta(minutes=ev.duration_minutes)))

    def _change_setting(self, ev: ScheduledEvent, *, log: bool = True) -> None:
        """A setting event: cognition reads the new value from this tick on (resume applies the
        ones already delivered again, ``restore``)."""
        self._as_now = self._as_now.with_setting(ev.setting, ev.value)  # type: ignore[arg-type]
        loaded = self.settings.loaded.model_copy(update={"scenario": self._as_now})
        self.mind.settings = dataclasses.replace(self.settings, loaded=loaded).cognition()
        if log:
            self.log_event(None, EventKind.SETTING, ev.text, {"setting": ev.setting, "value": ev.value})

    def _arrive(self, index: int, ev: ScheduledEvent, *, fresh: bool = True) -> None:
        """An arrival: the person is built at the event's place and lives in the town from now on.
        Fresh, they also get their ``agents`` row, their seed memories and the facts they know
        (``known_by``, as the facts stand now), the ties their persona brings and those the town's
        personas have to them, and an ``arrival`` event; resumed, all of that is stored already."""
        rp = self.loaded.arrivals[index]
        agent = self._person(rp)
        self.people[agent.agent_id] = agent
        self._states[agent.agent_id] = agent.state
        self.social.add_person(agent.agent_id)
        if self.facts is not None:
            self.facts.add_person(rp.persona.name)
        self._town_changed()
        if not fresh:
            return
        self.buffer.add("agents", person_row(rp, self.tick))
        state = self._settle(agent, self._as_now.facts)
        for other in self.order:
            view = other.state.persona.relationships.get(agent.agent_id)
            if view is not None:
                self.social.seed(other.agent_id, agent.agent_id, view)
        self.log_event(agent.state, EventKind.ARRIVAL, ev.text,
                       {"state": state, "source": rp.source, "crowd": rp.crowd})

    def _depart(self, ev: ScheduledEvent, *, fresh: bool = True) -> None:
        """A departure: the person leaves the town. Fresh, the conversation they are in ends
        ("left the town"; the one who stays recaps it), a ``departure`` event and their
        ``agents.left_tick`` are written. Then they are out of Mesa's space and agent set and of
        ``order``: nobody sees or meets them, no phase runs for them, no row of theirs follows."""
        agent = self.people.get(ev.to or "")
        if agent is None or agent.agent_id in self.gone:
            return  # not in the town (a fork removed them before the scenario's own departure)
        if fresh:
            conv = self.conversations.of(agent.state)
            if conv is not None:
                self.conversations.end(conv, "left the town", leaving=agent.agent_id)
            self.log_event(agent.state, EventKind.DEPARTURE, ev.text,
                           {"conversation_id": conv.id} if conv is not None else None)
            self.buffer.update("agents", (self.store.run_id, agent.agent_id), {"left_tick": self.tick})
        self.gone.add(agent.agent_id)
        self.social.remove_person(agent.agent_id)
        agent.remove()
        self._town_changed()

    def _correct(self, ev: ScheduledEvent, *, fresh: bool = True) -> None:
        """A correction: the fact's text (and details, if given) are the new ones from now on: the
        tracker checks and reads later memories against them and probes are scored by them. Nobody
        learns of it by this: each aware person acts on the version they hold until they are told
        the new one (``FactTracker.version_held``). Fresh, a ``correction`` event records it."""
        fact = ev.fact or ""
        was = next(f for f in self._as_now.facts if f.id == fact)
        self._as_now = self._as_now.with_correction(fact, ev.text, ev.details)
        now = next(f for f in self._as_now.facts if f.id == fact)
        if self.facts is not None:  # delivered at its own tick (runs step from 0), resumed or not
            self.facts.correct(fact_text(now), self.clock.tick_at(ev.at))
        if fresh:
            self.log_event(None, EventKind.CORRECTION, ev.text, {
                "fact": fact, "was": was.text, "details": [d.model_dump(mode="json") for d in now.details]})

    def _routine(self) -> None:
        for agent in self.order:
            s = agent.state
            awake = s.awake_at(self.now)
            if s.status == Status.SLEEPING and awake:
                s.status = Status.WAKING
                self.log_event(s, EventKind.WAKE, f"{s.persona.name} wakes up at {self.town.name(s.place)}")
            elif s.status != Status.SLEEPING and not awake and not (s.action and s.action.bedtime):
                conv = self.conversations.of(s)
                if conv is not None:
                    self.conversations.end(conv, "bedtime")
                s.steps.clear()
                s.replan = None
                agent.start_action(Action("going to bed", s.home, 0, bedtime=True))

    def _think(self) -> int:
        """The cognition phases in order, each run for the people it is due for together
        (simulation/llm/batching.py: one batch per round of requests); returns how many people and
        conversations asked the LLM anything. A phase that cannot make progress raises
        ``PhaseStuck`` (a RunError) before the commit."""
        mind = self.mind
        notes = TickNotes()
        for phase in self.phases:  # each phase sees the notes it declares, no others (Phase.reads, writes)
            mind.notes = notes.for_phase(phase.name, phase.reads | phase.reads_if_any, phase.writes)
            chosen = phase.select(mind)
            self.loop.run_phase(phase.name, [(me.id, phase.run(me, mind)) for me in chosen])
            phase.finish(mind)
        mind.notes = notes
        return len(notes.deciding) + notes.conversations

    # ------------------------------------------------------------------ act & commit

    def _act(self) -> None:
        minutes = float(self.clock.tick_minutes)
        for agent in self.order:
            s = agent.state
            if s.status == Status.IDLE:
                step = s.next_step(self.now)
                if step is not None:
                    agent.start_action(step)
            agent.advance(minutes)

    def _record_states(self) -> None:
        for agent in self.order:
            s = agent.state
            self.buffer.add("agent_states", {
                "tick": self.tick, "sim_time": sim_iso(self.now), "agent_id": s.id, "place": s.place,
                "status": s.status, "action": self.doing(s),
                "destination": s.action.place if s.action else None, "conversation_id": s.conversation_id,
                "mood": s.mood or None, "valence": s.valence if s.mood else None,
                "arousal": s.arousal if s.mood else None,
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
        """The facts the tick's new memories carry, their vectors, changed importance / last access,
        changed relationships."""
        new = self.memory.take_new()
        if self.facts is not None:
            self.facts.observe(new)
        self.memory.flush_rows()
        for row in self.social.changed_rows():
            self.buffer.add("relationships", {"tick": self.tick, "sim_time": sim_iso(self.now), **row})

    # ------------------------------------------------------------------ end of run

    def ask_probes(self) -> None:
        """Ask every probe question of its people (one batch), at the time the run ended."""
        self._set_tick(self.tick)
        jobs = []
        here = [a.agent_id for a in self.order]  # whoever left the town is not asked
        for index, probe in enumerate(self.scenario.probes):
            ids = here if probe.agents == "all" else [a for a in probe.agents if a in here]
            jobs += [(self.people[a].state, probe.question, index) for a in ids]

        answers = self.loop.run_phase("probe", [  # a probe about a fact asks "have you heard of ...?"
            (me.id, answer_probe(me, self.mind, q, i, recognise=self.scenario.probes[i].fact is not None))
            for me, q, i in jobs])
        facts = {f.id: f for f in self._as_now.facts}  # as corrected by the end of the run
        for (me, question, index), (answer, ok, call_id) in zip(jobs, answers, strict=True):
            scored: dict[str, object] = {}
            fact = facts.get(self.scenario.probes[index].fact or "")
            if fact is not None and self.facts is not None:
                aware = me.id in self.facts.aware.get(fact.id, set())
                result = score_answer(self.facts.reader, answer, question, fact_text(fact).details, self.now.date(),
                                      aware, ok=ok)
                scored = {"fact_id": fact.id, "aware": int(aware), "verdict": result.verdict,
                          "details": dumps(result.details)}
            self.buffer.add("probes", {
                "tick": self.tick, "sim_time": sim_iso(self.now), "agent_id": me.id,
                "question": question, "answer": answer, "ok": int(ok), "llm_call_id": call_id, **scored,
            })
        self._flush_memory()
        self.store.commit(self.buffer)

    def close(self) -> None:
        """Close the model's event loop (the backend belongs to whoever built it)."""
        self.loop.close()
