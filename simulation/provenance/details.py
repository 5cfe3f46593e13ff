"""Reading a fact's details back out of what someone said: kept, mixed, changed or lost.

A fact's details (docs/provenance.md) are typed, so each is checked by a rule rather than by
similarity, and the whole text is read (every value of the detail's kind it names counts):

* a *place* is named by its name (or an alias, or "the cafe" when only it is a cafe); another
  place of the town is another value of the kind (where one place's name lies inside a longer
  one's, "Town Square" in "Town Square Market", only the longer counts);
* a *date* by "February 14", "the 14th", its weekday, "tomorrow" on the day before, "tonight" on
  the day (or an alias such as "Valentine's Day"); any other date, day of the month, weekday or
  relative day ("today" said the day before) is another value;
* a *time* by a clock time inside its range ("5pm", "17:00", "from five to seven"); a clock time
  whose every reading lies outside it ("at 9": neither 09:00 nor 21:00) is another value, and
  one with a reading inside ("at 6": 06:00 or 18:00) counts as right. For a single time
  ("17:00") the end of a range said ("from 5 to 7") is not read: a party that starts at five
  may go on until seven;
* a *text* detail by one of its aliases (it has no other values).

Each detail then reads as **KEPT** (only right values named), **MIXED** (the right value and
another of the same kind: "at Hobbs Cafe or the Rose and Crown"), **CHANGED** (only other
values: "at the pub") or **LOST** (nothing of the kind). A right value named beside a wrong one
is never kept.

Deterministic and standard library only: the tracker uses it on every memory that carries a
fact (distortion: a mixed version counts as changed), and probe scoring on every answer (right,
mixed, wrong, invented; ``probes``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

KEPT, MIXED, CHANGED, LOST = "kept", "mixed", "changed", "lost"
STATES = (KEPT, MIXED, CHANGED, LOST)
"""What ``DetailReader.read`` makes of a detail (see the module's docstring)."""

__all__ = ["CHANGED", "KEPT", "LOST", "MIXED", "STATES", "Detail", "DetailReader", "place_aliases", "times_said"]

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH = r"\b(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)(?![a-z])\.?"  # whole words: "5 marbles" is no date
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
             9: "ninth", 10: "tenth", 11: "eleventh", 12: "twelfth", 13: "thirteenth", 14: "fourteenth",
             15: "fifteenth", 16: "sixteenth", 17: "seventeenth", 18: "eighteenth", 19: "nineteenth",
             20: "twentieth", 21: "twenty-first", 22: "twenty-second", 23: "twenty-third", 24: "twenty-fourth",
             25: "twenty-fifth", 26: "twenty-sixth", 27: "twenty-seventh", 28: "twenty-eighth", 29: "twenty-ninth",
             30: "thirtieth", 31: "thirty-first"}
_NUMBERS = {w: i for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                        "ten", "eleven", "twelve"])}
_HOUR = r"(\d{1,2}|" + "|".join(list(_NUMBERS)[1:]) + r")"
_AMPM = r"(a\.?\s?m\.?|p\.?\s?m\.?)"
_RELATIVE = {"yesterday": -1, "today": 0, "tonight": 0, "this evening": 0, "this afternoon": 0,
             "this morning": 0, "tomorrow": 1, "day after tomorrow": 2}
_DETERMINERS = r"(?:the|her|his|their|my|your|our|[a-z]+'s)"
_RANGE = re.compile(r"\b" + _HOUR + r"(?::([0-5]\d))?\s*" + _AMPM + r"?\s*(?:-|–|to|until|till|and)\s*"
                    + _HOUR + r"(?::([0-5]\d))?\s*(" + _AMPM[1:-1] + r"|o'clock)?")


@dataclass(frozen=True)
class Detail:
    """One checkable detail (the scenario's ``FactDetail`` as plain data)."""

    name: str
    kind: str
    value: str
    aliases: tuple[str, ...] = ()


def _words(phrase: str) -> str:
    """A regex matching ``phrase`` as whole words, any case, any run of spaces, straight or curly apostrophes."""
    parts = [re.escape(w).replace("'", "['’]") for w in phrase.split()]
    return r"(?<![\w])" + r"\s+".join(parts) + r"(?![\w])"


def _norm(text: str) -> str:
    return text.lower().replace("’", "'")


_CONNECTORS = {"and", "of", "the", "on", "at", "in", "&"}


def _short_name(name: str) -> str | None:
    """The name without "The" and its last word ("Rose and Crown" for The Rose and Crown Pub), when
    at least two words remain and they end neither in a connector nor in a possessive (a lone
    "Okafor" or "Isabella's" names a person as much as a place)."""
    words = name.split()
    if words and words[0].lower() == "the":
        words = words[1:]
    words = words[:-1]
    if len(words) < 2 or words[-1].lower() in _CONNECTORS or words[-1].lower().endswith(("'s", "’s")):
        return None
    return " ".join(words)


