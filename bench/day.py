"""A game day of the 25-person town on two CPU cores: where the time goes, game hour by game hour.

    .venv/bin/python bench/day.py                          # 25 people, 07:00 to 23:00, bundled model
    .venv/bin/python bench/day.py --hours 2 --agents 8     # a shorter look
    .venv/bin/python bench/day.py --scripted --hours 1     # the scripted test double: a quick check
    .venv/bin/python bench/day.py --model measure --hours 4   # the 1.5B measurement model (make measure-model)
    .venv/bin/python bench/day.py --model PATH.gguf        # any GGUF

The flagship's eight people and seventeen townsfolk (``bench/town.py``'s town), replay cache off,
from 07:00 for ``--hours`` game hours. Per game hour it prints the wall time, LLM calls, prompt
tokens (run.db), of which evaluated (the prompt tokens the backend decoded in chunks) and
reused from a cached prefix (the rest), generated tokens, and the share of wall time spent
outside the LLM; then the totals and **the physical limit**: the evaluated tokens at this machine's
own prompt speed, and generation at its one-stream speed per decode step (a step generates one
token of every answer of a batch; its tokens cannot go faster than prompt speed either), both
measured in the same process before the day starts and again after it (the limit takes the
faster of the two: the host's speed drifts). The wall time cannot go below it without
evaluating fewer tokens or taking fewer steps, so the gap between the two is what sampling, the
engine and the backend's bookkeeping cost.

The goals (issue 34, an idle 2-core machine): the day in at most 45 minutes on the 1.5B measurement
model and 12 on the bundled model, at most 450 evaluated prompt tokens per person per game hour, and
a wall time at most 1.25 times the physical limit. Writes ``day.json``, ``day.csv`` and ``day.png``
into ``--out``, after every game hour (marked ``partial`` until the last), so a run stopped
part-way keeps its finished hours. Run it on an idle machine: llama.cpp slows by 10x or more beside another process.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402
from town import Timed, town_of, warm_embedder  # noqa: E402

from simulation import Simulation  # noqa: E402
from simulation.llm.factory import build_backend  # noqa: E402
from simulation.llm.llamacpp import LlamaCppBackend  # noqa: E402

MEASURE_MODEL = ROOT / ".cache" / "measure-model" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
"""What ``--model measure`` means: the Makefile's ``make measure-model`` target writes it there."""

GOAL_EVALUATED = 450
GOAL_DAY_S = {"bundled": 12 * 60, "measurement": 45 * 60}
"""Issue 34's goals for the whole day, by model (the bundled model, the measurement model)."""
GOAL_LIMIT = 1.25


@dataclass
class Hour:
    hour: str
    wall_s: float
    llm_s: float
    calls: int
    prompt: int
    evaluated: int
    reused: int
    generated: int
    llama_prompt: int
    """Tokens llama.cpp decoded in batches (prompt pieces), by its own counters: ``evaluated``."""
    llama_single: int
    """Tokens decoded one per sequence: generated, scored options, one-token prompt rests."""
    steps: int
    """Generation decode steps: each decodes one token of every answer being generated together."""
    eval_s: float = 0.0
    """Seconds inside llama_decode evaluating prompts (and scored options)."""
    step_s: float = 0.0
    """Seconds inside llama_decode for generation steps."""

    @property
    def outside(self) -> float:
        return 1 - self.llm_s / self.wall_s if self.wall_s else 0.0

    @property
    def reused_share(self) -> float:
        return self.reused / self.prompt if self.prompt else 0.0


def machine_speed(backend: LlamaCppBackend, console: Console) -> tuple[float, float]:
    """Prompt and generation tokens per second of this machine on this model: one cold 512-token
    prompt, then 64 generated tokens (no grammar), three times; the best of three. Measured on the
    thread the backend's calls compute on (``offthread.call``): a decode on a second thread makes
    GNU OpenMP stop spin-waiting, and every later decode step of the day took 1.8 times as long."""
    from simulation.llm import offthread

    return offthread.call(lambda: _machine_speed(backend, console))


