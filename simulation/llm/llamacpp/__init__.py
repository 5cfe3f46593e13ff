"""The llama.cpp backend (llama-cpp-python, in this process, on the CPU) and the parts only it uses.

- ``backend``: ``LlamaCppBackend``, the class the registry names, and the bundled model's path
  and a GGUF's fingerprint (``bundled_model_path``, ``model_fingerprint``);
- ``chat_format``: a GGUF's own chat template, its BOS and end-of-answer tokens, a prompt's
  canonical pieces;
- ``prefix_cache``: saved prefix states, so each prompt token is evaluated once and an answer
  never depends on what ran before it;
- ``sequences``: several KV streams in one context, so a batch's answers are generated together;
- ``sampling``: the grammar-constrained sampler that judges only the highest logits.

Nothing outside this package imports its parts; the rest of the engine sees a ``Backend``
(``simulation.llm.backend``).
"""

from simulation.llm.llamacpp.backend import (
    BUNDLED_GGUF,
    SEQUENCES,
    LlamaCppBackend,
    bundled_model_path,
    model_fingerprint,
)

__all__ = ["BUNDLED_GGUF", "SEQUENCES", "LlamaCppBackend", "bundled_model_path", "model_fingerprint"]
