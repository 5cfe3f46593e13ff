"""Reading a fact's details back out of what someone said: kept, lost or changed.

A fact's details (docs/provenance.md) are typed, so each is checked by a rule rather than by
similarity: a *place* is kept when its name (or an alias) is said, changed when another place
of the town is named instead; a *date* when "February 14", "the 14th", its weekday, "tomorrow"
on the day before (or an alias such as "Valentine's Day") is said, changed when another date or
weekday is; a *time* when a clock time inside its range is said ("5pm", "17:00", "from five to
seven"), changed when only times outside it are; a *text* detail when one of its aliases is said.

Deterministic and standard library only: the tracker uses it on every memory that carries a
fact (distortion), and probe scoring on every answer (right, wrong detail, invented).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

KEPT, LOST, CHANGED = "kept", "lost", "changed"

__all__ = ["CHANGED", "KEPT", "LOST", "Detail", "DetailReader", "place_aliases"]

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
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


def place_aliases(places: Mapping[str, tuple[str, str]]) -> dict[str, list[str]]:
    """place id -> the phrases that name it, from (name, kind) per place: the name, the name
    without a leading "The", and "the <kind>" (also "her <kind>", "Isabella's <kind>") when no
    other place is of that kind, and likewise the last word of the name ("the pub" for The Rose and
    Crown Pub); a word two places share ("home", "house") names neither."""
    nouns = {pid: {kind.lower().strip(), *name.lower().split()[-1:]} - {""} for pid, (name, kind) in places.items()}
    out: dict[str, list[str]] = {}
    for pid, (name, _) in places.items():
        names = [name]
        if name.lower().startswith("the "):
            names.append(name[4:])
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
        """KEPT, LOST or CHANGED: what ``text`` (said or written on day ``when``) makes of ``detail``."""
        low = _norm(text)
        if detail.aliases and any(re.search(_words(_norm(a)), low) for a in detail.aliases):
            return KEPT
        if detail.kind == "place":
            return self._place(low, detail.value)
        if detail.kind == "date":
            return _date(low, date.fromisoformat(detail.value), when)
        if detail.kind == "time":
            return _time(low, detail.value)
        return LOST

    def read_all(self, text: str, details: Iterable[Detail], when: date | None = None) -> dict[str, str]:
        return {d.name: self.read(text, d, when) for d in details}

    def _place(self, low: str, place_id: str) -> str:
        own = self._place_patterns.get(place_id)
        if own is not None and own.search(low):
            return KEPT
        if any(p.search(low) for pid, p in self._place_patterns.items() if pid != place_id):
            return CHANGED
        return LOST


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


def _date(low: str, target: date, when: date | None) -> str:
    named = _dates_named(low, target.year)
    days = {m.group(1) for m in re.finditer(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b", low)}
    days |= {str(n) for n, word in _ORDINALS.items() if re.search(r"\bthe\s+" + word + r"\b", low)}
    weekdays = {w for w in _WEEKDAYS if re.search(r"\b" + w + r"s?\b", low)}
    relative = {offset for phrase, offset in _RELATIVE.items() if re.search(_words(phrase), low)}
    if "day after tomorrow" in low:
        relative.discard(1)
    kept = (target in named or str(target.day) in days or _WEEKDAYS[target.weekday()] in weekdays
            or (when is not None and (target - when).days in relative))
    if kept:
        return KEPT
    other = bool(named or days or weekdays or (when is not None and relative))
    return CHANGED if other else LOST


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
    out: list[set[int]] = []
    taken: list[tuple[int, int]] = []

    def add(span: tuple[int, int], options: set[int]) -> None:
        if options and not any(a < span[1] and span[0] < b for a, b in taken):
            out.append(options)
            taken.append(span)

    # ranges first ("from 5 to 7pm", "5-7pm", "between five and seven"): the end's am/pm applies to both
    for m in _RANGE.finditer(low):
        h1, m1, ap1, h2, m2, ap2 = m.groups()
        ap2 = None if ap2 == "o'clock" else ap2
        if not (m1 or ap1 or m2 or ap2 or "o'clock" in m.group(0)
                or re.search(r"\b(from|between)\s*$", low[: m.start()])):
            continue  # "2 to 3 people" is not a time
        add(m.span(), _candidates(_hour(h1), int(m1 or 0), ap1 or ap2))
        out.append(_candidates(_hour(h2), int(m2 or 0), ap2))  # the range's end, inside its span
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


def _time(low: str, value: str) -> str:
    start, end = _range(value)
    said = times_said(low)
    if any(start <= option <= end for options in said for option in options):
        return KEPT
    return CHANGED if said else LOST
