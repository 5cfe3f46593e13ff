"""How an agent thinks: perceive (no LLM), rate importance, plan (day, hours, steps), react,
converse and recap, reflect, answer probes. See docs/cognition.md.

Each LLM-backed step retrieves what it needs from memory, renders a prompt, asks the
batching client for a schema-constrained answer and supplies a safe default, so a model
that returns garbage slows nobody down.
"""
