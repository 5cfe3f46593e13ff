"""Recorder: the rows a tick writes about what happened (events, plans, schedules, LLM calls),
stamped with the current tick and game time and queued in the tick's buffer; the model commits
the buffer in one transaction at the end of the tick."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simulation.core import EventKind, Moment, PlanItem
from simulation.llm.types import CallRecord
from simulation.record.store import TickBuffer, dumps, sim_iso

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.scenario import ResolvedPersona


def person_row(rp: ResolvedPersona, arrived_tick: int) -> dict[str, Any]:
    """A person's ``agents`` row: written when the run starts (``arrived_tick`` 0), or at the tick
    someone arrives (an ``arrival`` event)."""
    p = rp.persona
    return {"agent_id": p.id, "name": p.name, "age": p.age, "occupation": p.occupation, "home": rp.home,
            "start_place": rp.start_place, "source": rp.source, "crowd": int(rp.crowd),
            "persona": dumps(p.model_dump(mode="json")), "llm_group": rp.llm_group, "arrived_tick": arrived_tick}


class Recorder:
    def __init__(self, buffer: TickBuffer, moment: Moment):
        self.buffer = buffer
        self.moment = moment

    def _stamp(self) -> dict[str, Any]:
        return {"tick": self.moment.tick, "sim_time": sim_iso(self.moment.now)}

    def event(self, who: AgentState | None, kind: EventKind, text: str, data: dict[str, Any] | None = None,
              place: str | None = None) -> int | None:
        return self.buffer.add("events", {
            **self._stamp(), "agent_id": who.id if who else None,
            "place": place or (who.place if who else None), "kind": kind, "text": text,
            "data": dumps(data) if data else None,
        })

    def plan(self, who: AgentState, items: list[PlanItem], ok: bool) -> None:
        self.buffer.add("plans", {
            **self._stamp(), "agent_id": who.id, "day": self.moment.now.date().isoformat(),
            "items": dumps([i.model_dump() for i in items]), "ok": int(ok),
        })

    def schedule(self, who: AgentState, level: str, parent: str, items: list[dict[str, Any]], ok: bool) -> None:
        self.buffer.add("schedules", {
            **self._stamp(), "agent_id": who.id, "level": level, "parent": parent, "items": dumps(items),
            "ok": int(ok),
        })

    def llm_call(self, rec: CallRecord) -> int | None:
        req, out = rec.request, rec.completion
        return self.buffer.add("llm_calls", {
            "tick": req.tick, "sim_time": sim_iso(self.moment.now), "agent_id": req.agent_id,
            "purpose": req.purpose, "backend": rec.backend, "model": rec.model, "attempt": rec.attempt,
            "seed": req.seed, "temperature": req.temperature, "max_tokens": req.max_tokens,
            "messages": dumps(req.messages), "json_schema": dumps(req.json_schema) if req.json_schema else None,
            "options": dumps(req.options) if req.options is not None else None, "script": req.script,
            "completion": out.text, "finish_reason": out.finish_reason, "parse_ok": int(rec.parse_ok),
            "parse_error": rec.parse_error or out.error, "fallback": int(rec.fallback),
            "cache_hit": int(rec.cache_hit), "prompt_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens, "latency_s": round(out.latency_s, 4),
        })
