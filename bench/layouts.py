"""Prompt layouts to try before building them: rewrites of a run's recorded prompts that
``bench/reuse.py --what-if NAME`` counts exactly as the llama.cpp backend would.

Why: what a layout saves is decided by tokens and by which messages repeat, and a run's recorded
calls say both. Building a layout in the engine and measuring it on the 1.5B takes hours of CPU;
counting a rewrite of the calls of a run already made takes seconds. The count is of the same
calls with the same answers, so it is an estimate of the layout's cost (a real run with it would
answer differently and make other calls); the behaviour is measured only for the layouts worth it.

Each rewrite keeps the text a person is shown (the same lines, moved or split), except ``no-plan``,
an upper bound: what the plan's lines cost.

- ``split-turn``: the situation message ends before what is particular to this question (whom the
  person sees or notices, what they think of them, the conversation so far), which becomes a
  message of its own; a person's questions in one tick then share their situation.
- ``day-apart``: the memories of the day's start (every line stamped 07:00 of the day: seed
  memories, the day's plan) leave the situations and stand in one message after the persona,
  the same for all of the person's questions that day; retrieval would show them always.
- ``no-plan``: the day's plan lines dropped from every prompt (what they cost, not a layout).

The rewrites read prompts without a working memory; a run with ``cognition.live_context`` is
refused (its prompts are already laid out to share a growing prefix).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from simulation.llm.types import PIECE_BREAK

MEMORY_LINE = re.compile(r"^- \((?P<day>[A-Z][a-z]{2}) (?P<time>\d\d:\d\d)\) (?P<text>.*)$")
TURN_START = re.compile(r"^(?:\S+ sees |\S+ notices: |What \S+ thinks of |\S+ does not know |The conversation so far:"
                        r"|Nothing has been said yet|\S+ just talked with )")
DAY_START = "07:00"


def _is_situation(m: dict[str, str]) -> bool:
    return m["role"] == "user" and m["content"].startswith("<situation>")


def split_turn(messages: list[dict[str, str]], people: dict[str, Any]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for k, m in enumerate(messages):
        if k == len(messages) - 1 or not _is_situation(m):
            out.append(m)
            continue
        lines = m["content"].split("\n")
        cut = next((i for i, line in enumerate(lines) if TURN_START.match(line)), None)
        if cut is None:
            out.append(m)
            continue
        head = "\n".join(lines[:cut]) + "\n</situation>"
        tail = "<situation>\n" + "\n".join(lines[cut:])
        out += [{"role": "user", "content": head}, {"role": "user", "content": tail}]
    return out


def _day_lines(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    found = []
    for m in messages[1:]:
        for line in m["content"].split("\n"):
            hit = MEMORY_LINE.match(line)
            if hit and hit["time"] == DAY_START:
                found.append((hit["day"], line))
    return found


def day_apart_prepare(calls: list[Any]) -> dict[str, Any]:
    """Every day-start line each person is ever shown, per day, in the order first shown (the
    engine would know them at the day's start)."""
    days: dict[tuple[str, str], list[str]] = {}
    for c in calls:
        person = c.messages[0]["content"]
        for day, line in _day_lines(c.messages):
            shown = days.setdefault((person, day), [])
            if line not in shown:
                shown.append(line)
    return {"days": days}


def day_apart(messages: list[dict[str, str]], people: dict[str, Any]) -> list[dict[str, str]]:
    lines = _day_lines(messages)
    if not lines or messages[0]["role"] != "system":
        return messages
    person, day = messages[0]["content"], lines[0][0]
    stable = people["days"].get((person, day), [])
    rest = []
    for m in messages[1:]:
        kept = [line for line in m["content"].split("\n") if not (MEMORY_LINE.match(line) and line in stable)]
        rest.append({**m, "content": "\n".join(kept)})
    block = {"role": "user", "content": "<memories>\nThe day began with:\n" + "\n".join(stable) + "\n</memories>"}
    return [messages[0], block, *rest]


def no_plan(messages: list[dict[str, str]], people: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for m in messages:
        kept = [line for line in m["content"].split("\n")
                if not ((hit := MEMORY_LINE.match(line)) and hit["text"].startswith("Plan for "))]
        out.append({**m, "content": "\n".join(kept)})
    return out


Rewrite = Callable[[list[dict[str, str]], dict[str, Any]], list[dict[str, str]]]
LAYOUTS: dict[str, tuple[Callable[[list[Any]], dict[str, Any]] | None, Rewrite]] = {
    "split-turn": (None, split_turn),
    "day-apart": (day_apart_prepare, day_apart),
    "no-plan": (None, no_plan),
}


def rewrite(calls: list[Any], names: list[str]) -> list[Any]:
    """The calls with their messages rewritten by each named layout in turn (copies; probes are
    left as they are, since an end-of-run question keeps its own layout)."""
    out = deepcopy(calls)
    if names and any(PIECE_BREAK in (m.get("content") or "") for c in out for m in c.messages):
        raise SystemExit("--what-if rewrites prompts without a working memory (cognition.live_context off); "
                         "this run's prompts carry one (piece breaks): count it as it is")
    for name in names:
        prepare, fn = LAYOUTS[name]
        people = prepare(out) if prepare else {}
        for c in out:
            if not c.purpose.startswith("probe") and c.purpose != "calibrate":
                c.messages = fn(c.messages, people)
    return out


__all__ = ["LAYOUTS", "rewrite"]
