"""Drafting a whole scenario from a one-line topic (``agora scenario new``; issue 37, after HAMLET).

The LLM writes the scenario piece by piece, each under a JSON schema built from what the earlier
pieces made (``pieces``): the premise (setting and news), the public places, the cast, each
person's persona (all asked in one batch), the news as a traceable fact (place, day, time, who
hears it first, the probe question) and the story's two beats. A piece whose answer the schema
or its ``check`` turns down is asked again with the reason (``LLMClient.ask``'s own retry, then
ours, up to ``tries`` times). The pieces are put together (``assemble``) and loaded as a scenario
file is; every problem the loader finds goes back, located, to the piece that made that part,
which is asked again (with the pieces that build on it) up to ``tries`` rounds. The result is a
scenario that ``agora validate`` accepts, or ``DraftFailed`` with the last problems.

Deterministic: every question's seed comes from the draft's seed, the piece and the try, and
the backend's replay cache answers a question it has seen, as in a run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import yaml
from pydantic import BaseModel

from simulation.authoring import pieces
from simulation.authoring.assemble import (CastMember, Fixed, assemble, cast_members, distinct_places, place_ids,
                                           run_days)
from simulation.errors import InputError, Problem
from simulation.formats import templating
from simulation.llm import batching
from simulation.llm.client import LLMClient
from simulation.llm.types import CallRecord

__all__ = ["Draft", "DraftFailed", "DraftOptions", "draft", "loader_problems", "pieces_planned", "scenario_yaml"]

MAX_TOKENS = 1024


def max_tokens(piece: str, options: DraftOptions) -> int:
    """A piece's answer cap: room for a full answer, and no more (a small model that loops inside a
    string runs to the cap before the answer can be turned down and asked again)."""
    caps = {"premise": 250, "town": 60 + 110 * options.places, "cast": 40 + 45 * options.people,
            "news": 350, "beats": 250}
    return min(MAX_TOKENS, caps.get(piece, 800))
PACKAGE = ("simulation.authoring",)


@dataclass(frozen=True)
class DraftOptions:
    people: int = 6
    places: int = 5
    days: int = 1
    start: datetime = datetime(2024, 3, 4, 7, 0)
    seed: int = 0
    tries: int = 3
    """How many times a piece is asked (each time with the reason the last answer failed), and how
    many rounds of the loader's problems are sent back."""
    director: bool = False

    @property
    def fixed(self) -> Fixed:
        return Fixed(self.start, self.days, self.director)


class DraftFailed(Exception):
    """The topic could not be made into a valid scenario within the tries: what went wrong last."""

    def __init__(self, problems: list[str], text: str | None = None):
        self.problems = problems
        self.text = text
        """The last assembled draft (invalid), when the pieces came that far."""
        super().__init__("; ".join(problems))


@dataclass
class Draft:
    text: str
    """The scenario file's YAML."""
    calls: int = 0
    rounds: int = 1
    """Rounds of assembling and loading (1: valid at the first load)."""
    asked_again: dict[str, int] = field(default_factory=dict)
    """Piece -> how many times it was asked again after its first answer."""


def pieces_planned(options: DraftOptions) -> int:
    """The pieces a draft asks for at least (premise, town, cast, each person, news, beats)."""
    return 5 + options.people


def _render(template: str, **context: Any) -> str:
    return templating.render(PACKAGE, template, **context)


def _messages(template: str, **context: Any) -> list[dict[str, str]]:
    return [{"role": "system", "content": _render("system.j2")},
            {"role": "user", "content": _render(template, **context)}]


class _Drafting:
    def __init__(self, topic: str, client: LLMClient, options: DraftOptions,
                 on_piece: Callable[[str], None] | None):
        self.topic = topic
        self.client = client
        self.options = options
        self.on_piece = on_piece or (lambda name: None)
        self.errors: dict[str, str] = {}
        self.asked_again: dict[str, int] = {}

    def record(self, rec: CallRecord) -> None:
        if rec.parse_error:
            self.errors[rec.request.agent_id or ""] = rec.parse_error

    async def ask(self, piece: str, template: str, model: type[BaseModel], context: dict[str, Any],
                  check: Callable[[Any], str | None] | None = None, feedback: Sequence[str] = (),
                  round_: int = 0) -> Any:
        """One piece, asked until it is usable (``options.tries`` times at most); ``feedback``:
        the loader's problems with this piece's last answer."""
        messages = _messages(template, **context)
        if feedback:
            messages[-1]["content"] += ("\nAn earlier answer made a scenario with these problems; avoid them:\n"
                                        + "\n".join(f"- {f}" for f in feedback))
        reason = None
        for attempt in range(self.options.tries):
            asked = messages if reason is None else [
                *messages[:-1], {"role": "user", "content": messages[-1]["content"]
                                 + f"\nAn earlier answer was not usable ({reason}); write a new one."}]
            answer = await self.client.ask(asked, model, default=model.model_construct(), purpose="draft",
                                           agent_id=piece, tick=round_ * 100 + attempt, check=check,
                                           max_tokens=max_tokens(piece, self.options))
            if answer.ok:
                self.on_piece(piece)
                return answer.value
            self.asked_again[piece] = self.asked_again.get(piece, 0) + 1
            reason = self.errors.get(piece, "it did not fit the format")
        raise DraftFailed([f"{piece}: no usable answer in {self.options.tries} tries; the last: {reason}"])


