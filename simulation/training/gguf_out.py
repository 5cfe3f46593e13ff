"""Write trained weights back as a GGUF that the llamacpp backend runs.

The base model came out of a GGUF (the bundled SmolLM2, or the user's own llama-architecture
GGUF), dequantised into transformers by its GGUF loader. Going back, the base GGUF is the
template: its metadata (architecture, hyper-parameters, the tokenizer's vocabulary, merges and
chat template, BOS/EOS) is copied as it is, and each of its tensors is replaced by the trained
one under the same name, in the same order. So nothing about the tokenizer has to be converted,
and llama.cpp sees the model it knew with new weights.

Two details of llama.cpp's layout: Hugging Face's ``q_proj``/``k_proj`` rows are permuted into
llama.cpp's rotary order (``permute`` below, as llama.cpp's ``convert_hf_to_gguf.py`` does and
transformers' GGUF loader undoes), and a tensor's GGUF shape lists dimensions innermost first,
which a row-major numpy array of Hugging Face's ``(out, in)`` shape already is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simulation.errors import InputError

__all__ = ["GGUF_TYPES", "hf_name", "permute", "write_gguf"]

GGUF_TYPES = ("q8_0", "f16", "f32")
"""What the 2-D weights are written as: Q8_0 (half the size of F16, llama.cpp's fast path on a
CPU, near-lossless), F16 or F32. Norms are always F32."""

_LAYER = re.compile(r"^blk\.(\d+)\.(\w+)\.weight$")
_PER_LAYER = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}


def hf_name(gguf_name: str) -> str:
    """The Hugging Face (Llama) state-dict name of a llama.cpp tensor name."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name]
    m = _LAYER.match(gguf_name)
    if m is None or m.group(2) not in _PER_LAYER:
        raise KeyError(gguf_name)
    return f"model.layers.{m.group(1)}.{_PER_LAYER[m.group(2)]}.weight"


def permute(weights: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """Hugging Face's q/k projection rows into llama.cpp's rotary layout (the inverse of
    transformers' ``_reverse_permute_weights``)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


@functools.lru_cache(maxsize=2)
def _read_template(path: str, size: int, mtime_ns: int) -> Any:
    """The template's parsed metadata and tensor list, read once per file and version: gguf-py
    parses a tokenizer's 49,152 tokens and merges field by field (seconds), and ``agora evolve``
    writes a model back into the same template every round. ``size`` and ``mtime_ns`` key it to
    the file as it is."""
    import gguf

    return gguf.GGUFReader(path)


def write_gguf(weights: Mapping[str, np.ndarray], template: Path, out: Path, *, gguf_type: str = "q8_0",
               name: str | None = None) -> Path:
    """Write ``weights`` (a Llama-family Hugging Face state dict, as numpy arrays) as a GGUF at
    ``out``, with ``template``'s metadata and tensor names. Raises InputError when the template
    is not a llama-architecture GGUF or a tensor it needs is missing or of another shape."""
    import gguf

    if gguf_type not in GGUF_TYPES:
        raise InputError(f"GGUF type {gguf_type!r}: expected one of {', '.join(GGUF_TYPES)}")
    stat = template.stat()
    reader = _read_template(str(template.resolve()), stat.st_size, stat.st_mtime_ns)
    arch = reader.fields["general.architecture"].contents()
    if arch != "llama":
        raise InputError(f"{template}: a {arch!r} GGUF; writing trained weights back supports llama-architecture "
                         "models (SmolLM2, Llama); use the Hugging Face folder instead")
    n_head = int(reader.fields["llama.attention.head_count"].contents())
    n_head_kv = int(reader.fields["llama.attention.head_count_kv"].contents())
    file_type = {"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "f32": gguf.LlamaFileType.ALL_F32}[gguf_type]

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(str(tmp), arch=arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY and len(field.types) > 1 else None
        value = field.contents()
        if key == "general.name" and name:
            value = name
        writer.add_key_value(key, value, vtype, sub_type=sub)
    writer.add_file_type(file_type)

    for tensor in reader.tensors:
        source = hf_name(tensor.name)
        if source not in weights and tensor.name == "output.weight":
            source = "model.embed_tokens.weight"  # tied embeddings, written untied in the template
        if source not in weights:
            raise InputError(f"the trained weights have no {source} (for {tensor.name} of {template})")
        data = np.asarray(weights[source], dtype=np.float32)
        expected = tuple(int(d) for d in reversed(tensor.shape.tolist()))
        if data.shape != expected:
            raise InputError(f"{source} has shape {data.shape}; {template}'s {tensor.name} needs {expected}")
        if tensor.name.endswith(("attn_q.weight", "attn_k.weight")):
            data = permute(data, n_head, n_head if ".attn_q." in tensor.name else n_head_kv)
        if data.ndim == 1 or gguf_type == "f32":
            writer.add_tensor(tensor.name, data)
        elif gguf_type == "f16" or data.shape[-1] % 32:
            writer.add_tensor(tensor.name, data.astype(np.float16))
        else:
            packed = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(tensor.name, packed, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out
