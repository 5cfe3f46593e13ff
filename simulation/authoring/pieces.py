"""The answer models of a drafted scenario's pieces: what the LLM is asked for, piece by piece.

Why built per draft: every reference a scenario holds (a habit's place, a relationship's person,
the fact's place and day, who hears it first) is asked as an ``enum`` of the ids the earlier
pieces made, so the JSON grammar the backend samples under (llama.cpp's, or a server's
structured output) cannot name a place or person that does not exist. What a grammar cannot
say (two people with one name, a habit twice at one hour, news that starts before the run)
is each piece's ``check``, fed back to the model as a reason when it fails.
"""

from __future__ import annotations

from datetime import date
import random
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

__all__ = ["HOURS", "LEVELS", "SLEEP", "WAKE", "Premise", "beats_model", "cast_model", "initials", "news_model",
           "person_model", "town_model"]

LEVELS = {"very low": 0.1, "low": 0.3, "average": 0.5, "high": 0.7, "very high": 0.9}
"""A Big Five factor as a word (a small model picks a word far more reliably than a number in 0-1)."""
HOURS = tuple(f"{h:02d}:00" for h in range(6, 24))
"""When a habit may start: on the hour (the day is planned hour by hour)."""
WAKE = ("05:00", "05:30", "06:00", "06:30", "07:00", "07:30", "08:00", "08:30", "09:00")
SLEEP = ("21:00", "21:30", "22:00", "22:30", "23:00", "23:30")



def _length(lo: int, hi: int) -> Callable[[str], str]:
    def check(value: str) -> str:
        n = len(value.strip())
        if not lo <= n <= hi:
            raise ValueError(f"must be {lo} to {hi} characters long, not {n}")
        return value.strip()
    return check


def text(lo: int, hi: int, pattern: str | None = None) -> Any:
    """A string of ``lo`` to ``hi`` characters (and ``pattern``, where given). The lengths are
    checked after the answer, not put in the schema: a grammar that counts characters is a rule
    per character. They are the file format's limits and little more: a persona of 700 tokens
    asked again for one trait a few letters too long (what a taste-setting minimum did on the
    135M) costs a minute and gains nothing the file needs; what the text is worth is measured
    (bench/scenario_new.py), not refused."""
    return Annotated[str, Field(pattern=pattern) if pattern else Field(), AfterValidator(_length(lo, hi))]


Level = Literal[tuple(LEVELS)]  # type: ignore[valid-type]
Sentence = text(2, 1000)
Paragraph = text(2, 2000)
ObjectName = text(2, 60, r"^[a-z][a-z' -]+$")
"""An object at a place: lower case, short ("piano", "chalk price board")."""
PlaceName = text(3, 60, r"^[A-Z][A-Za-z' -]+$")
PersonName = text(3, 30, r"^[A-Z][a-z]+ [A-Z][a-z]+$")
"""First and last name, capitalised, letters only: the id is made from it, people call each
other by the first."""


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Premise(_Answer):
    title: text(2, 100)  # type: ignore[valid-type]
    setting: text(2, 800)  # type: ignore[valid-type]
    news: text(2, 500)  # type: ignore[valid-type]


def place_model(letter: str) -> type[BaseModel]:
    """A public place whose name starts with ``letter`` (after an optional "The ")."""
    return create_model(
        f"Place{letter}", __base__=_Answer, name=(text(3, 60, rf"^(The )?{letter}[A-Za-z' -]+$"), ...),
        kind=(text(2, 40, r"^[a-z][a-z ]+$"), ...), description=(Sentence, ...),
        objects=(Annotated[list[ObjectName], Field(min_length=3, max_length=5)], ...))  # type: ignore[valid-type]


class BigFiveDraft(_Answer):
    openness: Level
    conscientiousness: Level
    extraversion: Level
    agreeableness: Level
    neuroticism: Level


class HomeDraft(_Answer):
    description: Sentence
    objects: Annotated[list[ObjectName], Field(min_length=3, max_length=5)]


def town_model(places: int, letters: list[str] | None = None) -> type[BaseModel]:
    """``places`` public places (homes are made for the people later, one per household), the i-th
    named from ``letters[i]`` (``initials``): names then differ by construction (the 135M, asked
    for five places, named three of them alike in six tries of seven topics in ten)."""
    letters = letters or initials(places, 0)
    return create_model("TownDraft", __base__=_Answer,
                        places=(tuple[tuple(place_model(x) for x in letters[:places])], ...))  # type: ignore[misc]


INITIALS = "ABCDEFGHJKLMNPRSTVWY"
"""Letters first names commonly start with; more are added for a cast of over twenty."""


