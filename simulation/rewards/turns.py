"""What is judged: every utterance and every decided action of a run, read from run.db alone.

A *turn* is one thing an agent said (an ``utterances`` row) or decided to do (an ``events`` row
of kind ``action``: a plan step begun, or ``reaction``: the plan dropped for something noticed).
Each turn carries

- its *group*, the set its advantage is normalised in: its conversation, or all decided actions
  of its tick;
- the *scene* the judge reads: time and place, the agent's plan for the day and what is on its
  mind, who else is there, what it noticed, and the conversation so far;
- the ``llm_calls`` row whose completion produced it, when there is one whose answer was used
  (not a safe default): that row's messages and completion become the exported training example,
  exactly as the agent saw and wrote them. An utterance names its call; a reaction is its agent's
  ``react`` call of that tick; an action is the agent's latest ``steps`` (or, in older runs,
  ``action``) call, up to its tick, that queued that action. Turns with no such call are judged but cannot be exported.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulation.errors import InputError, Problem
from simulation.rewards import prompts
from simulation.rundb import connect_ro, table_names  # connect_ro: simulation/cli/rewards.py imports it from here

DIALOGUE_LINES = 6
"""Lines of the conversation so far shown with an utterance (the agents see six too)."""
THOUGHTS = 2
"""Latest thoughts (whispers, inner voice) shown as what is on an agent's mind."""
KINDS = ("reaction", "utterance", "action")
"""Turn kinds in the order the tick's phases produce them (decide, converse, act)."""


@dataclass(frozen=True)
class Turn:
    source_table: str
    """``utterances`` or ``events``."""
    source_id: int
    kind: str
    agent_id: str
    tick: int
    sim_time: str
    text: str
    """The line said, or the event's text ("Isabella Rodriguez is baking bread at Hobbs Cafe")."""
    group: str
    """``conversation:ID`` or ``tick:N``: the group its advantage is normalised within."""
    scene: str
    llm_call_id: int | None
    """The run's ``llm_calls`` row behind it (answer used, not a default); None: not exportable."""
    other_id: str | None = None
    """The listener of an utterance."""
    conversation_id: int | None = None

    @property
    def source(self) -> str:
        return f"{self.source_table}:{self.source_id}"

    @property
    def order(self) -> tuple[int, int, int]:
        return self.tick, KINDS.index(self.kind), self.source_id


class _Log:
    """The rows of one run that scenes are made of, loaded once (a run is small enough)."""

    def __init__(self, con: sqlite3.Connection, run_id: str):
        self.con, self.run_id = con, run_id
        self.tables = table_names(con)
        self.names = {r["agent_id"]: r["name"] for r in self.rows(
            "select agent_id, name from agents where run_id = ?")}
        self.places = {r["place_id"]: r["name"] for r in self.rows(
            "select place_id, name from places where run_id = ?")}
        self.plans: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for r in self.rows("select agent_id, tick, items from plans where run_id = ? order by id"):
            self.plans[r["agent_id"]].append((r["tick"], _plan_text(r["items"], self.places)))
        self.thoughts: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for r in self.rows("select agent_id, tick, text from memories where run_id = ? and kind = 'thought' "
                           "order by id"):
            self.thoughts[r["agent_id"]].append((r["tick"], r["text"]))
        self.states: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for r in self.rows("select tick, agent_id, place, action from agent_states where run_id = ? "
                           "order by tick, agent_id"):
            self.states[r["tick"]].append(r)
        self.event_text = {r["id"]: r["text"] for r in self.rows(
            "select id, text from events where run_id = ? and kind in ('place_event', 'prop')")}

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        """Rows of ``sql`` (whose first parameter is the run id); a table older runs lack reads as empty."""
        table = sql.split(" from ", 1)[1].split()[0]
        if table not in self.tables:
            return []
        return [dict(r) for r in self.con.execute(sql, (self.run_id, *params))]

    def first(self, agent_id: str) -> str:
        return self.names.get(agent_id, agent_id).split()[0]

    def plan(self, agent_id: str, tick: int) -> str:
        made = [text for t, text in self.plans.get(agent_id, []) if t <= tick]
        return made[-1] if made else ""

    def mind(self, agent_id: str, tick: int) -> list[str]:
        return [text for t, text in self.thoughts.get(agent_id, []) if t <= tick][-THOUGHTS:]

    def others_at(self, agent_id: str, tick: int, place: str | None) -> list[str]:
        return [f"{self.names.get(s['agent_id'], s['agent_id'])} ({s['action']})" for s in self.states.get(tick, [])
                if s["place"] == place and s["agent_id"] != agent_id]

    def scene(self, agent_id: str, tick: int, sim_time: str, place: str | None, **more: Any) -> str:
        return prompts.render("scene.j2", first=self.first(agent_id), name=self.names.get(agent_id, agent_id),
                              when=sim_time, place=self.places.get(place or "", place or "somewhere"),
                              plan=self.plan(agent_id, tick), mind=self.mind(agent_id, tick),
                              others=self.others_at(agent_id, tick, place), **more)


def _plan_text(items_json: str | None, places: dict[str, str]) -> str:
    try:
        items = json.loads(items_json or "[]")
        return "; ".join(f"{int(i['hour']):02d}:00 {i['activity']} ({places.get(i.get('place'), i.get('place'))})"
                         for i in items)
    except (ValueError, TypeError, KeyError):
        return ""


