"""`agora train`: the base model dequantised from the bundled GGUF, trained with TRL for a few steps
on a scripted run's rewarded turns, written back as a GGUF that the llamacpp backend loads and
that answers a schema-constrained question; the GGUF writer's layout checked against the original
model; the lineage in train.json; bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import agora
from rewards_support import JudgeDouble, finished_scripted_run

from simulation.errors import InputError
from simulation.evaluation import targets
from simulation.rewards import engine, rubric, store

pytest.importorskip("trl")
pytest.importorskip("peft")


@pytest.fixture(scope="module")
def base_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `--cache` folder holding the bundled model dequantised, as `agora train` leaves it."""
    from simulation.training.base import resolve_base

    cache = tmp_path_factory.mktemp("base")
    resolve_base("bundled", cache)
    return cache


@pytest.fixture(scope="module")
def base_hf(base_cache: Path) -> Path:
    return next(p for p in base_cache.iterdir() if (p / "config.json").is_file())


@pytest.fixture(scope="module")
def rewarded_run(tmp_path_factory: pytest.TempPathFactory, flagship: Any) -> Path:
    """A 12-tick scripted flagship run, judged by the test double with varied scores."""
    run_dir = finished_scripted_run(flagship, tmp_path_factory.mktemp("train-run"), 12)

    def varied(req: Any) -> dict[str, int]:
        n = 1 + req.seed % 5
        return dict(zip(rubric.KEYS, (n, n, 1 + req.seed // 7 % 5, 3)))

    personas = {t.agent_id: t.persona for t in targets.resolve([run_dir])}
    result = engine.label(run_dir / "run.db", personas, JudgeDouble(scores=varied), None, engine.RewardOptions())
    store.write(run_dir / "run.db", result)
    return run_dir


def test_the_gguf_writer_puts_q_and_k_back_in_llama_cpps_order():
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    from simulation.training.gguf_out import hf_name, permute

    undo = LlamaTensorProcessor(config={"num_attention_heads": 9, "num_key_value_heads": 3})
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(576, 576)), rng.normal(size=(192, 576))
    assert np.array_equal(undo._reverse_permute_weights(permute(q, 9, 9), 9, 9), q)
    assert np.array_equal(undo._reverse_permute_weights(permute(k, 9, 3), 9, 3), k)
    assert hf_name("blk.7.attn_k.weight") == "model.layers.7.self_attn.k_proj.weight"
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"


@pytest.mark.heavy
def test_the_base_written_back_answers_as_the_bundled_model_does(base_hf: Path, tmp_path: Path):
    """Dequantised and written back as Q8_0, unchanged weights give the same greedy answer: the
    layout, the permutation and the tokenizer's metadata all survived the round trip."""
    from safetensors.numpy import load_file

    from simulation.llm.llamacpp import LlamaCppBackend, bundled_model_path
    from simulation.llm.types import LLMRequest
    from simulation.training.gguf_out import write_gguf

    weights = load_file(str(next(base_hf.glob("*.safetensors"))))
    written = write_gguf(weights, bundled_model_path(), tmp_path / "same.gguf")
    request = LLMRequest(agent_id="t", purpose="t", seed=1, temperature=0.0, max_tokens=24,
                         messages=[{"role": "user", "content": "What is the capital of France? One sentence."}])
    answers = []
    for model in (bundled_model_path(), written):
        backend = LlamaCppBackend(model=model, context_tokens=512, threads=2)
        try:
            answers.append(backend.generate([request])[0].text)
        finally:
            backend.close()
    assert "Paris" in answers[0] and answers[1] == answers[0]


@pytest.mark.heavy
def test_sft_for_a_few_steps_gives_a_gguf_the_llamacpp_backend_runs(rewarded_run: Path, base_cache: Path,
                                                                    tmp_path: Path):
    from pydantic import BaseModel

    from simulation.llm.llamacpp import LlamaCppBackend
    from simulation.llm.types import LLMRequest

    out = tmp_path / "sft"
    got = agora("train", str(rewarded_run), "--out", str(out), "--format", "sft", "--steps", "2",
                "--grad-accumulation", "1", "--cache", str(base_cache), "--quiet")
    assert got.exit_code == 0, got.output
    assert got.output.strip().endswith(str(out))
    manifest = json.loads((out / "train.json").read_text())
    assert manifest["steps"] == 2 and manifest["runs"] == {str(rewarded_run): manifest["rows"]} and manifest["rows"] > 0
    assert manifest["options"]["lora"] is True and manifest["outputs"]["gguf"] == "model.gguf"
    assert (out / "loss.png").stat().st_size > 0 and (out / "hf" / "config.json").is_file()
    assert len((out / "losses.csv").read_text().splitlines()) == 3

    class Choice(BaseModel):
        answer: bool

    backend = LlamaCppBackend(model=out / "model.gguf", context_tokens=512, threads=2)
    try:
        request = LLMRequest(agent_id="t", purpose="t", seed=1, temperature=0.0, max_tokens=16,
                             messages=[{"role": "user", "content": "Is Paris in France? Answer as JSON."}],
                             json_schema=Choice.model_json_schema())
        answer = backend.generate([request])[0]
    finally:
        backend.close()
    Choice.model_validate_json(answer.text)


@pytest.mark.heavy
def test_kto_takes_the_runs_turns_labelled_by_advantage(rewarded_run: Path, base_hf: Path, tmp_path: Path):
    """KTO's trainer accepts the rows (two kinds of label, batches of two for its KL estimate);
    a KTO step costs as much as a DPO step, which the next test takes."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simulation.training.trainer import TrainOptions, _as_training_row, _trainer, load_rows

    rows, per_run = load_rows([rewarded_run], "kto", tmp_path / "data")
    data = Dataset.from_list([_as_training_row(r, "kto") for r in rows])
    assert set(data["label"]) == {True, False} and per_run == {str(rewarded_run): len(rows)}
    trainer = _trainer("kto", AutoModelForCausalLM.from_pretrained(base_hf), AutoTokenizer.from_pretrained(base_hf),
                       data, tmp_path, TrainOptions(format="kto", steps=1), None, [])
    assert trainer.args.per_device_train_batch_size == 2 and len(trainer.train_dataset) == len(rows)


@pytest.fixture(scope="module")
def tiny_base(base_hf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-layer Llama, 64 wide, with the bundled model's tokenizer and chat template, randomly
    initialised (seed 0). A preference step on the bundled model evaluates four 1,100-token
    sequences and took 141 s of an idle two-core machine; what the step checks (the rows reach
    TRL's trainer, the loss is finite, long examples are counted out) does not depend on the
    model's size, as in TRL's own tests, and the SFT test trains the bundled model itself."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(base_hf)
    config.update({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "head_dim": 16})
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-base")
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(base_hf).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("fmt", ["dpo"])
@pytest.mark.heavy
def test_preference_objectives_take_one_step(rewarded_run: Path, tiny_base: Path, tmp_path: Path, fmt: str):
    out = tmp_path / fmt
    got = agora("train", str(rewarded_run), "--out", str(out), "--format", fmt, "--steps", "1", "--grad-accumulation",
                "1", "--base", str(tiny_base), "--max-length", "1200", "--quiet")
    assert got.exit_code == 0, got.output
    manifest = json.loads((out / "train.json").read_text())
    assert manifest["steps"] == 1 and manifest["outputs"]["gguf"] is None, "a Hugging Face base gives no GGUF"
    assert np.isfinite(manifest["final_loss"])
    assert manifest["skipped_long"] > 0 and manifest["rows"] > 0, "examples over --max-length are left out, not cut"


def test_bad_input_is_exit_2_with_the_field(tmp_path: Path, rewarded_run: Path):
    got = agora("train", str(tmp_path), "--out", str(tmp_path / "o"), "--quiet")
    assert got.exit_code == 2 and "no run.db" in got.output
    got = agora("train", str(rewarded_run), "--out", str(tmp_path / "o"), "--format", "grpo", "--quiet")
    assert got.exit_code == 2 and "--format" in got.output
    got = agora("train", str(rewarded_run), "--out", str(tmp_path / "o"), "--base", str(tmp_path / "none.gguf"),
                "--quiet")
    assert got.exit_code == 2 and "--base" in got.output
    unjudged = tmp_path / "unjudged"
    unjudged.mkdir()
    shutil.copy(rewarded_run / "run.db", unjudged / "run.db")
    import sqlite3

    con = sqlite3.connect(unjudged / "run.db")
    con.execute("delete from rewards")
    con.commit()
    con.close()
    got = agora("train", str(unjudged), "--out", str(tmp_path / "o"), "--quiet")
    assert got.exit_code == 2 and "agora rewards" in got.output


@pytest.mark.heavy
def test_an_evolve_round_on_the_scripted_double_keeps_its_lineage_and_scores(flagship: Any, base_cache: Path,
                                                                             tmp_path: Path):
    """Round 0 measures the starting model on the held-out seed; round 1 runs the training seed,
    judges it, trains one step from the bundled model, and measures the new model on the held-out
    seed. The agents are the scripted double (so the runs do not depend on the weights); the
    training and the GGUF are real."""
    import sqlite_utils

    from simulation.llm.llamacpp import bundled_model_path
    from simulation.rundb import lineage
    from simulation.testing import ScriptedBackend
    from simulation.training import evolve as ev
    from simulation.training.trainer import TrainOptions

    def varied(req: Any) -> dict[str, int]:
        n = 1 + req.seed % 5
        return dict(zip(rubric.KEYS, (n, n, 1 + req.seed // 7 % 5, 3)))

    asked: list[str] = []

    def agents_for(model: str) -> Any:
        asked.append(model)
        return ScriptedBackend()

    out = tmp_path / "evolve"
    results = ev.evolve(flagship, out, ev.EvolveOptions(rounds=1, seeds=(1,), held_out=(101,), ticks=12),
                        TrainOptions(steps=1, grad_accumulation=1), base="bundled", judge=JudgeDouble(scores=varied),
                        agents_for=agents_for, cache=base_cache)
    assert [r.round for r in results] == [0, 1]
    assert asked[0] == str(bundled_model_path()) and asked[1] == asked[0], "round 1's training runs use round 0's model"
    assert asked[2] == results[1].model and results[1].model.endswith("round-1/model/model.gguf")
    assert results[1].parent == str(bundled_model_path()) and len(results[1].trained_on) == 1
    assert {"reward.in_character", "reward.mean", "talk.conversations"} <= set(results[1].metrics)

    db = sqlite_utils.Database(out / "evolve.db")
    assert [r["round"] for r in db["rounds"].rows] == [0, 1]
    assert {(r["round"], r["role"]) for r in db["runs"].rows} == {(0, "held-out"), (1, "train"), (1, "held-out")}
    assert db["metrics"].count > 10
    report = ev.write_report(results, out, "agora evolve test", "judge-double")
    text = report.read_text()
    assert "| `reward.mean` |" in text and "round 1" in text and (out / "rounds.png").stat().st_size > 0
    assert lineage.read(out) == results, "evolve.db gives back every round as recorded (the viewer reads it)"
    with pytest.raises(InputError, match="finished"):
        ev.evolve(flagship, out, ev.EvolveOptions(rounds=1, seeds=(1,), held_out=(101,)), TrainOptions(),
                  base="bundled", judge=JudgeDouble(), agents_for=agents_for, cache=base_cache)

    # asking for one more round goes on from the recorded ones: round 2 starts from round 1's model
    more = ev.evolve(flagship, out, ev.EvolveOptions(rounds=2, seeds=(1,), held_out=(101,), ticks=12),
                     TrainOptions(steps=1, grad_accumulation=1), base="bundled", judge=JudgeDouble(scores=varied),
                     agents_for=agents_for, cache=base_cache)
    assert [r.round for r in more] == [0, 1, 2] and more[:2] == results, "recorded rounds are not run again"
    assert asked[3:] == [results[1].model, more[2].model] and more[2].parent == results[1].model
    assert [r["round"] for r in db["rounds"].rows] == [0, 1, 2]
    with pytest.raises(InputError, match="held-out"):
        ev.EvolveOptions(seeds=(1, 2), held_out=(2, 3))
