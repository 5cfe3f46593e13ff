"""How an agent thinks: perceive (no LLM), plan, react, converse, answer probes.

Each LLM-backed step renders a prompt, asks the batching client for a schema-constrained
answer and supplies a safe default, so a model that returns garbage slows nobody down.
"""
