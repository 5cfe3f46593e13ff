"""Persona-fidelity evaluation: does an agent answer, act and talk like the persona it plays?

Suites (each in its own module, all asking the LLM through the batching client):

- ``bigfive``: the IPIP-50 inventory, one item per fresh context, scored against the persona's
  Big Five targets (MAE, high/low agreement beside its constant-guess baseline and Cohen's
  kappa, correlation across personas, bootstrap CIs).
- ``interview``: InCharacter-style open questions, rated per factor by a judge model.
- ``personagym``: the five PersonaGym tasks, judged 1-5 against rubrics with anchors.
- ``consistency``: a run's logged actions and utterances judged against the persona (0-9).

``engine`` runs the suites, ``report`` writes eval.db, JSON, CSV, Markdown and plots,
``targets`` turns command-line targets (persona files, scenarios, run directories) into agents,
and ``models`` picks the agents' and the judge's model and says why (never a silent fallback).
"""
