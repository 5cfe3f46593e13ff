"""What a big town costs: N people for a game hour, each tick's wall time split into the LLM,
embedding, retrieval, run.db and the rest, with memory use, run.db growth and calls per person
per game hour for the named people and the background crowd.

    .venv/bin/python bench/scale.py --people 100,1000 --scripted      # the engine alone
    .venv/bin/python bench/scale.py --people 100                      # the bundled model on the CPU
    .venv/bin/python bench/scale.py --people 1000 --backend openai --base-url URL --model NAME

The town is the flagship (scenarios/valentines.yaml): its 25 named people with full cognition,
and N - 25 people sampled from personas/populations/ville.yaml, as background crowd unless
``--no-crowd`` (docs/cognition.md). The replay cache is off. The embedding model is loaded
before the clock starts. LLM time is measured around ``Backend.generate``, embedding around
``Embedder.embed``, retrieval around the memory's batched searches (less the embedding inside
them), run.db around the tick's commit; "rest" is everything else in the tick (perception,
cognition's own work, bookkeeping). With the scripted double the LLM column is the double's
own (near-zero) time, so the other columns are the engine's cost at that size.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from town import Timed, warm_embedder  # noqa: E402  (bench/town.py)

from simulation import Simulation, scenario  # noqa: E402
from simulation.llm.factory import BackendChoice, build_backend  # noqa: E402
from simulation.run.settings import RunSettings  # noqa: E402

FLAGSHIP = ROOT / "scenarios" / "valentines.yaml"
SPEC = ROOT / "personas" / "populations" / "ville.yaml"
NAMED = 25


class Clock:
    """Seconds spent inside a callable, added up (wraps a bound method in place), less the time
    another clock ran inside it (``less``: the embedding done within a search)."""

    def __init__(self, less: Clock | None = None) -> None:
        self.seconds = 0.0
        self.less = less

    def wrap(self, owner: Any, name: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started, nested = time.perf_counter(), self.less.seconds if self.less else 0.0
            try:
                return inner(*args, **kwargs)
            finally:
                inside = self.less.seconds - nested if self.less else 0.0
                self.seconds += time.perf_counter() - started - inside

        setattr(owner, name, timed)


def town(people: int, crowd: bool, workdir: Path) -> Path:
    """The flagship with ``people - 25`` sampled people added (a scenario file in ``workdir``)."""
    root = workdir / f"town-{people}"
    (root / "scenarios").mkdir(parents=True, exist_ok=True)
    if not (root / "personas").exists():
        (root / "personas").symlink_to(ROOT / "personas")
    text = FLAGSHIP.read_text()
    if people > NAMED:
        text += (f"\npopulation:\n  spec: ../personas/populations/{SPEC.name}\n  n: {people - NAMED}\n"
                 f"  crowd: {'true' if crowd else 'false'}\n")
    path = root / "scenarios" / "valentines.yaml"
    path.write_text(text)
    return path


def rss_mb() -> float:
    """This process's resident memory now, in MB (Linux /proc; peak from getrusage otherwise)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def db_mb(run_dir: Path) -> float:
    return sum(p.stat().st_size for p in run_dir.glob("run.db*")) / 1e6


def one(people: int, ticks: int, crowd: bool, scripted: bool, choice: BackendChoice, workdir: Path) -> dict[str, Any]:
    loaded = scenario.load(town(people, crowd, workdir))
    if scripted:
        from scripted import ScriptedBackend

        backend = Timed(ScriptedBackend())
    else:
        settings = RunSettings.resolve(loaded, llm=choice).llm.model_copy(update={"cache": "off"})
        backend = Timed(build_backend(settings, Path(loaded.path).parent))
    rows: list[dict[str, float]] = []
    try:
        started = time.perf_counter()
        sim = Simulation.from_scenario(loaded, backend=backend, out=workdir / "runs", ticks=ticks)
        setup = time.perf_counter() - started
        memory = sim.model.memory
        embed = Clock()
        search, commit = Clock(less=embed), Clock()
        embed.wrap(memory.embedder, "embed")
        search.wrap(memory, "search_now")
        commit.wrap(sim.store, "commit")
        with sim:
            for _ in range(ticks):
                before = (backend.seconds, embed.seconds, search.seconds, commit.seconds)
                t = time.perf_counter()
                sim.step()
                wall = time.perf_counter() - t
                llm, embedding, retrieval, database = (after - b for after, b in zip(
                    (backend.seconds, embed.seconds, search.seconds, commit.seconds), before))
                rows.append({"wall": wall, "llm": llm, "embedding": embedding, "retrieval": retrieval,
                             "database": database,
                             "rest": max(0.0, wall - llm - embedding - retrieval - database),
                             "rss": rss_mb(), "db": db_mb(sim.run_dir)})
            sim.close("interrupted", "benchmark: probes not asked")
        con = sim.db.conn
        from simulation.rundb.behaviour import behaviour

        metrics = behaviour(con, sim.run_id)
    finally:
        backend.close()
    return {"people": people, "ticks": rows, "setup": setup, "metrics": metrics, "run_dir": sim.run_dir}


