"""Agora's version (recorded in every run's ``runs.agora_version``)."""

__version__ = "0.1.0"
