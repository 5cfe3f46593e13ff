"""An experiment's YAML file: which scenario, which seeds, and the conditions to compare.

    name: who-hears-first
    scenario: ../scenarios/valentines-small.yaml     # relative to this file
    seeds: [1, 2, 3, 4, 5]                           # every condition runs every seed (paired)
    ticks: 36                                        # optional: the scenario's whole duration
    control: isabella                                # optional: the first condition
    conditions:
      - name: isabella                               # the scenario as it is
      - name: walter
        overrides: {events.0.to: walter_hughes}      # dotted paths into the scenario's YAML
    believability:                                   # optional: interview everyone, rank the conditions
      judge: {model: ../.cache/measure-model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
      per_category: 1

An override sets one field of the scenario's YAML, by a dotted path whose numbers index lists
(``events.0.to``, ``cognition.talk_prior``, ``llm.temperature``); the changed scenario is then
validated like a file (``simulation.experiment.overrides``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from simulation.formats.fields import Identifier, ShortText, StrictModel
from simulation.formats.validation import validate_document
from simulation.formats.yamlfile import load_yaml

__all__ = ["Believability", "Condition", "ExperimentSpec", "Fork", "Judge", "load_spec"]


class Fork(StrictModel):
    """A condition that branches another condition's run of each seed at a tick (``agora fork``):
    the ticks before it are that run's, so the two differ only by what happens from there."""

    of: Identifier = Field(description="the condition whose runs are forked (one that is not a fork itself)")
    at: int = Field(ge=0, description="the first tick the forks make themselves")
    whisper: list[str] = Field(default_factory=list, description="PERSON=TEXT, as agora fork --whisper")
    event: list[str] = Field(default_factory=list, description="PLACE=TEXT or PLACE:MINUTES=TEXT, as --event")
    set: list[str] = Field(default_factory=list, description="SETTING=VALUE, as --set")
    fact: Identifier | None = Field(None, description="the fact the whispers and events bring, as --fact")
    remove: list[str] = Field(default_factory=list, description="PERSON or PERSON=TEXT, as --remove")
    add: list[str] = Field(default_factory=list, description="PERSONA_FILE@PLACE[,home=PLACE][,workplace=PLACE]"
                           "[,crowd], as --add (the file relative to the experiment file)")
    correct: list[str] = Field(default_factory=list, description="FACT=TEXT, as --correct")
    detail: list[str] = Field(default_factory=list, description="FACT.DETAIL=VALUE, as --detail")


class Judge(StrictModel):
    """The model that judges (``agora rank``'s ``--judge-*`` options): a backend, a model (a GGUF path
    is taken from the experiment file's folder) and, for a server, its base URLs."""

    backend: Identifier | None = Field(None, description="llamacpp, vllm, openai, control ...")
    model: str | None = Field(None, description="the model (a GGUF file for llamacpp)")
    base_url: list[str] = Field(default_factory=list, description="OpenAI-compatible servers")


class Believability(StrictModel):
    """Generative Agents' interview of every run's people, ranked across conditions by a judge."""

    judge: Judge = Field(description="the judge: another model than the agents' where one is available")
    per_category: int | None = Field(None, ge=1, le=5, description="questions per category compared (default all)")
    bootstrap: int = Field(1000, ge=0, le=100000, description="bootstrap resamples of agents")


class Condition(StrictModel):
    name: Identifier
    description: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict, description="dotted path into the scenario's YAML -> value")
    fork: Fork | None = Field(None, description="instead of overrides: fork another condition's runs at a tick")

    @model_validator(mode="after")
    def _one_way(self) -> Condition:
        if self.fork is not None and self.overrides:
            raise ValueError(f"condition {self.name!r} has both overrides and fork: a fork runs its parent's scenario")
        return self


class ExperimentSpec(StrictModel):
    name: ShortText
    scenario: str = Field(description="the scenario file, relative to the experiment file")
    seeds: list[int] = Field(min_length=2, max_length=1000, description="every condition runs every seed")
    ticks: int | None = Field(None, ge=1, description="ticks per run (default: the scenario's whole duration)")
    control: Identifier | None = Field(None, description="the condition the others are compared with (default: the first)")
    conditions: list[Condition] = Field(min_length=2, max_length=50)
    believability: Believability | None = Field(
        None, description="optional: interview every run's people (agora eval --suite believability) and rank the "
        "conditions by a judge (agora rank)")

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentSpec:
        names = [c.name for c in self.conditions]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"condition names must differ: {', '.join(twice)} given twice")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError("seeds must differ: a seed given twice is the same run twice, not a replicate")
        if self.control is not None and self.control not in names:
            raise ValueError(f"control {self.control!r} is not one of the conditions ({', '.join(names)})")
        plain = [c.name for c in self.conditions if c.fork is None]
        for c in self.conditions:
            if c.fork is not None and c.fork.of not in plain:
                raise ValueError(f"condition {c.name!r} forks {c.fork.of!r}, which is not a condition that is not a "
                                 f"fork itself ({', '.join(plain) or 'none'})")
        return self

    @property
    def control_name(self) -> str:
        return self.control or self.conditions[0].name


def load_spec(path: Path | str) -> tuple[ExperimentSpec, Path]:
    """The experiment file and the scenario file it names (resolved); InputError naming file,
    line and field."""
    from simulation.errors import InputError

    doc = load_yaml(path, "experiment file")
    spec = validate_document(doc, ExperimentSpec, "experiment")
    scenario = (Path(doc.path).parent / spec.scenario).resolve()
    if not scenario.is_file():
        raise InputError(doc.problem(("scenario",), f"scenario file not found: {scenario}"))
    return spec, scenario