def _completion(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "", strict=False)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _utterances(log: _Log) -> list[Turn]:
    convs = {r["id"]: r for r in log.rows("select id, place from conversations where run_id = ?")}
    said: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for u in log.rows("select id, conversation_id, tick, sim_time, turn, speaker_id, listener_id, text, "
                      "llm_call_id from utterances where run_id = ? order by conversation_id, turn, id"):
        said[u["conversation_id"]].append(u)
    used = {r["id"] for r in log.rows("select id from llm_calls where run_id = ? and parse_ok = 1")}
    turns = []
    for conv_id, lines in said.items():
        place = (convs.get(conv_id) or {}).get("place")
        for i, u in enumerate(lines):
            before = [f'{log.first(x["speaker_id"])}: "{x["text"]}"' for x in lines[:i]][-DIALOGUE_LINES:]
            scene = log.scene(u["speaker_id"], u["tick"], u["sim_time"], place,
                              partner=log.names.get(u["listener_id"], u["listener_id"]), dialogue=before)
            turns.append(Turn("utterances", u["id"], "utterance", u["speaker_id"], u["tick"], u["sim_time"],
                              u["text"], f"conversation:{conv_id}", scene,
                              u["llm_call_id"] if u["llm_call_id"] in used else None,
                              other_id=u["listener_id"], conversation_id=conv_id))
    return turns


PLAN_PURPOSES = ("steps", "action")
"""Questions whose answers queue actions: ``steps`` (5-30 minute steps; ``action``, one next
action at a time, in runs recorded before hour blocks and steps)."""


def _planned(completion: str | None) -> list[str]:
    """The action texts an answer queued, as the engine strips them (``fit_steps``)."""
    value = _completion(completion)
    items = value.get("steps") if isinstance(value.get("steps"), list) else [value]
    actions = [str(s.get("action", "")).strip().rstrip(".,;:!").strip() for s in items if isinstance(s, dict)]
    return [a for a in actions if a]


def _plan_calls(log: _Log) -> dict[str, list[tuple[int, int, list[str]]]]:
    """agent -> [(tick, call id, actions its answer queued)], oldest first (answers used only)."""
    out: dict[str, list[tuple[int, int, list[str]]]] = defaultdict(list)
    marks = ",".join("?" * len(PLAN_PURPOSES))
    for c in log.rows(f"select id, tick, agent_id, completion from llm_calls where run_id = ? and purpose in "
                      f"({marks}) and parse_ok = 1 order by id", *PLAN_PURPOSES):
        out[c["agent_id"]].append((c["tick"], c["id"], _planned(c["completion"])))
    return out


def _events(log: _Log) -> list[Turn]:
    steps = _plan_calls(log)
    reacts = {(c["agent_id"], c["tick"]): c["id"] for c in log.rows(
        "select id, tick, agent_id from llm_calls where run_id = ? and purpose = 'react' and parse_ok = 1 "
        "order by id")}
    turns = []
    for e in log.rows("select id, tick, sim_time, agent_id, place, kind, text, data from events "
                      "where run_id = ? and kind in ('action', 'reaction') and agent_id is not null order by id"):
        data = _completion(e["data"])
        noticed = ""
        if e["kind"] == "reaction":
            # the call that wrote what the person does instead (recorded with the event since the
            # reaction became a drawn choice); older runs: the agent's react call of that tick
            call = data["llm_call_id"] if "llm_call_id" in data else reacts.get((e["agent_id"], e["tick"]))
            other = data.get("other")
            if data.get("event_id") in log.event_text:
                noticed = log.event_text[data["event_id"]]
            elif other:
                doing = next((s["action"] for s in log.states.get(e["tick"], []) if s["agent_id"] == other), "")
                noticed = f"{log.names.get(other, other)}" + (f", {doing}" if doing else "")
        elif "llm_call_id" in data:  # recorded with the action (engines since run.db schema 3)
            call = data["llm_call_id"]
        else:  # older runs: the latest steps call that queued an action of this text
            prefix = f"{log.names.get(e['agent_id'], e['agent_id'])} is "
            call = next((cid for t, cid, actions in reversed(steps.get(e["agent_id"], [])) if t <= e["tick"]
                         and any(e["text"].startswith(f"{prefix}{a} at ") for a in actions)), None)
        scene = log.scene(e["agent_id"], e["tick"], e["sim_time"], e["place"], noticed=noticed)
        turns.append(Turn("events", e["id"], e["kind"], e["agent_id"], e["tick"], e["sim_time"], e["text"],
                          f"tick:{e['tick']}", scene, call))
    return turns


def read_turns(db_path: Path, limit: int | None = None) -> tuple[str, list[Turn]]:
    """(run id, every turn of the run in the order the ticks produced them; the first ``limit`` if given)."""
    try:
        con = connect_ro(db_path)  # reading the turns never changes the run
        try:
            row = con.execute("select run_id from runs limit 1").fetchone()
            if row is None:
                raise InputError(Problem(str(db_path), "run.db holds no run"))
            log = _Log(con, row[0])
            turns = sorted(_utterances(log) + _events(log), key=lambda t: t.order)
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise InputError(Problem(str(db_path), f"cannot read run.db: {exc}")) from None
    return row[0], turns[:limit] if limit is not None else turns
