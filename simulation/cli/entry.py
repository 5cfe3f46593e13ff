"""The ``agora`` application: every command registered on one typer app, and the process entry point.

Commands are plain functions in their own modules (``run``, ``verify``, ``validate``, ``evaluate``,
``personas``, ``scenario_new``, ``rewards``, ``ui``, ``bench``); this module only names and orders them, so no command
module imports another and none imports this one.
"""

from __future__ import annotations

import signal
from typing import Any

import typer

from simulation.cli import (bench, evaluate, evolve, experiment, personas, rewards, run, scenario_new, train, ui, validate,
                            verify)

__all__ = ["app", "main"]

app = typer.Typer(
    name="agora", help="Agora: LLM persona agents living in a town.", no_args_is_help=True,
    pretty_exceptions_enable=False, add_completion=False,
)
app.command("validate")(validate.validate)
app.command("schema")(validate.schema)
app.command("run")(run.run)
app.command("resume")(run.resume)
app.command("fork")(run.fork)
app.command("experiment")(experiment.experiment)
app.command("verify")(verify.verify)
app.command("ui")(ui.ui)
app.command("eval")(evaluate.eval_)
app.command("rank")(evaluate.rank)

personas_app = typer.Typer(name="personas", help="The persona library and sampled populations.",
                           no_args_is_help=True)
personas_app.command("sample")(personas.sample)
app.add_typer(personas_app, name="personas")

scenario_app = typer.Typer(name="scenario", help="Scenario files drafted for you.", no_args_is_help=True)
scenario_app.command("new")(scenario_new.new)
app.add_typer(scenario_app, name="scenario")

app.command("rewards")(rewards.rewards)
app.command("train")(train.train)
app.command("evolve")(evolve.evolve)
app.command("behaviour")(bench.behaviour)

bench_app = typer.Typer(name="bench", help="Benchmarks that run a scenario and report measured numbers.",
                        no_args_is_help=True)
bench_app.command("behaviour")(bench.bench_behaviour)
bench_app.command("compare")(bench.bench_compare)
bench_app.command("rescore")(bench.bench_rescore)
app.add_typer(bench_app, name="bench")


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """The console script ``agora``."""
    # A graceful stop on Ctrl-C and on SIGTERM (a scheduler, `docker stop`, `kill`): the tick in
    # flight is rolled back and the run can be resumed. SIGINT is set explicitly because a process
    # started in the background by a non-interactive shell inherits it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop)
    app()
