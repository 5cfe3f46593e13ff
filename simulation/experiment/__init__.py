"""Experiments: conditions of a scenario run over the same seeds, compared with the control
condition seed by seed (``agora experiment SPEC.yaml``; docs/experiments.md)."""

from simulation.experiment.effects import Effect, effect
from simulation.experiment.spec import Condition, ExperimentSpec, load_spec

__all__ = ["Condition", "Effect", "ExperimentSpec", "effect", "load_spec"]
