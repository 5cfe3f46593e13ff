"""A sample on disk: one ordinary persona file per person, population.json, marginals.html and the backstory calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from simulation.formats.persona import Persona
from simulation.population.marginals import expected_marginals, observed_marginals
from simulation.population.plots import marginals_figure
from simulation.population.sampler import Sampled
from simulation.population.spec import PopulationSpec

__all__ = ["persona_yaml", "write_sample"]


class _Quoted(str):
    """A clock time, written quoted: YAML 1.1 would read an unquoted 10:30 as a number."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Quoted, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", str(v), style="'"))


def persona_yaml(persona: Persona, header: str = "") -> str:
    """A persona file's text; loads back with ``scenario.load_persona`` to an equal persona."""
    data = persona.model_dump(mode="json")
    data["routine"]["wake"] = _Quoted(f"{persona.routine.wake:%H:%M}")
    data["routine"]["sleep"] = _Quoted(f"{persona.routine.sleep:%H:%M}")
    data = {k: v for k, v in data.items() if v not in ("", [], {})}
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)
    lines = "".join(f"# {line}\n" for line in header.splitlines())
    return lines + body


def write_sample(out: Path, spec_path: Path, spec: PopulationSpec, people: list[Sampled], seed: int,
                 backstory_failures: int = 0, calls: list[dict[str, Any]] | None = None) -> list[Path]:
    """Persona files, population.json (who, and expected vs observed marginals), marginals.html,
    and the backstory calls when an LLM wrote backstories. Returns the persona files."""
    out.mkdir(parents=True, exist_ok=True)
    n = len(people)
    paths = []
    for i, s in enumerate(people):
        path = out / f"{s.persona.id}.yaml"
        header = (f"Sampled by `agora personas sample` from {spec_path} (n {n}, seed {seed}, person {i + 1}).\n"
                  "Edit freely: it is an ordinary persona file.")
        path.write_text(persona_yaml(s.persona, header), "utf-8")
        paths.append(path)
    manifest = {
        "spec": str(spec_path), "n": n, "seed": seed, "backstories": calls is not None,
        "backstory_failures": backstory_failures,
        "people": [{"id": s.persona.id, "name": s.persona.name, "age": s.persona.age,
                    "occupation": s.persona.occupation, "household": s.persona.household,
                    "workplace_kind": s.workplace_kind,
                    "big_five": s.persona.big_five.model_dump(), "file": p.name} for s, p in zip(people, paths)],
        "expected": expected_marginals(spec), "observed": observed_marginals(spec, people),
    }
    (out / "population.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
    if calls is not None:  # every LLM attempt, so each backstory can be traced to its prompt
        (out / "backstory_calls.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in calls),
                                                   "utf-8")
    marginals_figure(spec, people).write_html(out / "marginals.html", include_plotlyjs="directory")
    return paths
