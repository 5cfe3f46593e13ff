"""`agora scenario new` over twenty topics: how many come out valid, in how many calls and how long.

    .venv/bin/python bench/scenario_new.py --out bench-out/scenario-new-bundled          # bundled 135M
    .venv/bin/python bench/scenario_new.py --model measure --out bench-out/scenario-new-measure   # the 1.5B

Each line of ``bench/topics/topics.txt`` is drafted with the same options (``--people``,
``--places``, ``--seed``), the replay cache off, one topic after another in this process, and the
machine's own prompt and generation speed on the model is measured first (``bench/day.py``'s
``machine_speed``) and printed beside the times. Per topic: valid or not (the last problems when
not), rounds of validation, pieces asked again, LLM calls, prompt and generated tokens, seconds;
and three plain signs of what the text is worth, since valid is not good: how many people's
backstories are distinct, whether the news' text names its place, and the share of identity and
backstory fields of a word or two. The valid files are kept in
``OUT/scenarios/``, the invalid drafts beside them. Writes ``results.csv`` and ``report.md``.
Run it on an idle machine: llama.cpp slows by 10x or more beside another process.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import yaml  # noqa: E402
from day import machine_speed, model_path  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from simulation import authoring  # noqa: E402
from simulation.llm import registry  # noqa: E402
from simulation.llm.factory import build_backend  # noqa: E402
from simulation.llm.client import LLMClient  # noqa: E402
from simulation.llm.llamacpp import LlamaCppBackend  # noqa: E402
from simulation.population.names import slug  # noqa: E402

TOPICS = ROOT / "bench" / "topics" / "topics.txt"


def topics(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


FIELDS = ("social_identity", "personal_identity", "life_context", "backstory")


def signs(text: str) -> tuple[int, int, bool, float]:
    """People, distinct backstories among them, whether the fact's text names its place, and the
    share of the people's identity and backstory fields under 20 characters (a word or two)."""
    data = yaml.safe_load(text)
    stories = [p["persona"]["backstory"].strip().lower() for p in data["personas"]]
    fields = [p["persona"].get(f, "") for p in data["personas"] for f in FIELDS]
    short = sum(len(f.strip()) < 20 for f in fields) / len(fields)
    fact = data["facts"][0]
    place = next(p for p in data["town"]["places"] if p["id"] == fact["details"][0]["value"])
    named = any(w.lower() in fact["text"].lower() for w in place["name"].split() if len(w) > 3)
    return len(stories), len(set(stories)), named, round(short, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="'measure' (the 1.5B) or a GGUF path; default the bundled model")
    ap.add_argument("--topics", type=Path, default=TOPICS)
    ap.add_argument("--people", type=int, default=6)
    ap.add_argument("--places", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--only", type=int, default=0, help="the first N topics only")
    ap.add_argument("--after", type=int, default=0, help="skip the first N topics (a bench continued; its rows are "
                    "kept from OUT/results.csv)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    console = Console()
    model = model_path(args.model)
    settings = registry.default_settings().model_copy(update={
        "cache": "off", "max_tokens": authoring.drafter.MAX_TOKENS, "context_tokens": 4096,
        **({"model": str(model)} if model else {})})
    backend = build_backend(settings, ROOT)
    pp, tg = machine_speed(backend, console) if isinstance(backend, LlamaCppBackend) else (0.0, 0.0)
    (args.out / "scenarios").mkdir(parents=True, exist_ok=True)
    every = topics(args.topics)
    chosen = every[args.after: args.only or None]
    options = authoring.DraftOptions(people=args.people, places=args.places, seed=args.seed, tries=args.tries)
    rows: list[dict] = []
    if args.after and (args.out / "results.csv").exists():
        with open(args.out / "results.csv") as f:
            rows = list(csv.DictReader(f))[: args.after]
        for r in rows:
            r["valid"] = r["valid"] == "True"
            r["seconds"] = float(r["seconds"])
            for k in ("rounds", "asked_again", "calls", "prompt_tokens", "generated_tokens", "people",
                      "distinct_backstories"):
                r[k] = int(r[k])
    progress = Progress(TextColumn("[bold]topics"), MofNCompleteColumn(), BarColumn(), TimeElapsedColumn(),
                        TextColumn("{task.description}"), console=console)
    with progress:
        task = progress.add_task("", total=len(chosen))
        for i, topic in enumerate(chosen, args.after + 1):
            progress.update(task, description=topic[:50])
            client = LLMClient(backend, run_seed=args.seed, max_tokens=settings.max_tokens)
            name = f"{i:02d}-{slug(topic)[:40]}"
            began = time.perf_counter()
            row = {"topic": topic, "file": "", "valid": False, "rounds": 0, "asked_again": 0, "calls": 0,
                   "prompt_tokens": 0, "generated_tokens": 0, "seconds": 0.0, "people": 0,
                   "distinct_backstories": 0, "news_names_place": "", "short_fields": "", "problem": ""}
            try:
                drafted = authoring.draft(topic, client, options, settings.model or backend.model_id,
                                          authoring.loader_problems(str(args.out / "scenarios" / f"{name}.yaml")))
                path = args.out / "scenarios" / f"{name}.yaml"
                path.write_text(drafted.text, "utf-8")
                people, distinct, named, short = signs(drafted.text)
                row.update(file=str(path.relative_to(args.out)), valid=True, rounds=drafted.rounds,
                           asked_again=sum(drafted.asked_again.values()), people=people,
                           distinct_backstories=distinct, news_names_place=named, short_fields=short)
            except authoring.DraftFailed as exc:
                row["problem"] = "; ".join(exc.problems)[:300]
                if exc.text:
                    (args.out / "scenarios" / f"{name}.invalid.yaml").write_text(exc.text, "utf-8")
            s = client.stats
            row.update(calls=s.calls, prompt_tokens=s.prompt_tokens, generated_tokens=s.completion_tokens,
                       seconds=round(time.perf_counter() - began, 1))
            rows.append(row)
            console.print(f"{i:2d} {'valid' if row['valid'] else 'FAILED':6s} {row['seconds']:6.0f} s "
                          f"{row['calls']:3d} calls  {topic}" + (f"  [{row['problem'][:120]}]" if row['problem'] else ""),
                          highlight=False, markup=False)
            progress.advance(task)
            write(rows, args, settings.model or "bundled SmolLM2-135M-Instruct Q4_1", pp, tg,
                  len(every[: args.only or None]))
    backend.close()
    console.print(f"wrote {args.out / 'report.md'}")


def write(rows: list[dict], args: argparse.Namespace, model: str, pp: float, tg: float, planned: int) -> None:
    """results.csv and report.md after every topic, so a stopped bench keeps what it measured."""
    with open(args.out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    report(rows, args, model, pp, tg, planned)


def report(rows: list[dict], args: argparse.Namespace, model: str, pp: float, tg: float, planned: int) -> None:
    valid = [r for r in rows if r["valid"]]
    secs = sorted(r["seconds"] for r in rows)
    lines = [
        f"# `agora scenario new` on {len(rows)} topics: {Path(str(model)).name}", "",
        f"Made by: `.venv/bin/python bench/scenario_new.py {'--model ' + args.model + ' ' if args.model else ''}"
        f"--people {args.people} --places {args.places} --seed {args.seed} --tries {args.tries} --out {args.out}` "
        f"(replay cache off; topics in bench/topics/topics.txt).", "",
        f"This machine on this model: **{pp:.0f} prompt tokens/s, {tg:.0f} generated tokens/s** (one stream, "
        "bench/day.py's measure).", "",
        *([f"**Stopped after {len(rows)} of {planned} topics.**", ""] if len(rows) < planned else []),
        f"**Valid: {len(valid)} of {len(rows)}.** Median time per topic {secs[len(secs) // 2]:.0f} s "
        f"(range {secs[0]:.0f}-{secs[-1]:.0f} s); {sum(r['calls'] for r in rows)} LLM calls in all.", "",
        "| # | topic | valid | rounds | asked again | calls | prompt tok | generated tok | s | distinct backstories "
        "| news names its place | identity fields under 20 chars | last problem |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(f"| {i} | {r['topic']} | {'yes' if r['valid'] else '**no**'} | {r['rounds']} | "
                     f"{r['asked_again']} | {r['calls']} | {r['prompt_tokens']} | {r['generated_tokens']} | "
                     f"{r['seconds']:.0f} | {str(r['distinct_backstories']) + ' of ' + str(r['people']) if r['valid'] else ''} | "
                     f"{r['news_names_place'] if r['valid'] else ''} | {r['short_fields']} | {r['problem'].replace('|', '/')[:160]} |")
    (args.out / "report.md").write_text("\n".join(lines) + "\n", "utf-8")


if __name__ == "__main__":
    main()
