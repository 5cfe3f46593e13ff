"""Population specs and a deterministic sampler: marginal distributions in, persona files out.

A spec (``personas/populations/*.yaml``, ``spec``) gives marginals for age, occupation,
household and each Big Five factor, plus name lists; the sampler (``sampler``, with
``names`` and ``traits``) draws the same complete people for the same spec, n and seed;
``marginals`` and ``plots`` compare a sample with its spec; ``writer`` puts a sample on disk;
``backstory`` lets an LLM add backstories. A scenario's ``population:`` entry is resolved by
the scenario loader (``simulation.scenario.sampled``).
"""

from simulation.population.backstory import add_backstories
from simulation.population.marginals import expected_marginals, observed_marginals, truncated_cdf
from simulation.population.names import TooFewNames, slug
from simulation.population.plots import marginals_figure
from simulation.population.sampler import Sampled, sample
from simulation.population.spec import (FACTORS, AgeBin, BigFiveSpec, Choice, Household, Names, Occupation,
                                        PopulationSpec, RoutineSpec, TimeWindow, TraitDistribution, load_spec)
from simulation.population.traits import speaking_style_for, traits_for
from simulation.population.writer import persona_yaml, write_sample

__all__ = [
    "FACTORS", "AgeBin", "BigFiveSpec", "Choice", "Household", "Names", "Occupation", "PopulationSpec",
    "RoutineSpec", "Sampled", "TimeWindow", "TooFewNames", "TraitDistribution", "add_backstories",
    "expected_marginals", "load_spec", "marginals_figure", "observed_marginals", "persona_yaml", "sample", "slug",
    "speaking_style_for", "traits_for", "truncated_cdf", "write_sample",
]