def _machine_speed(backend: LlamaCppBackend, console: Console) -> tuple[float, float]:
    filler = " ".join(f"word{i}" for i in range(400))
    best_pp = best_tg = 0.0
    llm = backend._llm
    prompt = llm.tokenize(filler.encode(), add_bos=False)[:512]
    for _ in range(3):
        llm.reset()
        start = time.perf_counter()
        llm.eval(prompt)
        best_pp = max(best_pp, len(prompt) / (time.perf_counter() - start))
        llm.reset()
        llm.eval(prompt[:16])
        start = time.perf_counter()
        for token in prompt[16:80]:
            llm.eval([token])
        best_tg = max(best_tg, 64 / (time.perf_counter() - start))
    llm.reset()
    if hasattr(backend, "prefix"):
        backend.prefix.forget()
    console.print(f"this machine: {best_pp:.0f} prompt tokens/s, {best_tg:.0f} generated tokens/s "
                  f"({backend.model_id}, one stream)")
    return best_pp, best_tg


def decode_counters(backend: object) -> tuple[int, int, int, float, float]:
    """Tokens the backend's sequences decoded since the model was loaded: prompt pieces (chunks of
    more than one token, what llama.cpp's own counter calls prompt evaluation), one at a time
    (scored options, one-token prompt rests) plus generated, and generation decode steps (each
    step decodes one token of every answer being generated together); then the seconds inside
    llama_decode for prompts and for generation steps. Zeros for another backend."""
    seqs = getattr(backend, "seqs", None)
    if seqs is None:
        return 0, 0, 0, 0.0, 0.0
    return seqs.evaluated, seqs.singles + seqs.stepped, seqs.steps, seqs.eval_s, seqs.step_s


def model_path(choice: str | None) -> Path | None:
    """``--model``: None (the bundled model), ``measure`` (the measurement model) or a GGUF path."""
    if choice is None:
        return None
    path = MEASURE_MODEL if choice == "measure" else Path(choice).expanduser().resolve()
    if not path.is_file():
        sys.exit(f"no model file at {path}" + (" (make measure-model fetches it)" if choice == "measure" else ""))
    return path


