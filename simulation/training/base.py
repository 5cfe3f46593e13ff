"""The model training starts from: a GGUF dequantised into a Hugging Face folder.

transformers reads GGUF files (``gguf_file=``) and dequantises them on load; the loaded model
stays marked as a GGUF quantisation, which transformers refuses to save or train as such, so its
weights are copied into a plain model of the same config. The folder keeps the tokenizer (with
the GGUF's chat template) and is what TRL trains and vLLM serves.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

__all__ = ["dequantise", "is_hf_folder", "resolve_base"]


def is_hf_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def dequantise(gguf: Path, out: Path) -> Path:
    """``gguf`` as a Hugging Face folder at ``out`` (kept if it is already there)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_hf_folder(out):
        return out
    with tempfile.TemporaryDirectory() as tmp:
        # transformers opens GGUFs from a folder; a link would be read through, a copy is safe.
        shutil.copy(gguf, Path(tmp) / gguf.name)
        tokenizer = AutoTokenizer.from_pretrained(tmp, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=gguf.name)
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(loaded.state_dict())
        part = out.with_name(out.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        model.save_pretrained(part)
        tokenizer.save_pretrained(part)
        part.replace(out)
    return out


def resolve_base(base: str, cache: Path) -> tuple[Path, Path | None, str]:
    """``--base``: "bundled" (the bundled SmolLM2 GGUF), a GGUF file, or a Hugging Face folder.
    Returns (the Hugging Face folder to train, the GGUF to write the result back into or None,
    a label for the lineage). A GGUF is dequantised once into ``cache`` under its fingerprint."""
    from simulation.errors import InputError, Problem
    from simulation.llm.llamacpp import bundled_model_path, model_fingerprint

    if base == "bundled":
        gguf = bundled_model_path()
    else:
        path = Path(base).expanduser()
        if is_hf_folder(path):
            return path, None, str(path)
        if not path.is_file():
            raise InputError(Problem("--base", f"{base}: no such GGUF file or Hugging Face folder "
                                               "(a folder needs config.json)"))
        gguf = path
    try:
        label = model_fingerprint(gguf)
    except OSError as exc:
        raise InputError(Problem("--base", f"cannot read {gguf}: {exc.strerror or exc}")) from None
    return dequantise(gguf, cache / label.replace("@", "-")), gguf, label
