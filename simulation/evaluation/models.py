"""Which LLM plays the agents and which one judges, and why: chosen in the open, never by silent fallback.

The agents' model is, in this order: the one the command line names (``--backend``/``--model``);
else the targets' own model (the settings a run was started with, or a scenario's ``llm:``
block); else, when no target names one (persona files carry none), the default bundled model.
Each choice comes with a sentence saying which rule picked it, which the report and the
terminal print beside the model. Where the targets' own model cannot be used (its settings
cannot be read, they do not describe the backend the run recorded, or runs of different models
are evaluated together) and the command line names none, the evaluation is refused with an
InputError naming the run and the field, instead of quietly asking another model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from simulation.errors import InputError, Problem
from simulation.evaluation.targets import Target
from simulation.formats.paths import resolve_path
from simulation.llm import registry
from simulation.llm.factory import BackendChoice
from simulation.llm.settings import LLMSettings

NAME_IT = "name the agents' model with --backend/--model to evaluate on another one"


@dataclass(frozen=True)
class ModelChoice:
    settings: LLMSettings
    base_dir: Path
    """Where relative model paths in ``settings`` are taken from."""
    why: str
    """Which rule picked this model, in words (printed beside it in the report and the terminal)."""


def describe(settings: LLMSettings) -> str:
    """``backend / model`` in words; a backend's default model says so."""
    if settings.model:
        return f"{settings.backend} / {settings.model}"
    if settings.backend == registry.DEFAULT_BACKEND:
        return f"{settings.backend} / the bundled model"
    return f"{settings.backend} / its default model"


def _identity(settings: LLMSettings, base: Path | None) -> tuple:
    """What makes two targets' models the same model (not cache or thread settings)."""
    model = settings.model
    if model and base is not None and resolve_path(model, base).exists():
        model = str(resolve_path(model, base).resolve())
    return settings.backend, model, tuple(getattr(settings, "base_urls", None) or ())


def _options(choice: BackendChoice) -> str:
    given = [(choice.option("backend"), choice.backend), (choice.option("model"), choice.model)]
    given += [(choice.option("base_urls"), url) for url in choice.base_urls]
    return " ".join(f"{opt} {value}" for opt, value in given if value is not None)


def agent_model(targets: list[Target], choice: BackendChoice) -> ModelChoice:
    """The agents' model for ``targets`` with the command line's ``choice``, and why it was chosen.

    InputError where the targets' own model cannot be used and ``choice`` names no other."""
    own = [t for t in targets if t.llm is not None or t.llm_problem is not None]
    usable = [t for t in own if t.llm is not None and t.llm_problem is None]
    if choice.backend is not None or choice.model is not None:
        first = usable[0] if usable else None
        settings = choice.apply(first.llm if first and first.llm else registry.default_settings())
        why = f"named on the command line: {_options(choice)}"
        if own:
            why += ", instead of the targets' own model"
        if first is not None and first.llm is not None and settings.backend == first.llm.backend:
            why += f"; its other settings from {first.llm_source}"
        base_dir = first.llm_base if first is not None and first.llm_base is not None else Path.cwd()
        return ModelChoice(settings, base_dir, why)
    problems: dict[Problem, None] = {}
    for t in own:
        if t.llm_problem is not None:
            problems[replace(t.llm_problem, message=f"{t.llm_problem.message}; {NAME_IT}")] = None
    if problems:
        raise InputError(list(problems))
    if not own:
        settings = choice.apply(registry.default_settings())
        return ModelChoice(settings, Path.cwd(), "the default model: no target names one (persona files carry "
                                                 "none) and no --backend/--model was given")
    models: dict[tuple, Target] = {}
    for t in usable:
        assert t.llm is not None
        models.setdefault(_identity(t.llm, t.llm_base), t)
    if len(models) > 1:
        listed = "; ".join(f"{t.source}: {describe(t.llm)}" for t in models.values() if t.llm is not None)
        raise InputError(Problem("command line", f"the targets name different models ({listed}); evaluate them "
                                                 "separately, or name one model for all with --backend/--model"))
    first = usable[0]
    assert first.llm is not None
    settings = choice.apply(first.llm)
    base_dir = first.llm_base or Path.cwd()
    why = f"the targets' own model ({first.llm_source})"
    if choice.base_urls:
        why += f", on the servers given: {_options(choice)}"
    if first.llm_base is None:
        why += "; relative model paths are taken from the working directory (the run recorded no scenario path)"
    if len(own) < len(targets):
        why += f"; also for the {len(targets) - len(own)} persona-file agent(s), which name no model"
    _check_recorded(usable, settings, base_dir)
    return ModelChoice(settings, base_dir, why)


def _check_recorded(targets: list[Target], settings: LLMSettings, base_dir: Path) -> None:
    """Refuse where the settings would now give another model than the run recorded (a model
    file replaced since the run): the agents would silently be asked on a model they never ran on."""
    expected = registry.lookup(settings.backend, "llm.backend").replay_id(settings, base_dir)
    if expected is None:  # only starting the backend can tell (or the file is gone: building it says so)
        return
    for t in targets:
        if t.recorded is not None and t.recorded[0] == settings.backend and t.recorded[1] != expected:
            raise InputError(Problem(t.source, f"the run recorded model {t.recorded[1]!r}, but its LLM settings "
                                               f"now give {expected!r} (was the model file replaced?); {NAME_IT}",
                                     field="runs.model"))


def judge_model(agent: ModelChoice, choice: BackendChoice) -> ModelChoice:
    """The judge's model: the agents', unless the ``--judge-*`` options name another."""
    settings = choice.apply(agent.settings)
    if choice.backend is None and choice.model is None and not choice.base_urls:
        return ModelChoice(settings, agent.base_dir, "the agents' model: no --judge-backend/--judge-model given")
    return ModelChoice(settings, agent.base_dir,
                       f"named on the command line: {_options(choice)}; other settings from the agents' model")
