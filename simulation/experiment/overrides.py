"""A condition's scenario: the base scenario's YAML with the condition's overrides set, validated
like a file. Working on the YAML (not the loaded objects) means an override can reach any field
a file can hold, the changed scenario is checked by the same rules and located messages, and its
text (recorded in run.db, hashed for the benchmark's reuse check) says what the condition changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from simulation.errors import InputError, Problem
from simulation.formats.yamlfile import read_text
from simulation.scenario import LoadedScenario, load

__all__ = ["condition_scenario", "set_path"]


def set_path(data: Any, path: str, value: Any) -> None:
    """Set ``path`` ("events.0.to") in ``data`` to ``value``; ValueError saying where it fails."""
    parts = path.split(".")
    node = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[:depth]) or "the scenario"
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ValueError(f"{where} is a list of {len(node)}: {part!r} is not an index into it")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            elif part not in node or node[part] is None:
                node[part] = {}
                node = node[part]
            else:
                node = node[part]
        else:
            raise ValueError(f"{where} is a single value ({node!r}): it has no field {part!r}")


def condition_scenario(scenario: Path, name: str, overrides: dict[str, Any], where: str) -> LoadedScenario:
    """The scenario of condition ``name``: ``scenario`` with ``overrides`` set, loaded as if it
    were that file (relative paths still from its folder). ``where``: the experiment file and
    condition, for messages."""
    text = read_text(scenario, "scenario file")
    if not overrides:
        return load(scenario, text)
    data = yaml.safe_load(text)
    for path, value in overrides.items():
        try:
            set_path(data, path, value)
        except ValueError as exc:
            raise InputError(Problem(where, f"overrides.{path}: {exc}")) from None
    changed = (f"# {scenario.name}, condition {name} of an experiment: {json.dumps(overrides, sort_keys=True)}\n"
               + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    try:
        return load(scenario, changed)
    except InputError as exc:
        raise InputError(Problem(where, f"the scenario with its overrides is not valid: {exc}")) from None
