"""`agora personas sample`: people sampled from a population spec into persona files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from simulation.cli import common
from simulation.cli.common import user_errors
from simulation.errors import InputError, Problem, RunError

__all__ = ["sample"]

_LLM = "LLM for backstories"
BackendOpt = common.backend_option(_LLM)
ModelOpt = common.model_option(_LLM)
BaseUrlOpt = common.base_url_option(_LLM)
QuietOpt = common.quiet_option("the output folder")


@user_errors
def sample(
    spec: Annotated[Path, typer.Option(
        help="population spec YAML (personas/populations/*.yaml)", show_default=False)],
    n: Annotated[int, typer.Option(min=1, max=10000, help="how many people", show_default=False)],
    out: Annotated[Path, typer.Option(help="folder for the persona files", show_default=False)],
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="sampling seed")] = 0,
    backstories: Annotated[bool, typer.Option(help="ask the LLM for a short backstory per person")] = False,
    backend: BackendOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Sample N people from a population spec into persona files (deterministic given --seed)."""
    from simulation import population as pop
    from simulation.llm import factory, registry
    from simulation.scenario import load_persona

    choice = common.backend_choice(backend, model, base_url) if backstories else None
    population = pop.load_spec(spec)
    try:
        people = pop.sample(population, n, seed)
    except pop.TooFewNames as exc:
        raise InputError(Problem("--n", str(exc))) from None
    files = [out / f"{s.persona.id}.yaml" for s in people] + [out / "population.json", out / "marginals.html"]
    if backstories:
        files.append(out / "backstory_calls.jsonl")
    clash = [f for f in files if f.exists()]
    if clash:
        raise InputError(Problem(str(clash[0]), f"already exists ({len(clash)} file(s) would be overwritten); "
                                                 "choose an empty --out"))
    failed = 0
    calls: list[dict[str, Any]] = []
    if choice is not None:
        settings = choice.apply(registry.default_settings())
        show = common.show_progress(quiet)
        with common.status("loading model...", show):
            llm = factory.build_backend(settings, Path.cwd())
        bar = common.CallsBar("backstories", show)
        bar.plan(len(people))

        def record(rec: Any) -> int:
            calls.append(rec.model_dump(mode="json"))
            return len(calls)

        try:
            with bar.live():
                failed = pop.add_backstories(people, llm, seed, on_progress=bar.on_llm, on_call=record)
        finally:
            llm.close()
    try:
        pop.write_sample(out, spec, population, people, seed, failed, calls if backstories else None)
    except OSError as exc:
        raise InputError(Problem(str(out), f"cannot write: {exc.strerror or exc}")) from None
    for path in files[: len(people)]:  # what we wrote must load back: a failure here is a bug, not bad input
        try:
            load_persona(path)
        except InputError as exc:
            raise RunError(f"sampled persona does not validate: {exc}") from None
    if not quiet:
        _show(population.name, people, seed, out, failed if backstories else None)
    print(out)


def _show(name: str, people: list[Any], seed: int, out: Path, failed: int | None) -> None:
    from simulation.population import FACTORS

    console = common.console
    table = Table(title=f"{len(people)} people from {escape(name)} (seed {seed})", title_justify="left")
    for col in ("id", "age", "occupation", "household", "O", "C", "E", "A", "N"):
        left = col in ("id", "occupation", "household")
        table.add_column(col, overflow="fold", justify="left" if left else "right")
    for s in people[:40]:
        b = s.persona.big_five
        table.add_row(s.persona.id, str(s.persona.age), escape(s.persona.occupation), escape(s.persona.household),
                      *(f"{getattr(b, f):.2f}" for f in FACTORS))
    console.print(table)
    if len(people) > 40:
        console.print(f"... and {len(people) - 40} more (see population.json)")
    if failed is not None:
        console.print(f"backstories: {len(people) - failed} written, {failed} left empty (unusable answers)")
    console.print(f"marginals: {escape(str(out / 'marginals.html'))}", highlight=False)
