"""Test doubles for code built on Agora: a backend that answers like a model, with no model.

Test your own phases (and scenarios) with ``ScriptedBackend``: pass it as the ``backend`` of a
``Simulation`` and every question the engine asks gets a schema-valid answer by its purpose,
deterministically per seed; ``answers={"my_phase": {...}}`` says what your phase's questions
are answered, and ``backend.batches`` holds every request asked (``simulation.testing.scripted``).
"""

from simulation.testing.scripted import AnsweringBackend, ScriptedBackend

__all__ = ["AnsweringBackend", "ScriptedBackend"]
