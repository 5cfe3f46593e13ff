"""An experiment's believability stage (Generative Agents, sections 6.1-6.2): every condition's
runs interviewed (the ``believability`` suite, each agent on its run's own model), then the
conditions ranked by a judge (``evaluation.ranking``).

The same seed is one replicate across conditions, so an agent is matched across conditions by
seed and persona id (``SEED/AGENT``): the judge sets Isabella's answers of seed 3 under full
cognition beside Isabella's of seed 3 without reflection. An interview already written (its
``results.json``) is read back, not asked again, so a resumed experiment redoes nothing.
"""

from __future__ import annotations

from pathlib import Path

from simulation.evaluation import engine, models, ranking
from simulation.evaluation import report as eval_report
from simulation.evaluation.believability import SUITE
from simulation.evaluation.session import EvalOptions
from simulation.evaluation.targets import resolve
from simulation.experiment.spec import Believability
from simulation.llm import factory
from simulation.llm.backend import Backend
from simulation.llm.factory import BackendChoice
from simulation.llm.settings import LLMSettings

__all__ = ["interview_condition", "judge_of", "rank_conditions"]


def interview_condition(label: str, runs: list[tuple[int, Path]], out: Path, *, llm: BackendChoice | None = None,
                        backend: Backend | None = None) -> ranking.Condition:
    """Interview every run's people (into ``out/seed-N``), merged into one condition keyed ``SEED/AGENT``."""
    merged = ranking.Condition(label, out, {}, {})
    for seed, run_dir in runs:
        folder = out / f"seed-{seed}"
        if not (folder / "results.json").exists():
            targets = resolve([run_dir])
            own = backend
            if own is None:
                chosen = models.agent_model(targets, llm or BackendChoice())
                own = factory.build_backend(chosen.settings, chosen.base_dir)
            try:
                result = engine.evaluate(targets, own, own, EvalOptions(suites=(SUITE,), seed=seed))
            finally:
                if own is not backend:
                    own.close()
            eval_report.write(result, folder)
        one = ranking.read_condition(label, folder)
        merged.answers.update({f"{seed}/{a}": v for a, v in one.answers.items()})
        merged.personas.update({f"{seed}/{a}": v for a, v in one.personas.items()})
    return merged


def judge_of(spec: Believability, base: Path) -> tuple[LLMSettings, Path]:
    """The judge's settings (a relative model path taken from ``base``, the experiment file's folder)."""
    model = spec.judge.model
    if model and not Path(model).is_absolute() and (base / model).exists():
        model = str((base / model).resolve())
    choice = BackendChoice(backend=spec.judge.backend, model=model, base_urls=list(spec.judge.base_url),
                           option_prefix="believability.judge.")
    return choice.apply(LLMSettings(backend="llamacpp")), base


def rank_conditions(conditions: list[ranking.Condition], spec: Believability, out: Path, base: Path, command: str,
                    judge: Backend | None = None) -> ranking.Ranking:
    """Rank the conditions by their interviews (``out``: report.md, ranking.json, comparisons.csv, plot)."""
    settings, base_dir = judge_of(spec, base)
    own = judge if judge is not None else factory.build_backend(settings, base_dir)
    try:
        result = ranking.rank(conditions, own, per_category=spec.per_category, bootstrap=spec.bootstrap)
    finally:
        if own is not judge:
            own.close()
    ranking.write(result, out, models.describe(settings) if judge is None else f"{own.name} / {own.model_id}",
                  command)
    return result
