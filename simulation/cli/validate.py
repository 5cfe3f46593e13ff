"""`agora validate` and `agora schema`: check scenario and persona files, print their JSON Schema."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from simulation.cli import common
from simulation.cli.common import user_errors
from simulation.errors import InputError, Problem

__all__ = ["looks_like_persona", "schema", "validate"]


@user_errors
def validate(
    scenarios: Annotated[list[Path], typer.Argument(help="scenario or persona YAML files", show_default=False)],
) -> None:
    """Check scenario files (and the persona files they reference) and persona files; exit 0 if all
    are valid, else 2."""
    from simulation import scenario as sc
    from simulation.cognition.phases import scenario_phases

    problems = []
    for path in scenarios:
        try:
            if looks_like_persona(path):
                persona = sc.load_persona(path)
                common.console.print(f"[green]ok[/] {escape(str(path))}: persona {escape(persona.name)} "
                                     f"({persona.id})", highlight=False, soft_wrap=True)
                continue
            loaded = sc.load(path)
            scenario_phases(loaded.scenario.cognition.phases, loaded)  # the names, and an order that works
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        s = loaded.scenario
        arriving = f" (and {len(loaded.arrivals)} arriving later)" if loaded.arrivals else ""
        common.console.print(f"[green]ok[/] {escape(str(path))}: {len(loaded.people)} people{arriving}, "
                             f"{len(s.town.places)} places, {s.clock.total_ticks} ticks of {s.clock.tick_minutes} min",
                             highlight=False, soft_wrap=True)
        asking = Counter(loaded.llm_groups().values())
        for group, chosen in s.llm.groups.items():
            model = chosen.model or "its default model"
            common.console.print(f"  model group {escape(group)}: {chosen.backend}, {escape(model)}; "
                                 + (f"{asking[group]} of the people" if asking[group] else
                                    "named by nobody, so never started"), highlight=False, soft_wrap=True)
        for person in loaded.everyone():
            note = common.habits_note(person)
            if note is not None:
                common.console.print(f"  {note}", highlight=False, soft_wrap=True)
    if problems:
        raise InputError(problems)


def looks_like_persona(path: Path) -> bool:
    """A persona file rather than a scenario: a mapping with a routine or Big Five and no town."""
    from simulation.formats.yamlfile import load_yaml

    try:
        data = load_yaml(path).data
    except InputError:
        return False  # the scenario loader reports it
    return isinstance(data, dict) and "town" not in data and ("routine" in data or "big_five" in data)


@user_errors
def schema(
    kind: Annotated[str, typer.Option(help="scenario or persona")] = "scenario",
    out: Annotated[Optional[Path], typer.Option(help="write to this file instead of stdout")] = None,
) -> None:
    """Print the JSON Schema of scenario (or persona) files, for editor validation."""
    from simulation.scenario import json_schema

    if kind not in ("scenario", "persona"):
        raise InputError(Problem("--kind", f"expected 'scenario' or 'persona', got {kind!r}"))
    text = json.dumps(json_schema(kind), indent=2)  # type: ignore[arg-type]
    if out:
        try:
            out.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(Problem(str(out), f"cannot write: {exc.strerror or exc}")) from None
        common.err.print(f"wrote {out}", markup=False, highlight=False)
    else:
        print(text)
