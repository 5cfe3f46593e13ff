"""How a person thinks: phases (perceive, rate importance, decide, converse, recap, reflect) run
over a narrow context (``Mind``), plus end-of-run probes. See docs/cognition.md.

Each LLM-backed step retrieves what it needs from memory, renders a prompt, asks for a
schema-constrained answer and supplies a safe default, so a model that returns garbage slows
nobody down.
"""

from simulation.cognition.mind import MindSettings, Mind, TickNotes
from simulation.cognition.phase import Phase
from simulation.cognition.question import Question
from simulation.cognition.phases import DEFAULT, PHASES, default_phases, phase_class, phases_from_names, scenario_phases

__all__ = ["DEFAULT", "PHASES", "Mind", "MindSettings", "Phase", "Question", "TickNotes", "default_phases", "phase_class",
           "phases_from_names", "scenario_phases"]
