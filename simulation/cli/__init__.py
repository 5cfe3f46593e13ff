"""The ``agora`` command line: run, resume, validate, schema, ui, eval, personas, rewards.

``app`` is the typer application and ``main`` the console script (``simulation.cli:main``);
``python -m simulation.cli`` runs it too. Shared pieces (consoles, error handling, LLM
options, the progress rule) are in ``common``; each command group has its own module.
"""

from simulation.cli.entry import app, main

__all__ = ["app", "main"]
