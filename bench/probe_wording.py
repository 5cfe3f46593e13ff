"""Does the probe's answer step say what the person remembers, worded another way? Re-asked from finished runs.

    .venv/bin/python bench/probe_wording.py bench-out/named-measure --model .cache/measure-model/*.gguf \
        --samples 3 [--wordings current,how,recall]

A person who recognises a probe question (``cognition/probe.py``) is shown the memories that made
it familiar and asked the last instruction of ``probe.j2`` ("what X remembers about it ..., or that
X does not know"). On the 1.5B, one in four aware people answered "I do not know." with the news
in front of them (the host whose party it is, asked "who told Isabella"). This takes every probe
call a run made (the ``llm_calls`` row behind each fact probe: its messages, seed, temperature and
schema), swaps that last instruction for each wording of ``bench/probe-wordings.yaml``, asks the
model ``--samples`` times (the call's own seed, then the next ones) and scores every answer with
the instrument's own rule (``provenance.probes.score_answer``, strict), so wordings are compared on
the same people, the same memories and the same seeds. The first sample of the run's own wording is
the run's answer again (printed as a check that the re-ask is faithful).

Prints, per wording: the aware people's verdicts (right / partial / mixed / wrong / missed) with
the right share and its 95 % interval (bootstrap over people), the paired difference in right
share against the first wording (same people, same seeds), and the verdicts of the unaware who
were recognised (honest / invented). Only the people recognition let through are asked here; the
unaware it stopped say "I have not heard anything about that." whatever the wording.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import yaml
from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulation.llm.types import LLMRequest  # noqa: E402
from simulation.provenance.details import DetailReader  # noqa: E402
from simulation.provenance.probes import score_answer  # noqa: E402
from simulation.provenance.rescore import probe_scoring  # noqa: E402
from simulation.provenance.rules import AWARE_VERDICTS, UNAWARE_VERDICTS  # noqa: E402

WORDINGS = Path(__file__).with_name("probe-wordings.yaml")
ASKED = re.compile(r'Someone asks (.+?): "')
NOW = re.compile(r"It is ([A-Za-z]+ \d+ [A-Za-z]+), \d\d:\d\d\. .*\n(There: .*\n)?")


@dataclass
class Probe:
    """One fact probe a run asked the model: who, what they were shown, how it is scored."""

    run: str
    agent: str
    aware: bool
    question: str
    messages: list[dict[str, str]]
    request: dict
    reader: DetailReader
    details: tuple
    when: date
    answer: str
    seed: int

    def ask(self, wording: str | dict, seed: int) -> LLMRequest:
        """The run's own call with its last instruction replaced and another seed; a wording with
        ``date_only`` also says only the day in the situation, not the hour, the place and what is there;
        one with ``temperature`` asks at that temperature instead of the run's (0: the model's most likely answer)."""
        spec = wording if isinstance(wording, dict) else {"instruction": wording}
        first = ASKED.search(self.messages[-2]["content"] if len(self.messages) > 1 else "")
        text = spec["instruction"].format(first=first.group(1) if first else "they")
        msgs = [dict(m) for m in self.messages[:-1]]
        if spec.get("date_only"):
            msgs[-1]["content"] = NOW.sub(r"It is \1.\n", msgs[-1]["content"], count=1)
        msgs.append({"role": "user", "content": text})
        request = {**self.request, **({"temperature": spec["temperature"]} if "temperature" in spec else {})}
        return LLMRequest(messages=msgs, seed=seed, **request)

    def score(self, answer: str, ok: bool = True) -> str:
        return score_answer(self.reader, answer, self.question, self.details, self.when, self.aware, ok=ok).verdict


def probes(run_db: Path) -> list[Probe]:
    """The fact probes of a run that asked the model (recognised people), with their calls."""
    con = sqlite3.connect(f"file:{run_db}?mode=ro", uri=True)
    run_id = con.execute("select run_id from runs").fetchone()[0]
    scoring = probe_scoring(con, run_id)
    if scoring is None:
        return []
    reader, facts = scoring
    out = []
    for agent, question, answer, fact_id, aware, sim_time, msgs, schema, seed, temp, max_tokens in con.execute(
            "select p.agent_id, p.question, p.answer, p.fact_id, p.aware, p.sim_time, c.messages, c.json_schema, "
            "c.seed, c.temperature, c.max_tokens from probes p join llm_calls c on c.id = p.llm_call_id "
            "where p.fact_id is not null and p.aware is not null order by p.id"):
        messages = json.loads(msgs)
        if not messages or not messages[-1]["content"].startswith("Answer as "):
            continue  # the yes-or-no step of recognition off: not this answer step
        out.append(Probe(run_id, agent, bool(aware), question, messages,
                         {"json_schema": json.loads(schema) if schema else None, "temperature": temp,
                          "max_tokens": max_tokens, "purpose": "probe_wording", "agent_id": agent},
                         reader, facts.get(fact_id, ()), date.fromisoformat(sim_time[:10]), answer or "", seed))
    return out


def greedy(wording: str | dict) -> bool:
    """Whether a wording asks at temperature 0, where every sample is the same answer."""
    return isinstance(wording, dict) and wording.get("temperature") == 0


def parse(text: str) -> tuple[str, bool]:
    try:
        value = json.loads(text)
        return str(value["answer"]), True
    except (ValueError, KeyError, TypeError):
        return "(no usable answer)", False


def interval(rights: np.ndarray, rng: np.random.Generator, n: int = 2000) -> tuple[float, float]:
    """95 % bootstrap interval of the mean over people (rows: people, columns: samples)."""
    if len(rights) == 0:
        return float("nan"), float("nan")
    means = [rights[rng.integers(0, len(rights), len(rights))].mean() for _ in range(n)]
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="bench behaviour --out folders (their runs/)")
    ap.add_argument("--model", help="GGUF the runs were made with (default: the bundled model)")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--wordings", help="comma-separated names from bench/probe-wordings.yaml (default: all)")
    ap.add_argument("--context", type=int, default=2048, help="context tokens (the scenarios' llm.context_tokens)")
    args = ap.parse_args()
    wordings: dict[str, str | dict] = yaml.safe_load(WORDINGS.read_text())
    names = args.wordings.split(",") if args.wordings else list(wordings)
    rows = [p for report in args.reports for db in sorted(report.glob("runs/*/run.db")) for p in probes(db)]
    if not rows:
        raise SystemExit("no probe calls found (recognition stopped everyone, or no runs/ under the reports)")
    from simulation.llm.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(model=args.model, context_tokens=args.context)
    console = Console()
    # one probe's wordings and samples side by side: they share the prompt up to the last instruction,
    # which the backend's prefix cache then evaluates once
    # at temperature 0 every sample is the first: asked once, counted for each
    requests = [(w, i, k, p.ask(wordings[w], p.seed + k))
                for i, p in enumerate(rows) for w in names for k in range(args.samples)
                if k == 0 or not greedy(wordings[w])]
    verdicts: dict[tuple[str, int, int], str] = {}
    answers: dict[tuple[str, int, int], str] = {}
    with Progress(console=console) as bar:
        task = bar.add_task(f"{len(rows)} probes x {len(names)} wordings x {args.samples}", total=len(requests))
        step = 16
        for start in range(0, len(requests), step):
            chunk = requests[start:start + step]
            for (w, i, k, _), done in zip(chunk, backend.generate([r for *_, r in chunk])):
                text, ok = parse(done.text)
                verdicts[w, i, k] = rows[i].score(text, ok)
                answers[w, i, k] = text
            bar.advance(task, len(chunk))
    for w in filter(lambda w: greedy(wordings[w]), names):
        for i in range(len(rows)):
            for k in range(1, args.samples):
                verdicts[w, i, k], answers[w, i, k] = verdicts[w, i, 0], answers[w, i, 0]
    backend.close()
    same = sum(answers[names[0], i, 0] == p.answer for i, p in enumerate(rows))
    console.print(f"check: {same} of {len(rows)} first samples of '{names[0]}' equal the run's stored answer")
    rng = np.random.default_rng(0)
    aware = [i for i, p in enumerate(rows) if p.aware]
    unaware = [i for i, p in enumerate(rows) if not p.aware]
    base = np.array([[verdicts[names[0], i, k] == "right" for k in range(args.samples)] for i in aware], float)
    print(f"\n{len(aware)} aware and {len(unaware)} recognised unaware probes from {len({p.run for p in rows})} runs, "
          f"{args.samples} samples each\n")
    print("| wording | aware: " + " / ".join(AWARE_VERDICTS) + " | right share [95 %] | vs first [95 %] | "
          "unaware: " + " / ".join(UNAWARE_VERDICTS) + " |\n|---|---|---|---|---|")
    for w in names:
        counts = Counter(verdicts[w, i, k] for i in aware for k in range(args.samples))
        ucounts = Counter(verdicts[w, i, k] for i in unaware for k in range(args.samples))
        right = np.array([[verdicts[w, i, k] == "right" for k in range(args.samples)] for i in aware], float)
        lo, hi = interval(right.mean(axis=1), rng)
        dlo, dhi = interval((right - base).mean(axis=1), rng)
        print(f"| {w} | " + " / ".join(str(counts[v]) for v in AWARE_VERDICTS) + f" (+{counts['failed']} failed) | "
              f"{right.mean():.2f} [{lo:.2f}, {hi:.2f}] | {(right - base).mean():+.2f} [{dlo:+.2f}, {dhi:+.2f}] | "
              + " / ".join(str(ucounts[v]) for v in UNAWARE_VERDICTS) + " |")
    print("\nMisses and unaware answers, by wording:")
    for w in names:
        for i in aware + unaware:
            for k in range(args.samples):
                if verdicts[w, i, k] not in ("right", "honest"):
                    print(f"- {w} {rows[i].agent} ({'aware' if rows[i].aware else 'unaware'}) "
                          f"{verdicts[w, i, k]}: {answers[w, i, k][:150]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
