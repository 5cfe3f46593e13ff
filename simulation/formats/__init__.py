"""The formats of the files people write, below every package that reads one.

``yamlfile`` (safe YAML that remembers the line of every value), ``strict`` (the base model:
unknown keys are errors), ``fields`` (ids, one-line and long text, shares, clock times),
``validation`` (a parsed file to a validated model, every problem at its line), ``persona`` (the
persona file: one person, their Big Five targets and their usual day), ``paths`` (paths a user
writes) and ``templating`` (the one jinja2 environment for every prompt).

Scenario files (``simulation.scenario``), population specs (``simulation.population``), the LLM
settings (``simulation.llm``) and the evaluation and reward suites all read through these, so
this package imports nothing of the engine but ``simulation.errors``: the persona format lives
here, not in ``scenario/``, so that the scenario loader (which samples populations) and the
population sampler (which writes persona files) need not import each other.
"""

from simulation.formats.fields import ID_PATTERN, Identifier, LongText, ShortText, Unit, clock_time
from simulation.formats.paths import resolve_path
from simulation.formats.persona import HOME, WORK, BigFive, Persona, Routine, RoutineItem
from simulation.formats.strict import StrictModel
from simulation.formats.validation import validate_document
from simulation.formats.yamlfile import YamlDocument, load_yaml, missing_file, parse_yaml, shown

__all__ = [
    "HOME", "ID_PATTERN", "WORK", "BigFive", "Identifier", "LongText", "Persona", "Routine", "RoutineItem",
    "ShortText", "StrictModel", "Unit", "YamlDocument", "clock_time", "load_yaml", "missing_file", "parse_yaml",
    "resolve_path", "shown", "validate_document",
]
