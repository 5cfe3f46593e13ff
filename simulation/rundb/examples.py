"""Which lines of a run are the engine's words: its own line for the move, word for word.

Engines up to run.db schema 9 showed the model an example line in the utterance prompt
(``Example: {...}``), and a small model copied it. Today no prompt shows one: the engine's line
for the move (what the no-LLM control says) travels beside the question as ``llm_calls.script``,
unseen by the model. Either way, a line equal to it is the engine talking, not the person.
``talk.example_share`` counts the lines that are that line, and the spread of a fact
is split by whether the line that told someone was the model's own words or the example
(``facts.F.told_own_words``). A line's example is found in the prompt of the LLM call that
wrote it (``utterances.llm_call_id``): a conversation line's ``say``, or, in runs of engines
before the reaction became a drawn choice, the ``detail`` of the reaction whose opening line
started the conversation (today an opening line is a conversation move like any other).

Standard library only (see the package's docstring).
"""

from __future__ import annotations

import json
import re
from typing import Any

from simulation.rundb.connect import column_names

__all__ = ["example_text", "example_utterances", "norm", "script_text"]

_EXAMPLE = re.compile(r"^Example: (\{.*\})\s*$", re.MULTILINE)
_LINE_FIELDS = ("say", "detail")
"""The answer fields that become a spoken line: an utterance's words, a reaction's opening line."""


def norm(text: str) -> str:
    """Words only, lower case: "Hello, Daniel!" and "hello daniel" are the same line."""
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def example_text(messages: str | None) -> str | None:
    """The line of the example answer a prompt showed, normalised (None when it showed none). A
    retried question's messages hold the original prompt first: its example is the one found."""
    found = None
    for message in json.loads(messages or "[]"):
        for match in _EXAMPLE.finditer(message.get("content", "")):
            found = match.group(1)
    if found is None:
        return None
    example = json.loads(found)
    line = next((example[f] for f in _LINE_FIELDS if isinstance(example.get(f), str)), None)
    return None if line is None else norm(line)


def script_text(script: str | None) -> str | None:
    """The line of the engine's unseen script answer (``llm_calls.script``), normalised."""
    if not script:
        return None
    line = json.loads(script).get("say")
    return norm(line) if isinstance(line, str) else None


def example_utterances(con: Any, run_id: str) -> tuple[set[int], int]:
    """(ids of the utterances that are the engine's line for their move: the example their prompt
    showed, or the unseen script line; utterances written by the model and checked): lines with no
    LLM call (a fallback goodbye) are neither."""
    copied: set[int] = set()
    checked = 0
    column = "c.script" if "script" in column_names(con, "llm_calls") else "null"  # schema 10 on
    for utterance_id, text, messages, script in con.execute(
            f"select u.id, u.text, c.messages, {column} from utterances u join llm_calls c on c.id = u.llm_call_id "
            "and c.run_id = u.run_id where u.run_id = ? and c.parse_ok = 1", [run_id]):
        checked += 1
        said = norm(text or "")
        if example_text(messages) == said or script_text(script) == said:
            copied.add(int(utterance_id))
    return copied, checked
