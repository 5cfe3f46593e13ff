"""Convert the bundled SmolLM2 GGUF into a Hugging Face folder, for vLLM (which does not read it).

Used by `make test-vllm` and `bench/llm.py --backend vllm`; needs `transformers` and `gguf`.
Usage: python tools/gguf_to_hf.py OUT_DIR
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path


def convert(out: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simulation.llm.llamacpp import bundled_model_path

    gguf = bundled_model_path()
    if (out / "config.json").is_file():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / gguf.name
        shutil.copy(gguf, link)
        tokenizer = AutoTokenizer.from_pretrained(tmp, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=gguf.name)
        # The weights are dequantised on load, but the model stays marked as a GGUF
        # quantisation, which transformers refuses to save: copy them into a plain model.
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict(loaded.state_dict())
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":
    print(convert(Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/smollm2-hf")))
