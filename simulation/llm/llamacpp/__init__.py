"""The llama.cpp backend (llama-cpp-python, in this process, on the CPU) and the parts only it uses.

- ``backend``: ``LlamaCppBackend``, the class the registry names;
- ``fingerprint``: a GGUF's identity for caches and run records (``model_fingerprint``);
- ``bundled``: the bundled model, shipped as Q4_1 and served as Q8_0 made from it
  (``bundled_model_path``, ``shipped_model_path``);
- ``quiet``: llama.cpp's C-level chatter kept off the terminal;
- ``chat_format``: a GGUF's own chat template, its BOS and end-of-answer tokens, a prompt's
  canonical pieces;
- ``prefix_cache``: saved prefix states, so each prompt token is evaluated once and an answer
  never depends on what ran before it;
- ``sequences``: several KV streams in one context, so a batch's answers are generated together;
- ``sampling``: the grammar-constrained sampler that judges only the highest logits.

Nothing outside this package imports its parts; the rest of the engine sees a ``Backend``
(``simulation.llm.backend``).
"""

from simulation.llm.llamacpp.backend import SEQUENCES, LlamaCppBackend
from simulation.llm.llamacpp.bundled import BUNDLED_GGUF, SERVED_GGUF, bundled_model_path, shipped_model_path
from simulation.llm.llamacpp.fingerprint import model_fingerprint

__all__ = ["BUNDLED_GGUF", "SEQUENCES", "SERVED_GGUF", "LlamaCppBackend", "bundled_model_path", "model_fingerprint",
           "shipped_model_path"]
