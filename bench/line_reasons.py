"""Why a run's conversation lines were refused: utterance answers by the check that refused them.

Usage: ``python bench/line_reasons.py LABEL=RUN_DIR[,RUN_DIR...] ...`` (a run folder holds run.db).

Why: ``llm.fallback_share.utterance`` says how often a line fell back, not why; a change to the
line's prompt or checks (a label stripped, an indirect question accepted, the working memory laid
out anew) is judged by which refusals it removed and which it added. Counts every utterance
answer, retries included; "own label" counts the usable lines that began with the speaker's own
name as a label (which ``cognition.converse.unlabel`` takes off before the line is said).
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulation.cognition.converse import _label  # noqa: E402  (the label the engine strips)


def reasons(run_dirs: list[Path]) -> tuple[int, int, int, Counter[str]]:
    """(answers, usable, usable that opened with the speaker's own label, refusals by reason)."""
    refused: Counter[str] = Counter()
    answers = usable = labelled = 0
    for run in run_dirs:
        con = sqlite3.connect(f"file:{run / 'run.db'}?mode=ro", uri=True)
        first = {a: str(n).split()[0] for a, n in con.execute("select agent_id, name from agents")}
        rows = con.execute("select parse_error, completion, agent_id, parse_ok from llm_calls where purpose = ?",
                           ["utterance"])
        for error, completion, agent, ok in rows:
            answers += 1
            if not ok:
                refused[error or "unparsed"] += 1
                continue
            usable += 1
            try:
                say = str(json.loads(completion)["say"])
            except (ValueError, KeyError, TypeError):
                continue
            name = re.escape(first.get(agent, ""))
            labelled += bool(name and _label(name).match(say))
        con.close()
    return answers, usable, labelled, refused


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for arg in argv:
        label, _, dirs = arg.partition("=")
        answers, usable, labelled, refused = reasons([Path(d) for d in dirs.split(",") if d])
        print(f"{label}: {answers} answers, {usable} usable ({labelled} with the speaker's own label); refused: "
              + ", ".join(f"{why} {n}" for why, n in refused.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