def place_aliases(places: Mapping[str, tuple[str, str]]) -> dict[str, list[str]]:
    """place id -> the phrases that name it, from (name, kind) per place: the name, the name
    without a leading "The", the name without its last word when at least two words remain and
    no other place's does the same ("Rose and Crown", ``_short_name``), and "the <kind>" (also
    "her <kind>", "Isabella's <kind>") when no other place is of that kind, and likewise the last
    word of the name ("the pub" for The Rose and Crown Pub); a word two places share ("home",
    "house") names neither."""
    nouns = {pid: {kind.lower().strip(), *name.lower().split()[-1:]} - {""} for pid, (name, kind) in places.items()}
    shorts = {pid: _short_name(name) for pid, (name, _) in places.items()}
    out: dict[str, list[str]] = {}
    for pid, (name, _) in places.items():
        names = [name]
        if name.lower().startswith("the "):
            names.append(name[4:])
        short = shorts[pid]
        if short and sum((s or "").lower() == short.lower() for s in shorts.values()) == 1:
            names.append(short)
        for noun in sorted(nouns[pid]):
            if sum(noun in other for other in nouns.values()) == 1:
                names.append(f"\x00{noun}")  # marker: matched after a determiner ("the pub", "her cafe")
        out[pid] = names
    return out


class DetailReader:
    """Reads details in text against one town's places (``place_aliases``)."""

    def __init__(self, places: Mapping[str, Sequence[str]]):
        self._place_patterns = {pid: self._place_regex(names) for pid, names in places.items()}

    @staticmethod
    def _place_regex(names: Iterable[str]) -> re.Pattern[str]:
        parts = []
        for name in names:
            if name.startswith("\x00"):
                parts.append(_DETERMINERS + r"\s+" + _words(name[1:]))
            else:
                parts.append(_words(name))
        return re.compile("|".join(parts), re.IGNORECASE)

    # ------------------------------------------------------------------ one detail

    def read(self, text: str, detail: Detail, when: date | None = None) -> str:
        """KEPT, MIXED, CHANGED or LOST: what the whole of ``text`` (said or written on day
        ``when``) makes of ``detail`` (see the module's docstring)."""
        low = _norm(text)
        aliases = [re.compile(_words(_norm(a))) for a in detail.aliases]
        aliased = any(a.search(low) for a in aliases)
        if detail.kind == "place":
            right, other = self._place(low, detail.value, aliases)
        elif detail.kind == "date":
            right, other = _date(low, date.fromisoformat(detail.value), when)
        elif detail.kind == "time":
            right, other = _time(low, detail.value)
        else:
            right, other = False, False
        return _state(right or aliased, other)

    def read_all(self, text: str, details: Iterable[Detail], when: date | None = None) -> dict[str, str]:
        return {d.name: self.read(text, d, when) for d in details}

    def unnamed(self, text: str, details: Iterable[Detail], when: date | None = None,
                kinds: tuple[str, ...] = ("place", "date")) -> list[Detail]:
        """The details of ``kinds`` that ``text`` does not name (read neither kept nor mixed): a
        fact whose text and details disagree, such as a correction's new text naming the Rose and
        Crown while its place detail is still Hobbs Cafe (``scenario.references``)."""
        return [d for d in details if d.kind in kinds and self.read(text, d, when) not in (KEPT, MIXED)]

    def _place(self, low: str, place_id: str, aliases: Sequence[re.Pattern[str]]) -> tuple[bool, bool]:
        """(the place is named, another place of the town is named). A name inside a longer name
        of another place ("Town Square" in "Town Square Market") is not read on its own."""
        spans = [(m.start(), m.end(), pid) for pid, pattern in self._place_patterns.items()
                 for m in pattern.finditer(low)]
        spans += [(m.start(), m.end(), place_id) for a in aliases for m in a.finditer(low)]
        named = {pid for start, end, pid in spans
                 if not any(p != pid and s <= start and end <= e and e - s > end - start for s, e, p in spans)}
        return place_id in named, bool(named - {place_id})


def _state(right: bool, other: bool) -> str:
    if right:
        return MIXED if other else KEPT
    return CHANGED if other else LOST


# ---------------------------------------------------------------------- dates