def run_day(agents: int, hours: int, scripted: bool, out: Path, console: Console,
            model: Path | None = None, live: bool = False,
            on_hour: Callable[[list[Hour], dict], None] | None = None) -> tuple[list[Hour], dict]:
    """The town for ``hours`` game hours; per game hour the wall and LLM seconds and llama.cpp's
    decode counters at its end, then the calls and tokens of its ticks from run.db. ``live``:
    with ``cognition.live_context`` (a person's working memory, ``cognition.working``).
    ``on_hour`` gets the finished hours after each one, so a run stopped part-way (a 1.5B day
    takes hours) still leaves its tables."""
    loaded = town_of(agents)
    sc = loaded.scenario.model_copy(deep=True)
    if model is not None:
        sc.llm = sc.llm.model_copy(update={"model": str(model)})
    sc.cognition = sc.cognition.model_copy(update={"live_context": live})
    loaded = loaded.model_copy(update={"scenario": sc})
    tick_minutes = loaded.scenario.clock.tick_minutes
    ticks = hours * 60 // tick_minutes
    per_hour = 60 // tick_minutes
    if scripted:
        from scripted import ScriptedBackend

        inner = ScriptedBackend()
    else:
        inner = build_backend(loaded.scenario.llm, Path(loaded.path).parent)
    speeds = machine_speed(inner, console) if isinstance(inner, LlamaCppBackend) else (0.0, 0.0)
    backend = Timed(inner)
    marks: list[tuple[float, float, tuple[int, int]]] = []
    try:
        with Simulation.from_scenario(loaded, backend=backend, out=out, ticks=ticks) as sim, Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("ticks"),
                TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task(f"{agents} people, {hours} game hours", total=ticks)
            marks.append((time.perf_counter(), backend.seconds, decode_counters(inner)))

            def per_tick(s: Simulation) -> dict[int, tuple]:
                return {r[0]: r[1:] for r in s.db.conn.execute(
                    "select tick, count(*), sum(prompt_tokens), sum(completion_tokens) from llm_calls "
                    "where run_id = ? and tick < ? and purpose not like 'probe%' group by tick",
                    [s.run_id, ticks])}

            def info(s: Simulation) -> dict:
                counted = getattr(inner, "tokens", None)
                return {"agents": agents, "hours": hours, "ticks": ticks, "prompt_tok_s": speeds[0],
                        "generated_tok_s": speeds[1], "run_dir": str(s.run_dir), "model": inner.model_id,
                        "backend_counted": vars(counted) if counted is not None else None}

            def on_tick(s: Simulation) -> None:
                bar.update(task, advance=1, description=f"{agents} people, {s.now:%H:%M}")
                if (s.tick + 1) % per_hour == 0 or s.tick + 1 == ticks:
                    marks.append((time.perf_counter(), backend.seconds, decode_counters(inner)))
                    if on_hour is not None and s.tick + 1 < ticks:
                        on_hour(hour_rows(marks, per_tick(s), per_hour, start.hour, bool(speeds[0])), info(s))

            start = loaded.scenario.clock.start
            sim.run(on_tick=on_tick)
            rows = hour_rows(marks, per_tick(sim), per_hour, start.hour, bool(speeds[0]))
            facts = info(sim)
            if isinstance(inner, LlamaCppBackend):
                # measured again after the day: the host's speed drifts (39 and 43 tokens/s in two runs
                # of one afternoon), and the limit is taken at the faster of the two, so a slow moment
                # at the start never flatters the wall / limit ratio
                after = machine_speed(inner, console)
                facts["speed_before"], facts["speed_after"] = list(speeds), list(after)
                facts["prompt_tok_s"] = max(speeds[0], after[0])
                facts["generated_tok_s"] = max(speeds[1], after[1])
    finally:
        backend.close()
    return rows, facts


def hour_rows(marks: list[tuple[float, float, tuple]], per_tick: dict[int, tuple], per_hour: int,
              first_hour: int, counted: bool) -> list[Hour]:
    """One row per finished game hour: the wall, LLM seconds and decode counters between two marks,
    and the calls and tokens of the hour's ticks from run.db. ``counted``: the backend keeps
    llama.cpp's decode counters (evaluated is zero for another backend)."""
    rows = []
    for h in range(len(marks) - 1):
        (t0, l0, d0), (t1, l1, d1) = marks[h], marks[h + 1]
        sums = [sum(per_tick.get(t, (0, 0, 0))[i] or 0 for t in range(h * per_hour, (h + 1) * per_hour))
                for i in range(3)]
        evaluated = d1[0] - d0[0] if counted else 0
        rows.append(Hour(f"{first_hour + h:02d}:00", t1 - t0, l1 - l0, sums[0], sums[1], evaluated,
                         max(0, sums[1] - evaluated) if counted else 0, sums[2], d1[0] - d0[0], d1[1] - d0[1],
                         d1[2] - d0[2], d1[3] - d0[3], d1[4] - d0[4]))
    return rows


def limit_s(evaluated: int, generated: int, steps: int, pp: float, tg: float) -> float:
    """The floor on the LLM's time: evaluated prompt tokens at the machine's prompt speed, and
    generation, whose decode steps (one token of each answer generated together) cost at least a
    one-token decode each and their tokens at least the prompt speed."""
    if not pp:
        return 0.0
    return evaluated / pp + max(generated / pp, steps / tg if tg else 0.0)


