"""The scripted test double now ships in the package: ``simulation.testing`` (this name is kept so
older imports, ``from scripted import ScriptedBackend``, keep working)."""

from simulation.testing.scripted import AnsweringBackend, ScriptedBackend, enum_values

_enum = enum_values

__all__ = ["AnsweringBackend", "ScriptedBackend", "enum_values"]
