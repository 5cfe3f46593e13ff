"""Agora's driver for bench/peers.py: the flagship town sized to N people, on Agora's openai
backend pointed at the same server as the peers, and one JSON line with its speed.

Runs with Agora's own venv:

    .venv/bin/python bench/peers/agora_driver.py --base-url http://127.0.0.1:8080/v1 --agents 5 --steps 2

The town is ``bench/town.py``'s: the flagship's eight people, then townsfolk in its homes, from
07:00 on Monday, replay cache off. A step is one tick (ten game minutes) in which every person
acts: most continue what their plan says without asking the model, which is the design (a
person asks when the hour's plan starts, when they meet someone, when a conversation goes on).
The first tick is the dearest: everyone plans the day then. Calls are the requests the backend
sends to the server, retries after a bad answer included (bench/peers.py counts them again at its
proxy, where only POSTs to ``.../completions`` are calls: the backend's ``GET /v1/models`` at start
is not); the run's end-of-day probes are not asked. Errors are answers that failed validation (the
person then takes a safe default). Building the run (``Simulation.from_scenario``: its database
and town) is set-up, timed apart as the peers' is; the backend looks at ``/v1/models`` before that.
The JSON line says how many game minutes a step is (the scenario's tick) and, in wall-clock time,
when the steps began and ended, so that bench/peers.py can give calls and tokens per person per
simulated minute and cut the server's log at the steps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model-name", default="smollm2-135m", help="model name sent to the server")
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="ticks (ten game minutes each)")
    parser.add_argument("--budget-s", type=float, default=0.0, help="stop after the tick in which this many "
                        "seconds have passed (0: no limit)")
    args = parser.parse_args()

    from simulation.llm.openai import OpenAIBackend
    from simulation.run.simulation import Simulation
    from town import town_of

    version = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip()
    loaded = town_of(args.agents)
    result: dict[str, Any] = {
        "framework": "agora", "version": version, "agents": args.agents, "steps_requested": args.steps,
        "example": "the flagship town (bench/town.py) from 07:00, ten-minute ticks, openai backend",
        "errors": 0, "error_samples": [], "stopped": "done", "step_seconds": [], "step_calls": [],
        "setup_seconds": 0.0, "setup_calls": 0, "minutes_per_step": loaded.scenario.clock.tick_minutes,
        "steps_started_at": None, "steps_ended_at": None,
    }
    backend = OpenAIBackend([args.base_url], args.model_name, timeout_s=900)
    calls = [0]
    inner_generate = backend.agenerate

    async def counted(requests: Any, on_done: Any = None) -> Any:
        calls[0] += len(requests)
        return await inner_generate(requests, on_done)

    backend.agenerate = counted  # type: ignore[method-assign]
    began = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as out, Simulation.from_scenario(
                loaded, backend=backend, out=Path(out), ticks=args.steps) as sim:
            # the steps start here: building the run (its database and town) was set-up
            marks = [(time.perf_counter(), calls[0])]
            result["setup_seconds"], result["setup_calls"] = round(marks[0][0] - began, 3), calls[0]
            result["steps_started_at"] = time.time()
            for _ in range(args.steps):
                sim.step()
                now = time.perf_counter()
                result["step_seconds"].append(round(now - marks[-1][0], 3))
                result["step_calls"].append(calls[0] - marks[-1][1])
                marks.append((now, calls[0]))
                result["steps_ended_at"] = time.time()
                if args.budget_s and now - marks[0][0] >= args.budget_s:
                    result["stopped"] = "budget"
                    break
            row = sim.db.conn.execute("select count(*) from llm_calls where run_id = ? and parse_ok = 0",
                                      [sim.run_id]).fetchone()
            result["errors"] = int(row[0] or 0)
    except Exception as exc:  # the row says why; the log has the rest
        result["stopped"] = "crashed"
        result["errors"] += 1
        result["error_samples"].append(f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        backend.close()
    steps = len(result["step_seconds"])
    seconds = float(sum(result["step_seconds"]))
    llm_calls = int(sum(result["step_calls"]))
    n = max(1, args.agents)
    result.update({
        "steps": steps, "agent_steps": steps * n, "seconds": seconds, "llm_calls": llm_calls,
        "seconds_per_step": seconds / steps if steps else None,
        "seconds_per_agent_step": seconds / (steps * n) if steps else None,
        "calls_per_agent_step": llm_calls / (steps * n) if steps else None,
    })
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