def _unique(what: str, values: list[str]) -> str | None:
    doubled = sorted({v for v in values if values.count(v) > 1})
    return f"two {what} are the same: {', '.join(doubled)}; make them all different" if doubled else None


def _check_town(town: Any) -> str | None:
    homes = [p.name for p in town.places if p.kind.strip() in ("home", "house")]
    if homes:
        return f"{', '.join(homes)} is a home; the places asked for are public places (homes come later)"
    asked = len(town.places)
    if len(distinct_places(town)) < max(2, (asked + 1) // 2):
        return _unique("place names", [p.name.lower() for p in town.places])
    return None


def _check_cast(cast: Any) -> str | None:
    return (_unique("names", [c.name for c in cast.people])
            or _unique("first names", [c.name.split()[0] for c in cast.people]))


def _check_news(fixed: Fixed) -> Callable[[Any], str | None]:
    first = fixed.start + timedelta(hours=2)
    last = fixed.end - timedelta(hours=1)

    def check(news: Any) -> str | None:
        starts = datetime.fromisoformat(f"{news.day} {news.starts}")
        if starts < first:
            return f"it starts at {starts:%H:%M} on {starts:%A}, too early: the news needs time to spread " \
                   f"(start at {first:%H:%M} or later on {first:%A})"
        if starts + timedelta(hours=news.hours) > last:
            return f"it ends after {last:%H:%M} on {last:%A}, when the story is over"
        return None
    return check


STARTS = tuple(h for h in pieces.HOURS if "08:00" <= h <= "21:00")
"""When the news' happening may start."""


class _Pieces:
    """The answers so far, and the questions that make each piece."""

    def __init__(self, d: _Drafting):
        self.d = d
        self.premise: Any = None
        self.town: Any = None
        self.cast: list[CastMember] = []
        self.people: list[Any] = []
        self.news: Any = None
        self.beats: Any = None

    def known(self, places: bool = True, people: bool = True) -> dict[str, Any]:
        ids = place_ids(self.town) if places and self.town is not None else []
        return {"setting": self.premise.setting if self.premise else "",
                "places": [{"id": i, "name": p.name, "kind": p.kind} for i, p in zip(ids, distinct_places(self.town))]
                if ids else [],
                "people": [{"id": c.id, "name": c.name, "age": c.age, "occupation": c.occupation,
                            "workplace": c.workplace} for c in self.cast] if people else []}

    async def ask_premise(self, fb: list[str], r: int) -> None:
        self.premise = await self.d.ask("premise", "premise.j2", pieces.Premise, {"topic": self.d.topic},
                                        feedback=fb, round_=r)

    async def ask_town(self, fb: list[str], r: int) -> None:
        n = self.d.options.places
        letters = pieces.initials(n, self.d.options.seed + 1)
        self.town = await self.d.ask("town", "town.j2", pieces.town_model(n, letters),
                                     {"topic": self.d.topic, "n": n, **self.known(places=False, people=False)},
                                     check=_check_town, feedback=fb, round_=r)

    async def ask_cast(self, fb: list[str], r: int) -> None:
        n = self.d.options.people
        letters = pieces.initials(n, self.d.options.seed)
        cast = await self.d.ask("cast", "cast.j2", pieces.cast_model(n, place_ids(self.town), letters),
                                {"topic": self.d.topic, "n": n, **self.known(people=False)},
                                check=_check_cast, feedback=fb, round_=r)
        self.cast = cast_members(cast)
        self.people = [None] * len(self.cast)

    async def ask_person(self, i: int, fb: list[str], r: int) -> None:
        me = self.cast[i]
        model = pieces.person_model(place_ids(self.town), [c.id for c in self.cast if c.id != me.id],
                                    me.workplace != "none")
        self.people[i] = await self.d.ask(f"person:{me.id}", "person.j2", model, {"me": me, **self.known()},
                                          feedback=fb, round_=r)

    async def ask_news(self, fb: list[str], r: int) -> None:
        fixed = self.d.options.fixed
        model = pieces.news_model(place_ids(self.town), run_days(fixed), STARTS, [c.id for c in self.cast])
        self.news = await self.d.ask("news", "news.j2", model,
                                     {"topic": self.d.topic, "news": self.premise.news,
                                      "start": f"{fixed.start:%H:%M} on {fixed.start:%A %d %B}", **self.known()},
                                     check=_check_news(fixed), feedback=fb, round_=r)

    async def ask_beats(self, fb: list[str], r: int) -> None:
        when = datetime.fromisoformat(f"{self.news.day} {self.news.starts}")
        self.beats = await self.d.ask("beats", "beats.j2", pieces.beats_model([c.id for c in self.cast]),
                                      {"fact": self.news.text, "when": f"{when:%H:%M} on {when:%A}",
                                       "place": self.news.place, **self.known()}, feedback=fb, round_=r)


LATER = {"premise": ("town", "cast", "people", "news", "beats"), "town": ("cast", "people", "news", "beats"),
         "cast": ("people", "news", "beats"), "news": ("beats",), "people": (), "beats": ()}
"""What asking a piece again asks again too: the pieces that name what it made. A person's
persona is a piece of its own (``person:ID``); "people" is every person's."""


def _piece_of(problem: Problem, cast: list[CastMember]) -> str:
    """Which piece made the part of the scenario a loader's problem is about."""
    head = problem.field.split(".")[0]
    top = head.split("[")[0]
    if top == "personas" and "[" in head:
        index = int(head.split("[", 1)[1].rstrip("]"))
        return f"person:{cast[index].id}" if index < len(cast) else "people"
    return {"town": "town", "personas": "people", "facts": "news", "events": "news", "probes": "news",
            "story": "beats"}.get(top, "premise")


def scenario_yaml(data: dict[str, Any], topic: str, options: DraftOptions, model: str) -> str:
    header = (f"# Drafted by `agora scenario new` from the topic: {' '.join(topic.split())}\n"
              f"# ({options.people} people, {options.places} public places, {options.days} day(s), seed "
              f"{options.seed}, model {model}). It passed `agora validate` when written; edit freely.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None)


async def _draft(topic: str, client: LLMClient, options: DraftOptions, model: str,
                 check: Callable[[str], list[Problem]], on_piece: Callable[[str], None] | None) -> Draft:
    d = _Drafting(topic, client, options, on_piece)
    caller = client.on_call

    def record(rec: CallRecord) -> int | None:  # the reasons are read; the caller's recorder still gets every call
        d.record(rec)
        return caller(rec) if caller is not None else None

    client.on_call = record
    p = _Pieces(d)
    feedback: dict[str, list[str]] = {}
    todo = {"premise", *LATER["premise"]}
    problems: list[Problem] = []
    text = None
    for round_ in range(options.tries):
        fb = feedback.get
        if "premise" in todo:
            await p.ask_premise(fb("premise", []), round_)
        if "town" in todo:
            await p.ask_town(fb("town", []), round_)
        if "cast" in todo:
            await p.ask_cast(fb("cast", []), round_)
        await asyncio.gather(*(p.ask_person(i, fb(f"person:{c.id}", []), round_) for i, c in enumerate(p.cast)
                               if "people" in todo or f"person:{c.id}" in todo))
        if "news" in todo:
            await p.ask_news(fb("news", []), round_)
        if "beats" in todo:
            await p.ask_beats(fb("beats", []), round_)
        data = assemble(p.premise, p.town, p.cast, p.people, p.news, p.beats, options.fixed)
        text = scenario_yaml(data, topic, options, model)
        problems = check(text)
        if not problems:
            return Draft(text, client.stats.calls, round_ + 1, d.asked_again)
        feedback = {}
        for problem in problems:
            feedback.setdefault(_piece_of(problem, p.cast), []).append(
                f"{problem.field}: {problem.message}" if problem.field else problem.message)
        todo = set(feedback) | {later for piece in feedback for later in LATER.get(piece, ())}
    raise DraftFailed([str(problem) for problem in problems], text)


def draft(topic: str, client: LLMClient, options: DraftOptions, model: str,
          check: Callable[[str], list[Problem]], on_piece: Callable[[str], None] | None = None) -> Draft:
    """A valid scenario's YAML drafted from ``topic``, or ``DraftFailed``. ``check``: the problems
    with a scenario file's text (the loader's, as ``agora validate`` finds them); ``model``: how
    the header names the model."""
    return batching.run(_draft(topic, client, options, model, check, on_piece), name="scenario new")


def loader_problems(base: str) -> Callable[[str], list[Problem]]:
    """``check`` for ``draft``: the scenario loader and the cognition phases' own checks, on a file
    that would be at ``base``."""
    from simulation import scenario as sc
    from simulation.cognition.phases import scenario_phases

    def check(text: str) -> list[Problem]:
        try:
            loaded = sc.load(base, text=text)
            scenario_phases(loaded.scenario.cognition.phases, loaded)
        except InputError as exc:
            return exc.problems
        return []
    return check