def report(result: dict[str, Any], tick_minutes: int) -> None:
    rows = result["ticks"]
    print(f"\n{result['people']} people (setup {result['setup']:.1f} s; run {result['run_dir']})")
    print(f"{'tick':>4} {'wall s':>8} {'LLM':>7} {'embed':>7} {'retrieve':>8} {'run.db':>7} {'rest':>7} "
          f"{'engine':>7} {'RSS MB':>7} {'db MB':>7}")
    previous = 0.0
    for i, r in enumerate(rows):
        engine = 1 - r["llm"] / r["wall"] if r["wall"] else 0.0
        print(f"{i:>4} {r['wall']:>8.2f} {r['llm']:>7.2f} {r['embedding']:>7.2f} {r['retrieval']:>8.2f} "
              f"{r['database']:>7.2f} {r['rest']:>7.2f} {engine:>7.1%} {r['rss']:>7.0f} {r['db'] - previous:>+7.1f}")
        previous = r["db"]
    total = {k: sum(r[k] for r in rows) for k in ("wall", "llm", "embedding", "retrieval", "database", "rest")}
    later = rows[1:] or rows
    print(f"game hour: {total['wall']:.1f} s wall, of it LLM {total['llm'] / total['wall']:.1%}, embedding "
          f"{total['embedding'] / total['wall']:.1%}, retrieval {total['retrieval'] / total['wall']:.1%}, run.db "
          f"{total['database'] / total['wall']:.1%}, rest {total['rest'] / total['wall']:.1%}; after the first "
          f"tick {sum(r['wall'] for r in later) / len(later):.2f} s a tick; run.db "
          f"{(rows[-1]['db'] - rows[0]['db']) / max(1, len(rows) - 1):.2f} MB a tick after the first")
    m = result["metrics"]
    crowd, named = m.get("llm.calls_per_agent_hour.crowd"), m.get("llm.calls_per_agent_hour.named")
    print(f"calls per person per game hour: all {m.get('llm.calls_per_agent_hour') or 0:.2f}"
          + (f", named {named:.2f}, crowd {crowd:.2f}" if crowd is not None and named is not None else "")
          + f" (goals: named <= 6, crowd <= 1; {tick_minutes}-minute ticks)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--people", default="100,1000", help="comma-separated town sizes (>= 25)")
    ap.add_argument("--ticks", type=int, default=6, help="ticks per town (6 = one game hour)")
    ap.add_argument("--no-crowd", dest="crowd", action="store_false", help="the sampled people get full cognition")
    ap.add_argument("--scripted", action="store_true", help="the scripted test double (the engine alone)")
    ap.add_argument("--backend", default=None, help="llamacpp (default: the bundled model), vllm or openai")
    ap.add_argument("--model", default=None)
    ap.add_argument("--base-url", action="append", default=[])
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = ap.parse_args()
    warm_embedder()
    workdir = args.out or Path(tempfile.mkdtemp(prefix="agora-scale-"))
    choice = BackendChoice(backend=args.backend, model=args.model, base_urls=args.base_url)
    what = "scripted test double" if args.scripted else (args.backend or "bundled SmolLM2-135M (llama.cpp)")
    print(f"scale bench: the flagship town from 07:00, {args.ticks} ticks, {what}, "
          f"sampled people {'as background crowd' if args.crowd else 'with full cognition'}, replay cache off")
    for n in (int(x) for x in args.people.split(",")):
        if n < NAMED:
            sys.exit(f"--people {n}: the town has {NAMED} named people; give at least that many")
        report(one(n, args.ticks, args.crowd, args.scripted, choice, workdir), 10)


if __name__ == "__main__":
    main()
