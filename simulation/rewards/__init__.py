"""Co-evolution rewards from a run's interaction logs, exported as training data (issue 7).

In the spirit of CoMAS (Xue et al., 2025, "Co-Evolving Multi-Agent Systems via Interaction
Rewards"), the town's own interactions become reward signals for each persona policy:

- ``turns``: what is judged, read from run.db alone: every utterance and every decided action
  (``action`` and ``reaction`` events), with the scene the judge sees, its group (a conversation,
  or the actions of one tick) and the ``llm_calls`` row whose completion produced it.
- ``rubric``: the four-item social-simulation rubric and its answer schema.
- ``judging``: the LLM judge over turns, and a TRL reward function that re-judges fresh completions.
- ``critique``: optional CoMAS-style peer critique (speaker, critic and scorer agents).
- ``arithmetic``: rewards, group-normalised advantages, running totals, the zero-sum peer mapping.
- ``engine``: one labelling pass (judge, critique, arithmetic) in one event loop.
- ``store``: the ``rewards``, ``reward_calls`` and ``reward_passes`` tables of run.db.
- ``export``: SFT, KTO, DPO and GRPO/RLOO JSON Lines files for TRL, per agent and for the town.
"""
