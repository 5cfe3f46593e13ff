"""Convert the bundled SmolLM2 GGUF into a Hugging Face folder, for vLLM (which does not read it).

Used by `make test-vllm` and `bench/llm.py --backend vllm`; needs `transformers` and `gguf`.
Usage: python tools/gguf_to_hf.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path


def convert(out: Path) -> Path:
    from simulation.llm.llamacpp import bundled_model_path
    from simulation.training.base import dequantise

    return dequantise(bundled_model_path(), out)


if __name__ == "__main__":
    print(convert(Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/smollm2-hf")))
