"""What a game hour of the flagship costs: LLM calls and tokens per agent per game hour, wall
time per game hour, and the share of wall time spent outside the LLM (the engine's overhead:
perception, retrieval and embeddings, scoring, bookkeeping, run.db).

    .venv/bin/python bench/town.py                    # 8 and 25 agents, one game hour, bundled model
    .venv/bin/python bench/town.py --agents 8 --ticks 12
    .venv/bin/python bench/town.py --scripted         # the scripted test double: a quick check that it runs

25 agents are the flagship's eight plus the seventeen townsfolk of ``personas/townsfolk``, living
in the flagship's homes in turn. The replay cache is off, so every call reaches the model. The
embedding model is loaded before the clock starts (a one-off cost per process, printed apart).
Time inside the backend is measured around ``Backend.generate``; everything else in the ticks
counts as overhead. The reference Generative Agents code made about 54 LLM requests per agent
per game hour.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from simulation import scenario
from simulation.llm.backend import OnDone
from simulation.llm.types import LLMRequest, RawCompletion
from simulation import Simulation
from simulation.llm.factory import build_backend
from simulation.rundb import facts, metrics
from simulation.scenario import LoadedScenario, ResolvedPersona

FLAGSHIP = ROOT / "scenarios" / "valentines.yaml"
TOWNSFOLK = ROOT / "personas" / "townsfolk"


class Timed:
    """A backend wrapper that adds up the seconds spent inside ``generate`` and the requests."""

    def __init__(self, backend):
        self.inner = backend
        self.name, self.model_id = backend.name, backend.model_id
        self.seconds = 0.0
        self.requests = 0

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        self.requests += len(requests)
        started = time.perf_counter()
        try:
            return self.inner.generate(requests, on_done)
        finally:
            self.seconds += time.perf_counter() - started

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        """The wrapped backend's count: prompts are budgeted by it, so a timed run asks what a real one does."""
        from simulation.llm.backend import count_tokens

        return count_tokens(self.inner, messages)

    def close(self) -> None:
        self.inner.close()


def warm_embedder() -> None:
    """Load the embedding model before any clock starts (a one-off cost per process, printed apart)."""
    from simulation.memory.embeddings import get_embedder

    t = time.perf_counter()
    get_embedder().embed(["warm-up"])
    print(f"embedding model loaded in {time.perf_counter() - t:.1f} s (once per process, not counted below)")


def town_of(n: int) -> LoadedScenario:
    """The flagship with ``n`` people: its own eight, then townsfolk in the flagship's homes."""
    loaded = scenario.load(FLAGSHIP)
    sc = loaded.scenario.model_copy(deep=True)
    sc.llm = sc.llm.model_copy(update={"cache": "off"})
    people = list(loaded.people[:n])
    homes = [p.id for p in sc.town.places if p.kind == "home"]
    extra = sorted(TOWNSFOLK.glob("*.yaml"))[: max(0, n - len(people))]
    for i, path in enumerate(extra):
        persona = scenario.load_persona(path)
        home = homes[i % len(homes)]
        people.append(ResolvedPersona(persona=persona, home=home, start_place=home, source=str(path)))
    if len(people) < n:
        sys.exit(f"only {len(people)} people available")
    return loaded.model_copy(update={"scenario": sc, "people": people})


def one(n: int, ticks: int, scripted: bool, out: Path) -> dict[str, object]:
    loaded = town_of(n)
    if scripted:
        from scripted import ScriptedBackend

        backend = Timed(ScriptedBackend())
    else:
        backend = Timed(build_backend(loaded.scenario.llm, Path(loaded.path).parent))
    try:
        with Simulation.from_scenario(loaded, backend=backend, out=out, ticks=ticks) as run:
            ended: list[tuple[float, float]] = []  # (wall clock, seconds in the backend) after the last tick
            started = time.perf_counter()
            # the probes at the end are not part of a game hour: measure up to the last tick
            run.run(on_tick=lambda s: ended.append((time.perf_counter(), backend.seconds)))
            wall, llm_seconds = ended[-1][0] - started, ended[-1][1]
    finally:
        backend.close()
    con, run_id = run.db.conn, run.run_id
    hours = ticks * loaded.scenario.clock.tick_minutes / 60
    calls, pt, ct, failures = con.execute(
        "select sum(llm_calls), sum(prompt_tokens), sum(completion_tokens), sum(parse_failures) from ticks "
        "where run_id = ?", [run_id]).fetchone()
    purposes = dict(con.execute("select purpose, count(*) from llm_calls where purpose not like 'probe%' "
                                "group by purpose order by 2 desc").fetchall())
    party = facts.first_aware(con, run_id).get("party", [])
    aware = [sum(1 for a in party if a.tick <= tick) for tick in range(ticks)]
    density = metrics.density_by_tick(con, run_id)
    memory = run.model.memory
    return {
        "agents": n, "hours": hours, "calls": calls, "calls_h": calls / n / hours,
        "tokens_h": (pt + ct) / n / hours, "failures": failures, "wall_h": wall / hours,
        "outside": 1 - llm_seconds / wall, "memory_share": memory.stats.seconds / wall,
        "purposes": purposes, "aware": aware, "density": (density[0][2], density[-1][2]),
        "retrievals": memory.stats.queries, "run_db": run.store.path,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", default="8,25", help="comma-separated town sizes")
    ap.add_argument("--ticks", type=int, default=6, help="ticks per town (6 = one game hour at 10 minutes a tick)")
    ap.add_argument("--scripted", action="store_true", help="the scripted test double instead of the bundled model")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = ap.parse_args()
    warm_embedder()
    out = args.out or Path(tempfile.mkdtemp(prefix="agora-bench-"))
    rows = [one(int(n), args.ticks, args.scripted, out) for n in args.agents.split(",")]
    backend = "scripted test double" if args.scripted else "bundled SmolLM2-135M (llama.cpp)"
    print(f"\ntown bench: valentines from 07:00, {args.ticks} ticks, {backend}, replay cache off")
    print(f"{'agents':>6} {'game h':>6} {'calls':>6} {'calls/agent/h':>13} {'tokens/agent/h':>14} {'parse fail':>10} "
          f"{'wall s/game h':>13} {'outside LLM':>11} {'memory':>7}")
    for r in rows:
        print(f"{r['agents']:>6} {r['hours']:>6.2f} {r['calls']:>6} {r['calls_h']:>13.2f} {r['tokens_h']:>14.0f} "
              f"{r['failures']:>10} {r['wall_h']:>13.1f} {r['outside']:>11.2%} {r['memory_share']:>7.2%}")
    for r in rows:
        print(f"\n{r['agents']} agents: calls by purpose {r['purposes']}; {r['retrievals']} retrievals")
        print(f"  aware of the party, per tick: {r['aware']}; relationship density {r['density'][0]:.3f} -> "
              f"{r['density'][1]:.3f}; run.db: {r['run_db']}")
    print("\n'outside LLM' = 1 - time inside Backend.generate / wall time of the ticks; "
          "'memory' = retrieval, embedding and scoring time / wall time (part of 'outside LLM').")


if __name__ == "__main__":
    main()
