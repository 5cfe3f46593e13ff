"""Agora: a multi-agent social simulation engine (import package ``simulation``)."""

__version__ = "0.1.0"
