"""Name errors in conversation lines: a line that addresses its own speaker, or someone not in
the conversation ("See you later, Isabella!" said by Isabella to Daniel).

A small model copies names from its prompt into the wrong place; a reader notices at once, so the
behaviour report counts it (``talk.name_errors``). A line *addresses* a person when their first
name stands where one calls someone: opening the line before a comma, "!" or "?" ("Daniel, ...");
after a greeting or a farewell ("Good morning Daniel", "Thanks, Daniel"); or closing a clause
after a comma (", Daniel!", ", Daniel?", ", Daniel." at the end). A name merely mentioned ("I saw
Daniel at the pharmacy") is not an address. Only the town's first names are looked for; a name
two people share is left out (it could be either). The engine rejects such a line when it is
written (``cognition.converse.misaddressed``, by the same rule); this counts what got through.
"""

from __future__ import annotations

import re
from functools import lru_cache
from collections import Counter
from typing import Any

GREETINGS = (r"hi|hello|hey|morning|good morning|good afternoon|good evening|good night|evening|thanks|thank you|"
             r"bye|goodbye|good bye|see you|see you later|see you soon|see you then|dear|welcome|oh|well|yes|no|sorry|"
             r"excuse me|congratulations|cheers")


@lru_cache(maxsize=4096)
def _address(name: str) -> re.Pattern[str]:
    """Compiled once per name: the engine checks every line against the whole town's names."""
    n = re.escape(name)
    return re.compile(
        rf"(?:^\W*{n}\s*[,!?:]"                                  # "Daniel, ..." opening the line
        rf"|\b(?:{GREETINGS})\s*,?\s+{n}\b"                       # "Good morning Daniel", "Thanks, Daniel"
        rf"|,\s*{n}\s*(?:[!?]|\.(?:\s|$)|$|,\s*(?:I|I'm|I'll|we|you|please|how|what|did|have|do)\b))",
        re.IGNORECASE)


def addressed(text: str, names: list[str]) -> set[str]:
    """The names in ``names`` that ``text`` addresses (see the module's rule)."""
    return {name for name in names if _address(name).search(text)}


def name_errors(con: Any, run_id: str) -> tuple[list[tuple[int, str]], int]:
    """(the lines with a name error as (utterance id, what is wrong), lines read)."""
    first: dict[str, str] = {}
    for agent_id, name in con.execute("select agent_id, name from agents where run_id = ?", [run_id]):
        first[agent_id] = str(name).split()[0]
    counts = Counter(first.values())
    unique = sorted(n for n, c in counts.items() if c == 1)
    wrong: list[tuple[int, str]] = []
    lines = 0
    for uid, speaker, listener, text in con.execute(
            "select id, speaker_id, listener_id, text from utterances where run_id = ? order by id", [run_id]):
        lines += 1
        me, other = first.get(speaker), first.get(listener)
        for name in sorted(addressed(text or "", unique)):
            if name == other:
                continue
            wrong.append((int(uid), f"addresses {'the speaker' if name == me else 'someone not in it'}: {name}"))
            break
    return wrong, lines


__all__ = ["addressed", "name_errors"]
