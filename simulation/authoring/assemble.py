"""A drafted scenario put together from its pieces' answers: the mapping a scenario file holds.

The ids come from names (``population.slug``), the homes from households (people who share a
last name share a home), the map from ``layout``; everything else is the answers' own words.
Only mechanical tidying is done here (a day's habits sorted by hour, a person named twice in a
beat once); anything that is wrong is left for the scenario loader to say, and goes back to the
piece that said it (``drafter``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from simulation.authoring.layout import lay_out
from simulation.authoring.pieces import LEVELS
from simulation.population.names import slug

__all__ = ["CastMember", "Fixed", "assemble", "cast_members", "distinct_places", "place_ids", "run_days"]

OTHER_PROBE = "Who did you talk to today, and what about?"


@dataclass(frozen=True)
class CastMember:
    id: str
    name: str
    first: str
    age: int
    occupation: str
    workplace: str
    """A place id, or "none"."""


@dataclass(frozen=True)
class Fixed:
    """What the command line fixes rather than the LLM: when the run starts and how long it is."""

    start: datetime
    days: int
    director: bool = False

    @property
    def hours(self) -> int:
        """From the start to 23:00 of the last day."""
        return (24 * (self.days - 1)) + 23 - self.start.hour

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=self.hours)


def run_days(fixed: Fixed) -> list[date]:
    return [(fixed.start + timedelta(days=d)).date() for d in range(fixed.days)]


def distinct_places(town: BaseModel) -> list[Any]:
    """The town's places, a name said again dropped (a small model repeats itself in lists; the town
    is kept smaller rather than refused, ``drafter`` asks again only when too few are left)."""
    seen: set[str] = set()
    out = []
    for place in town.places:  # type: ignore[attr-defined]
        key = " ".join(place.name.lower().split())
        if key not in seen:
            seen.add(key)
            out.append(place)
    return out


def place_ids(town: BaseModel) -> list[str]:
    """The distinct public places' ids, made from their names (two names of one id: ``_2``)."""
    ids: list[str] = []
    for place in distinct_places(town):
        base = slug(place.name) or "place"
        pid, k = base, 2
        while pid in ids:
            pid, k = f"{base}_{k}", k + 1
        ids.append(pid)
    return ids


def cast_members(cast: BaseModel) -> list[CastMember]:
    return [CastMember(slug(c.name), c.name, c.name.split()[0], c.age, c.occupation, c.workplace)
            for c in cast.people]  # type: ignore[attr-defined]


def _households(cast: list[CastMember], public: set[str]) -> dict[str, list[CastMember]]:
    """Home id -> who lives there: one home per last name."""
    homes: dict[str, list[CastMember]] = {}
    for c in cast:
        base = f"{slug(c.name.split()[-1])}_house"
        home = base if base not in public else f"{base}_home"
        homes.setdefault(home, []).append(c)
    return homes


def _persona(c: CastMember, answer: BaseModel, home_name: str, housemates: list[CastMember]) -> dict[str, Any]:
    a: Any = answer
    others = [h.first for h in housemates if h.id != c.id]
    household = f"Lives at {home_name}" + (f" with {', '.join(others)}." if others else ", alone.")
    day = sorted({h.at: h for h in a.day}.values(), key=lambda h: h.at)  # by hour; one habit an hour
    return {
        "id": c.id, "name": c.name, "age": c.age, "occupation": c.occupation, "household": household,
        "traits": list(dict.fromkeys(a.traits)),
        "big_five": {f: LEVELS[getattr(a.big_five, f)] for f in
                     ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")},
        "social_identity": a.social_identity, "personal_identity": a.personal_identity,
        "life_context": a.life_context, "backstory": a.backstory, "speaking_style": a.speaking_style,
        "aspiration": a.aspiration, "skills": list(dict.fromkeys(a.skills)),
        "routine": {"wake": a.wake, "sleep": a.sleep,
                    "day": [{"at": h.at, "activity": h.activity, "place": h.place} for h in day]},
        "relationships": {r.person: r.view for r in a.relationships},
        "memories": list(a.memories),
    }


def assemble(premise: BaseModel, town: BaseModel, cast: list[CastMember],
             people: list[BaseModel], news: BaseModel, beats: BaseModel, fixed: Fixed) -> dict[str, Any]:
    """The scenario mapping, ready to be written as YAML and loaded."""
    p: Any = premise
    n: Any = news
    b: Any = beats
    public = place_ids(town)
    households = _households(cast, set(public))
    answers = {c.id: a for c, a in zip(cast, people)}
    home_of = {c.id: h for h, members in households.items() for c in members}
    works = {h: next((c.workplace for c in members if c.workplace in public), None)
             for h, members in households.items()}
    positions, paths = lay_out(public, works)
    places: list[dict[str, Any]] = []
    for pid, place in zip(public, distinct_places(town)):
        places.append({"id": pid, "name": place.name, "kind": place.kind, "description": place.description,
                       "objects": list(dict.fromkeys(place.objects)), "position": list(positions[pid])})
    for hid, members in households.items():
        home: Any = answers[members[0].id].home
        places.append({"id": hid, "name": f"The {members[0].name.split()[-1]} House", "kind": "home",
                       "description": home.description, "objects": list(dict.fromkeys(home.objects)),
                       "position": list(positions[hid])})
    home_names = {pl["id"]: pl["name"] for pl in places}
    personas = []
    for c in cast:
        entry: dict[str, Any] = {"persona": _persona(c, answers[c.id], home_names[home_of[c.id]],
                                                     households[home_of[c.id]]),
                                 "home": home_of[c.id]}
        if c.workplace in public:
            entry["workplace"] = c.workplace
        personas.append(entry)
    fact_id = slug(n.name) or "news"
    starts = datetime.combine(date.fromisoformat(n.day), datetime.strptime(n.starts, "%H:%M").time())
    ends = starts + timedelta(hours=n.hours)
    stamp = "%Y-%m-%d %H:%M"
    return {
        "name": slug(p.title) or "drafted",
        "description": f"{p.setting} {p.news}",
        "seed": 0,
        "clock": {"start": fixed.start.strftime(stamp), "tick_minutes": 10, "duration_hours": fixed.hours},
        "town": {"places": places, "paths": [{"between": [a, z], "minutes": m} for a, z, m in paths]},
        "personas": personas,
        "events": [{"at": fixed.start.strftime(stamp), "kind": "whisper", "to": n.first_to_know,
                    "fact": fact_id, "text": n.thought}],
        "facts": [{"id": fact_id, "name": n.name, "text": n.text, "details": [
            {"name": "place", "kind": "place", "value": n.place},
            {"name": "day", "kind": "date", "value": n.day},
            {"name": "time", "kind": "time", "value": f"{starts:%H:%M}-{ends:%H:%M}"}]}],
        "probes": [{"question": n.question, "agents": "all", "fact": fact_id},
                   {"question": OTHER_PROBE, "agents": "all"}],
        "story": {"director": fixed.director, "beats": [
            {"id": "word_spreads", "what": b.reach_what, "fact": fact_id,
             "people": list(dict.fromkeys(b.reach_people)), "by": starts.strftime(stamp)},
            {"id": "gathering", "what": b.gather_what, "place": n.place, "count": b.gather_count,
             "after": starts.strftime(stamp), "by": ends.strftime(stamp)}]},
    }
