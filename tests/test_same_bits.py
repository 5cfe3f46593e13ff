"""An answer is the same token ids alone or beside others, on every kind of GGUF a run may use.

The llama.cpp backend decodes a batch's answers together, one sequence each (``sequences.py``);
the claim that an answer does not depend on its neighbours is what makes runs deterministic
whatever the batch. ggml may pick other kernels by batch size for other quantisations, so the
claim is tested on each kind a user runs: the bundled model's Q4_1 as its package ships it, a Q8_0
(what the engine serves the bundled model as, ``llamacpp/bundled.py``; here written by the
project's own GGUF writer, which is what ``agora train`` produces), and the measurement model's Q4_K_M when it has been
fetched (``make measure-model``; skipped otherwise), where the claim does **not** hold (an expected
failure, strict: it says so if that changes). Token ids are compared, not text (two token
sequences can spell the same text).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
MEASURE = ROOT / ".cache" / "measure-model" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


class Act(BaseModel):
    action: str
    place: str


def _requests():
    from simulation.llm.types import LLMRequest

    schema = Act.model_json_schema()
    asks = [LLMRequest(messages=[{"role": "system", "content": f"You are person {a}, a baker in a small town. "
                                                                "Answer with JSON only."},
                                 {"role": "user", "content": f"It is {8 + h}:00. What do you do next?"}],
                       json_schema=schema, max_tokens=32, temperature=0.7, seed=100 * a + h)
            for a in range(2) for h in range(2)]
    free = [LLMRequest(messages=[{"role": "user", "content": f"Describe the harbour at dawn in one sentence ({i})."}],
                       max_tokens=24, temperature=0.9, seed=7 + i) for i in range(2)]
    return asks + free


def _unpermute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's rotary row order back to Hugging Face's (the inverse of ``gguf_out.permute``)."""
    return (weights.reshape(n_head, weights.shape[0] // n_head // 2, 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


@pytest.fixture(scope="module")
def q8_0(tmp_path_factory) -> Path:
    """The bundled model's weights, dequantised with gguf-py and written back as Q8_0 by
    ``simulation.training.gguf_out.write_gguf`` (no torch: the tensors are read from the GGUF)."""
    import gguf

    from simulation.llm.llamacpp import bundled_model_path
    from simulation.training.gguf_out import hf_name, write_gguf

    source = bundled_model_path()
    reader = gguf.GGUFReader(str(source))
    n_head = int(reader.fields["llama.attention.head_count"].contents())
    n_head_kv = int(reader.fields["llama.attention.head_count_kv"].contents())
    weights = {}
    for tensor in reader.tensors:
        data = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        data = data.reshape(tuple(int(d) for d in reversed(tensor.shape.tolist())))
        if tensor.name.endswith("attn_q.weight"):
            data = _unpermute(data, n_head)
        elif tensor.name.endswith("attn_k.weight"):
            data = _unpermute(data, n_head_kv)
        weights[hf_name(tensor.name)] = data
    return write_gguf(weights, source, tmp_path_factory.mktemp("q8") / "bundled-q8_0.gguf", gguf_type="q8_0")


def _same_bits(model: Path) -> None:
    from simulation.llm.llamacpp import LlamaCppBackend

    requests = _requests()
    together = LlamaCppBackend(model=model, context_tokens=1024, threads=2, sequences=8)
    try:
        texts = [c.text for c in together.generate(requests)]
        beside = list(together.answer_tokens)
    finally:
        together.close()
    alone_backend = LlamaCppBackend(model=model, context_tokens=1024, threads=2, sequences=1)
    try:
        alone = []
        for request in reversed(requests):  # another order, and nothing beside it
            alone_backend.generate([request])
            alone.append(alone_backend.answer_tokens[0])
        alone.reverse()
    finally:
        alone_backend.close()
    assert all(t for t in beside), texts  # every request generated something
    for i, (a, b) in enumerate(zip(beside, alone)):
        assert a == b, f"request {i}: beside others {a}, alone {b}"


@pytest.mark.slow
def test_the_shipped_q4_1_answers_the_same_token_ids_alone_or_beside_others():
    from simulation.llm.llamacpp import shipped_model_path

    _same_bits(shipped_model_path())


@pytest.mark.slow
def test_a_q8_0_written_by_the_projects_gguf_writer_answers_the_same_token_ids_alone_or_beside_others(q8_0):
    import gguf

    types = {t.tensor_type for t in gguf.GGUFReader(str(q8_0)).tensors}
    assert gguf.GGMLQuantizationType.Q8_0 in types
    _same_bits(q8_0)


@pytest.mark.slow
@pytest.mark.skipif(not MEASURE.is_file(), reason="the measurement model is not fetched (make measure-model)")
@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="measured 2026-11-27: on the 1.5B's Q4_K_M an answer decoded beside others can differ "
                          "from the same answer alone (request 1 parts at its 9th token: ',' against ', '); ggml "
                          "computes other kernels by batch size there. Runs stay reproducible (same batches, "
                          "and the replay cache), but an answer depends on its batch on this file")
def test_the_measurement_models_q4_k_m_answers_the_same_token_ids_alone_or_beside_others():
    _same_bits(MEASURE)