def _dates_named(low: str, year: int) -> set[date]:
    found: set[date] = set()
    for m in re.finditer(_MONTH + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b", low):
        found |= _safe_date(year, m.group(1), int(m.group(2)))
    for m in re.finditer(r"\b(\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+" + _MONTH, low):
        found |= _safe_date(year, m.group(2), int(m.group(1)))
    for m in re.finditer(r"\b(\d{4})-(\d{2})-(\d{2})\b", low):
        try:
            found.add(date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        except ValueError:
            pass
    return found


def _safe_date(year: int, month: str, day: int) -> set[date]:
    number = next(i for i, name in enumerate(_MONTHS, 1) if name.startswith(month.rstrip(".")[:3]))
    try:
        return {date(year, number, day)}
    except ValueError:
        return set()


# "the first time", "the second floor": an ordinal before one of these nouns is not a day of the month
_NOT_A_DAY = r"(?!\s+(?:time|times|floor|one|ones|person|people|thing|things|place|step|steps|round|chance|try|" \
             r"week|month|year|hour|half|course|draft|row|grade|guest|guests|song|glass|cup|drink)\b)"


def _date(low: str, target: date, when: date | None) -> tuple[bool, bool]:
    """(the date is named, another date, day of the month, weekday or relative day is)."""
    named = _dates_named(low, target.year)
    days = {m.group(1) for m in re.finditer(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b" + _NOT_A_DAY, low)}
    days |= {str(n) for n, word in _ORDINALS.items() if re.search(r"\bthe\s+" + word + r"\b" + _NOT_A_DAY, low)}
    weekdays = {w for w in _WEEKDAYS if re.search(r"\b" + w + r"s?\b", low)}
    relative = {offset for phrase, offset in _RELATIVE.items() if re.search(_words(phrase), low)}
    if "day after tomorrow" in low:
        relative.discard(1)
    if when is None:
        relative = set()  # "tomorrow" means nothing without the day it was said
    offset = (target - when).days if when is not None else None
    weekday = _WEEKDAYS[target.weekday()]
    right = target in named or str(target.day) in days or weekday in weekdays or offset in relative
    other = bool(named - {target} or days - {str(target.day)} or weekdays - {weekday} or relative - {offset})
    return right, other


# ---------------------------------------------------------------------- times

def _range(value: str) -> tuple[int, int]:
    parts = [p.strip() for p in value.split("-")]
    minutes = [int(p[:2]) * 60 + int(p[3:5]) for p in parts]
    return minutes[0], minutes[-1]


def _hour(token: str) -> int:
    return _NUMBERS[token] if token in _NUMBERS else int(token)


def _candidates(hour: int, minute: int, ampm: str | None) -> set[int]:
    """Minutes after midnight a spoken time may mean (a bare "5" or "5:00" is 05:00 or 17:00)."""
    if hour > 24 or minute > 59:
        return set()
    if ampm:
        if hour > 12 or hour == 0:
            return set()
        hour = hour % 12 + (12 if ampm.startswith("p") else 0)
        return {hour * 60 + minute}
    if hour >= 13:
        return {hour * 60 + minute}
    return {hour * 60 + minute, (hour + 12) % 24 * 60 + minute}


def times_said(low: str) -> list[set[int]]:
    """Each clock time ``low`` names, as the set of minutes-after-midnight it may mean."""
    return [options for options, _ in _times(low)]


def _times(low: str) -> list[tuple[set[int], bool]]:
    """``times_said`` with, for each time, whether it ends a range ("7" in "from 5 to 7")."""
    out: list[tuple[set[int], bool]] = []
    taken: list[tuple[int, int]] = []

    def add(span: tuple[int, int], options: set[int]) -> None:
        if options and not any(a < span[1] and span[0] < b for a, b in taken):
            out.append((options, False))
            taken.append(span)

    # ranges first ("from 5 to 7pm", "5-7pm", "between five and seven"): the end's am/pm applies to both
    for m in _RANGE.finditer(low):
        h1, m1, ap1, h2, m2, ap2 = m.groups()
        ap2 = None if ap2 == "o'clock" else ap2
        if not (m1 or ap1 or m2 or ap2 or "o'clock" in m.group(0)
                or re.search(r"\b(from|between)\s*$", low[: m.start()])):
            continue  # "2 to 3 people" is not a time
        add(m.span(), _candidates(_hour(h1), int(m1 or 0), ap1 or ap2))
        last = _candidates(_hour(h2), int(m2 or 0), ap2)
        if last:
            out.append((last, True))  # the range's end, inside its span
    for m in re.finditer(r"\b" + _HOUR + r"(?::([0-5]\d))?\s*(?:o'clock\s*)?in\s+the\s+(morning|afternoon|evening)", low):
        add(m.span(), _candidates(_hour(m.group(1)), int(m.group(2) or 0), "am" if m.group(3) == "morning" else "pm"))
    for m in re.finditer(r"\b(\d{1,2}):([0-5]\d)\s*" + _AMPM + r"?", low):
        add(m.span(), _candidates(int(m.group(1)), int(m.group(2)), m.group(3)))
    for m in re.finditer(r"\b" + _HOUR + r"\s*(?:" + _AMPM + r"|(o'clock))", low):
        add(m.span(), _candidates(_hour(m.group(1)), 0, m.group(2)))
    for m in re.finditer(r"\bat\s+" + _HOUR + r"\b(?!\s*(?:people|of|minutes|hours|years|days|%))", low):
        add(m.span(), _candidates(_hour(m.group(1)), 0, None))
    for word, minutes in (("noon", 12 * 60), ("midday", 12 * 60), ("midnight", 0)):
        for m in re.finditer(r"\b" + word + r"\b", low):
            add(m.span(), {minutes})
    return out


def _time(low: str, value: str) -> tuple[bool, bool]:
    """(a time with a reading inside the range is named, a time with every reading outside it is).
    For a single time the end of a range said is not read (a party at five may go on to seven)."""
    start, end = _range(value)
    said = [options for options, ends in _times(low) if start < end or not ends]
    right = any(start <= option <= end for options in said for option in options)
    other = any(all(not start <= option <= end for option in options) for options in said)
    return right, other