def report(rows: list[Hour], info: dict, out: Path, console: Console) -> None:
    pp, tg, n = info["prompt_tok_s"], info["generated_tok_s"], info["agents"]
    live = ", live contexts" if info.get("live_context") else ""
    part = f"; partial: {info['partial']}" if info.get("partial") else ""
    table = Table(title=f"{n} people, {info['hours']} game hours from 07:00 ({info['model']}{live}, "
                        f"replay cache off{part})")
    for col in ("game hour", "wall s", "calls", "prompt tok", "evaluated", "reused", "generated",
                "eval/person", "outside LLM", "limit s"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r.hour, f"{r.wall_s:.0f}", str(r.calls), f"{r.prompt:,}", f"{r.evaluated:,}",
                      f"{r.reused_share:.0%}", f"{r.generated:,}", f"{r.evaluated / n:,.0f}", f"{r.outside:.1%}",
                      f"{limit_s(r.evaluated, r.generated, r.steps, pp, tg):.0f}")
    tot = Hour("total", *(sum(getattr(r, f) for r in rows) for f in
                          ("wall_s", "llm_s", "calls", "prompt", "evaluated", "reused", "generated", "llama_prompt",
                           "llama_single", "steps", "eval_s", "step_s")))
    hours = len(rows)
    table.add_row("total", f"{tot.wall_s:.0f}", str(tot.calls), f"{tot.prompt:,}", f"{tot.evaluated:,}",
                  f"{tot.reused_share:.0%}", f"{tot.generated:,}", f"{tot.evaluated / n / max(1, hours):,.0f}/h",
                  f"{tot.outside:.1%}", f"{limit_s(tot.evaluated, tot.generated, tot.steps, pp, tg):.0f}", style="bold")
    console.print(table)
    limit = limit_s(tot.evaluated, tot.generated, tot.steps, pp, tg)
    counted = info.get("backend_counted")
    if pp:
        console.print(f"physical limit at {pp:.0f} prompt / {tg:.0f} generated tok/s: {limit:.0f} s; wall "
                      f"{tot.wall_s:.0f} s ({tot.wall_s / limit:.2f}x the limit)" if limit else "")
        if tot.eval_s:
            rest = tot.llm_s - tot.eval_s - tot.step_s
            console.print(f"where the LLM's {tot.llm_s:.0f} s went: {tot.eval_s:.0f} s decoding prompts "
                          f"({tot.llama_prompt / tot.eval_s:.0f} tok/s, against {pp:.0f} for 512 fresh tokens: "
                          f"pieces are shorter and sit deeper), {tot.step_s:.0f} s in {tot.steps:,} generation steps "
                          f"({tot.generated / max(tot.step_s, 1e-9):.0f} tok/s), {rest:.0f} s sampling (the grammar), "
                          "saving and restoring states, and the backend's Python")
        console.print(f"decoded: {tot.llama_prompt:,} prompt tokens in chunks (the evaluated column), "
                      f"{tot.llama_single:,} one per sequence (generated, and options scored); generation took "
                      f"{tot.steps:,} decode steps for {tot.generated:,} tokens"
                      + (f"; the backend's own count over the whole run, probes included: {counted['prompt']:,} "
                         f"prompt tokens, {counted['prompt'] - counted['reused']:,} evaluated"
                         if counted else ""))
    if counted and counted.get("by_purpose"):
        by = Table(title="prompt tokens by question (the whole run, probes included; the backend's count)")
        for col in ("purpose", "calls", "prompt tok", "per call", "evaluated per call", "reused"):
            by.add_column(col, justify="right")
        for purpose, (calls, prompt, reused) in sorted(counted["by_purpose"].items(), key=lambda kv: -kv[1][1] + kv[1][2]):
            by.add_row(purpose, str(calls), f"{prompt:,}", f"{prompt / calls:,.0f}", f"{(prompt - reused) / calls:,.0f}",
                       f"{reused / prompt:.0%}" if prompt else "-")
        console.print(by)
    per_day = tot.wall_s / max(1, hours) * 16
    day = "the whole day" if hours >= 16 else f"projected from {hours} to 16 game hours"
    model = str(info["model"]).lower()
    which = "measurement" if "1.5b" in model else "bundled" if "135m" in model else None
    goal = f"goal <= {GOAL_DAY_S[which] // 60} on the {which} model" if which else "no goal for this model"
    console.print(f"goals (issue 34): day {per_day / 60:.1f} min, {day}, at {pp:.0f} prompt tokens/s ({goal}); "
                  f"{tot.evaluated / n / max(1, hours):,.0f} evaluated tokens per person-hour (goal <= "
                  f"{GOAL_EVALUATED:,}); wall {tot.wall_s / limit if limit else 0:.2f}x the physical limit "
                  f"(goal <= {GOAL_LIMIT}); {tot.reused_share:.0%} of prompt tokens reused")
    out.mkdir(parents=True, exist_ok=True)
    (out / "day.json").write_text(json.dumps({**info, "hours_table": [asdict(r) for r in rows],
                                              "limit_s": limit}, indent=2) + "\n", encoding="utf-8")
    with (out / "day.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow([*asdict(rows[0]).keys(), "reused_share", "outside_llm", "limit_s"])
        for r in rows:
            writer.writerow([*asdict(r).values(), round(r.reused_share, 4), round(r.outside, 4),
                             round(limit_s(r.evaluated, r.generated, r.steps, pp, tg), 1)])
    plot(rows, info, out / "day.png")
    console.print(f"wrote {out / 'day.json'}, {out / 'day.csv'}, {out / 'day.png'}")


def plot(rows: list[Hour], info: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pp, tg = info["prompt_tok_s"], info["generated_tok_s"]
    xs = range(len(rows))
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
    a.bar(xs, [r.wall_s for r in rows], color="#ced4da", label="wall time")
    if pp:
        a.bar(xs, [r.evaluated / pp for r in rows], color="#1c7ed6", label="prompt evaluation at machine speed")
        a.bar(xs, [limit_s(0, r.generated, r.steps, pp, tg) for r in rows], bottom=[r.evaluated / pp for r in rows],
              color="#f08c00", label="generation at machine speed")
    a.set_xticks(list(xs), [r.hour for r in rows], rotation=45)
    a.set_ylabel("seconds per game hour")
    a.legend(fontsize=8)
    a.set_title(f"{info['agents']} people: wall time per game hour")
    b.bar(xs, [r.evaluated / info["agents"] for r in rows], color="#e03131", label="evaluated")
    b.bar(xs, [r.reused / info["agents"] for r in rows], bottom=[r.evaluated / info["agents"] for r in rows],
          color="#2b8a3e", label="reused from a cached prefix")
    b.axhline(GOAL_EVALUATED, color="black", linestyle="--", linewidth=1, label=f"goal: {GOAL_EVALUATED} evaluated")
    b.set_xticks(list(xs), [r.hour for r in rows], rotation=45)
    b.set_ylabel("prompt tokens per person")
    b.legend(fontsize=8)
    b.set_title("prompt tokens per person per game hour")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", type=int, default=25)
    ap.add_argument("--hours", type=int, default=16, help="game hours from 07:00 (16 = to 23:00)")
    ap.add_argument("--scripted", action="store_true", help="the scripted test double instead of the bundled model")
    ap.add_argument("--out", type=Path, default=None, help="folder for the run and day.json/csv/png (default: temp)")
    ap.add_argument("--model", default=None, help="a GGUF file, or 'measure' for the 1.5B measurement model "
                    "(default: the bundled model)")
    ap.add_argument("--live", action="store_true", help="cognition.live_context: each person's working memory "
                    "for the day, so their questions share a growing prefix (issue 34)")
    args = ap.parse_args()
    console = Console(width=max(120, Console().width))
    warm_embedder()
    out = args.out or Path(tempfile.mkdtemp(prefix="agora-day-"))
    def so_far(rows: list[Hour], info: dict) -> None:
        """The finished hours' tables, written quietly and marked partial: the final report replaces them."""
        report(rows, {**info, "live_context": args.live, "partial": f"{len(rows)} of {args.hours} game hours"},
               out, Console(file=io.StringIO()))

    rows, info = run_day(args.agents, args.hours, args.scripted, out / "runs", console, model_path(args.model),
                         live=args.live, on_hour=so_far)
    info["live_context"] = args.live
    report(rows, info, out, console)


if __name__ == "__main__":
    main()