def initials(people: int, seed: int) -> list[str]:
    """A seeded letter per person that their first name starts with: first names then differ by
    construction (a small model asked for six names wrote the same one six times), and the seed
    varies the cast."""
    letters = INITIALS if people <= len(INITIALS) else "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return random.Random(seed).sample(letters, people)


def cast_model(people: int, workplaces: list[str], letters: list[str] | None = None) -> type[BaseModel]:
    """``people`` people, each working at one of ``workplaces`` (place ids) or at none; the i-th
    person's first name starts with ``letters[i]`` (``initials``)."""
    letters = letters or initials(people, 0)

    def member(letter: str) -> type[BaseModel]:
        return create_model(
            f"Cast{letter}", __base__=_Answer, name=(text(3, 30, rf"^{letter}[a-z]+ [A-Z][a-z]+$"), ...),
            age=(Literal[tuple(range(16, 90))], ...),  # type: ignore[valid-type]
            occupation=(text(2, 60, r"^[a-z][a-z' -]+$"), ...),
            workplace=(Literal[(*workplaces, "none")], ...))  # type: ignore[valid-type]
    return create_model("CastDraft", __base__=_Answer,
                        people=(tuple[tuple(member(x) for x in letters[:people])], ...))  # type: ignore[misc]


def person_model(places: list[str], others: list[str], works: bool) -> type[BaseModel]:
    """One person's persona: ``places`` the town's public place ids, ``others`` everyone else's
    ids; ``works``: whether their habits may be at 'work'."""
    habit = create_model(
        "Habit", __base__=_Answer, at=(Literal[HOURS], ...),  # type: ignore[valid-type]
        activity=(text(2, 60, r"^[a-z][a-z' ,-]+$"), ...),
        place=(Literal[("home", *(("work",) if works else ()), *places)], ...))  # type: ignore[valid-type]
    relation = create_model("Relation", __base__=_Answer,
                            person=(Literal[tuple(others)], ...), view=(Sentence, ...))  # type: ignore[valid-type]
    return create_model(
        "PersonDraft", __base__=_Answer,
        traits=(Annotated[list[text(2, 60, r"^[a-z][a-z-]+$")],  # type: ignore[valid-type]
                          Field(min_length=3, max_length=6)], ...),
        big_five=(BigFiveDraft, ...),
        social_identity=(Paragraph, ...), personal_identity=(Paragraph, ...), life_context=(Paragraph, ...),
        backstory=(Paragraph, ...), speaking_style=(Sentence, ...), aspiration=(Sentence, ...),
        skills=(Annotated[list[text(2, 60, r"^[a-z][a-z' -]+$")],  # type: ignore[valid-type]
                          Field(min_length=2, max_length=4)], ...),
        wake=(Literal[WAKE], ...), sleep=(Literal[SLEEP], ...),  # type: ignore[valid-type]
        day=(Annotated[list[habit], Field(min_length=3, max_length=8)], ...),  # type: ignore[valid-type]
        relationships=(Annotated[list[relation], Field(min_length=1, max_length=min(3, len(others)))], ...),  # type: ignore[valid-type]
        memories=(Annotated[list[Sentence], Field(min_length=2, max_length=4)], ...),
        home=(HomeDraft, ...))


def news_model(places: list[str], days: list[date], starts: tuple[str, ...], people: list[str]) -> type[BaseModel]:
    """The fact whose spread the run traces: where and when it happens (among ``places``,
    ``days`` and ``starts``), who hears it first (one of ``people``), their thought, and the
    probe question."""
    return create_model(
        "NewsDraft", __base__=_Answer,
        name=(text(2, 60, r"^[A-Za-z][A-Za-z' -]+$"), ...),
        text=(text(10, 600), ...),
        place=(Literal[tuple(places)], ...),  # type: ignore[valid-type]
        day=(Literal[tuple(d.isoformat() for d in days)], ...),  # type: ignore[valid-type]
        starts=(Literal[starts], ...),  # type: ignore[valid-type]
        hours=(Literal[1, 2, 3], ...),
        first_to_know=(Literal[tuple(people)], ...),  # type: ignore[valid-type]
        thought=(text(5, 600), ...),
        question=(text(5, 300, r"^[A-Z][^\"\\]+\?$"), ...))


def beats_model(people: list[str]) -> type[BaseModel]:
    """The story's two beats: who the news must reach before it happens, and how many come."""
    return create_model(
        "BeatsDraft", __base__=_Answer,
        reach_what=(Sentence, ...),
        reach_people=(Annotated[list[Literal[tuple(people)]], Field(min_length=1, max_length=len(people))], ...),  # type: ignore[valid-type]
        gather_what=(Sentence, ...),
        gather_count=(Literal[tuple(range(2, len(people) + 1))], ...))  # type: ignore[valid-type]
