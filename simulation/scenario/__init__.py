"""Scenario and persona files: pydantic models and a loader whose errors name file, line and field.

A scenario describes one run: the clock, the town (places, objects, walking paths), the
people (persona files by reference, or inline, and a sampled population), scheduled
whispers and place events, probe questions asked at the end, facts whose spread is
traced, and LLM settings. ``scenarios/valentines.yaml`` documents every field with comments.

The schema is split by section (``town``, ``timeline``, ``measures``, ``people``,
``settings``, ``schema`` for the whole file); loading is ``loading`` (with ``references`` and
``sampled``). The persona file, the shared field types and the located validation are file
formats of their own (``simulation.formats``: ``persona``, ``fields``, ``validation``), which
the population sampler reads too; this face re-exports what other modules use, those included.
"""

from simulation.errors import Problem
from simulation.formats import (BigFive, Identifier, LongText, Persona, Routine, ShortText, StrictModel, Unit,
                                resolve_path)
from simulation.llm.settings import LlamaCppSettings, LLMSettings, OpenAISettings, VLLMSettings
from simulation.scenario.loading import load, load_persona, problem_at
from simulation.scenario.measures import Fact, FactDetail, Probe, Topic
from simulation.scenario.people import PersonaEntry, PopulationEntry
from simulation.scenario.resolved import LoadedScenario, ResolvedPersona
from simulation.scenario.schema import Scenario, json_schema
from simulation.scenario.settings import CognitionSettings, MemorySettings, RetrievalWeights
from simulation.scenario.timeline import Clock, ScheduledEvent
from simulation.scenario.town import PathSpec, Place, Town

__all__ = [
    "BigFive", "Clock", "Fact", "FactDetail", "CognitionSettings", "Identifier", "LLMSettings", "LlamaCppSettings", "LoadedScenario",
    "LongText", "MemorySettings", "OpenAISettings", "PathSpec", "Persona", "PersonaEntry", "Place",
    "PopulationEntry", "Probe", "Problem", "ResolvedPersona", "RetrievalWeights", "Routine", "Scenario",
    "ScheduledEvent", "ShortText", "StrictModel", "Topic", "Town", "Unit", "VLLMSettings", "json_schema", "load",
    "load_persona", "problem_at", "resolve_path",
]
