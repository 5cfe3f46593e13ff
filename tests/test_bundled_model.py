"""The bundled model as the engine serves it (``simulation/llm/llamacpp/bundled.py``): the shipped
Q4_1 requantised to Q8_0 by llama.cpp's quantiser, made once into the cache folder, the same bytes
on every machine with this llama.cpp (the pinned sha256), the shipped weights rounded finer and not
another model, and a clear error where the copy cannot be written."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from simulation.errors import RunError
from simulation.llm.llamacpp import bundled, shipped_model_path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    return bundled.served_from(shipped_model_path(), tmp_path_factory.mktemp("models"))


def test_the_served_file_is_the_pinned_bytes_made_once(served, tmp_path):
    assert served.name == bundled.SERVED_GGUF
    assert _sha256(served) == bundled.SERVED_SHA256, (
        "this llama.cpp's quantiser makes other bytes than the figures were measured with: measure the bundled "
        "model again (docs/llm.md) and pin the new sha256")
    made = served.stat().st_mtime_ns
    assert bundled.served_from(shipped_model_path(), served.parent).stat().st_mtime_ns == made, "made once, then reused"
    assert not list(served.parent.glob(".*.part")), "no half-written file left behind"


def test_the_served_weights_are_the_shipped_ones_rounded_finer(served):
    """Every 2-D weight as Q8_0, within one Q8_0 step (1/127 of its block's largest value) of the
    shipped Q4_1 value; the metadata (tokenizer, chat template, hyper-parameters) unchanged."""
    import gguf

    shipped, ours = gguf.GGUFReader(str(shipped_model_path())), gguf.GGUFReader(str(served))
    theirs = {t.name: t for t in shipped.tensors}
    assert sorted(theirs) == sorted(t.name for t in ours.tensors)
    for b in ours.tensors:
        a = theirs[b.name]
        x = gguf.quants.dequantize(a.data, a.tensor_type).astype(np.float32).reshape(-1, 32)
        y = gguf.quants.dequantize(b.data, b.tensor_type).astype(np.float32).reshape(-1, 32)
        if len(a.shape) > 1:
            assert b.tensor_type == gguf.GGMLQuantizationType.Q8_0, b.name
        step = np.abs(x).max(axis=1, keepdims=True) / 127
        assert np.all(np.abs(x - y) <= step + 1e-6), b.name
    keys = {k for k in shipped.fields if not k.startswith("GGUF.") and k != "general.file_type"}
    assert {k for k in ours.fields if not k.startswith("GGUF.") and k != "general.file_type"} == keys
    for key in ("tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "llama.block_count"):
        assert ours.fields[key].contents() == shipped.fields[key].contents(), key


def test_the_copy_goes_where_the_cache_folder_is(monkeypatch, tmp_path):
    monkeypatch.setenv("AGORA_CACHE_DIR", str(tmp_path / "cache"))
    assert bundled.models_dir() == tmp_path / "cache" / "models"


def test_a_folder_that_cannot_be_written_is_a_clear_error(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the models folder would be")
    with pytest.raises(RunError, match="cannot write the bundled model's Q8_0 copy in .*not-a-folder.*AGORA_CACHE_DIR"):
        bundled.served_from(shipped_model_path(), blocked)


def test_a_run_begun_on_the_shipped_file_resumes_on_it(tmp_path):
    """Runs recorded before the engine served the Q8_0 name the shipped Q4_1 as their model; a
    resume or verify without ``--model`` goes on with that file, never switching models half way."""
    from simulation.llm import registry
    from simulation.llm.groups import build_run_backends
    from simulation.llm.llamacpp import model_fingerprint
    from simulation.llm.settings import LlamaCppSettings, OpenAISettings

    shipped = shipped_model_path()
    old = model_fingerprint(shipped)
    assert bundled.recorded_file(old) == shipped
    assert bundled.recorded_file(f"{bundled.SERVED_GGUF}@ae43c68cd99d") is None
    assert bundled.recorded_file(f"{bundled.BUNDLED_GGUF}@000000000000") is None, "another file of that name"
    llamacpp = registry.lookup("llamacpp", "llm.backend")
    assert llamacpp.resumed(LlamaCppSettings(), old).model == str(shipped)
    assert llamacpp.resumed(LlamaCppSettings(model="/m.gguf"), old).model == "/m.gguf"
    assert llamacpp.resumed(LlamaCppSettings(), f"{bundled.SERVED_GGUF}@ae43c68cd99d").model is None
    assert registry.lookup("openai", "llm.backend").resumed(OpenAISettings(), old) == OpenAISettings()
    # where a run's backends are built: the replay cache is keyed by the file the run began with
    settings = LlamaCppSettings(cache_path=str(tmp_path / "replay.db"))
    backends = build_run_backends(settings, tmp_path, [], recorded={None: ("llamacpp", old)})
    try:
        assert backends.default.model_id == old
    finally:
        backends.close()
    fresh = build_run_backends(settings, tmp_path, [])
    try:
        assert fresh.default.model_id == model_fingerprint(bundled.bundled_model_path())
    finally:
        fresh.close()
    # and where verify counts a replay's tokens: with the file the run began on
    from simulation.llm.lazy import counter_for

    assert counter_for("llamacpp", old, LlamaCppSettings(), tmp_path) is None, "the Q8_0 is not the recorded model"
    assert counter_for("llamacpp", old, registry.as_recorded(LlamaCppSettings(), ("llamacpp", old)), tmp_path) is not None