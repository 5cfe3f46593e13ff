"""Train the agents' model on a town's rewarded turns: TRL on the CPU, LoRA or full fine-tuning.

The data is what ``agora rewards --export`` writes (docs/rewards.md): every example's prompt is
the exact chat an agent was sent and its completion the answer it wrote. Three objectives:

- ``sft``: the best quarter of each agent's own turns by reward (``SFTTrainer``). The rows are
  chats; the last message (the answer) becomes the completion, so the loss is on the answer
  only, not on the long prompt the model did not write;
- ``dpo``: pairs of answers to the same kind of question in one group, better against worse
  (``DPOTrainer``, the frozen base as reference: with LoRA, the adapter switched off);
- ``kto``: every turn, labelled desirable or not by its advantage (``KTOTrainer``).

The result is a Hugging Face folder (LoRA merged into the weights, for vLLM and for the next
round) and, when the base came from a GGUF, a GGUF with the base's tokenizer and metadata that
the llamacpp backend runs with ``--model`` (``gguf_out``). ``train.json`` records what went in
(base and its fingerprint, the runs and their rows, every setting) and what came out, so an
evolve round's lineage can be read back.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simulation.errors import InputError, Problem, RunError

__all__ = ["FORMATS", "TrainOptions", "TrainResult", "load_rows", "train"]

FORMATS = ("sft", "dpo", "kto")


@dataclass(frozen=True)
class TrainOptions:
    """How to train. ``steps`` bounds the optimiser steps (None: ``epochs`` passes over the data)."""

    format: str = "sft"
    lora: bool = True
    epochs: float = 1.0
    steps: int | None = None
    learning_rate: float | None = None
    """None: 2e-4 with LoRA, 2e-5 for full fine-tuning."""
    batch_size: int = 1
    grad_accumulation: int = 4
    lora_rank: int = 16
    lora_alpha: int = 32
    beta: float = 0.1
    """DPO / KTO: how far the policy may move from the reference."""
    max_length: int | None = 4096
    """Longest example in tokens (longer ones are left out and counted, never cut: a cut chat
    would teach the model an answer to a question it did not see)."""
    seed: int = 0
    gguf_type: str = "q8_0"

    @property
    def lr(self) -> float:
        return self.learning_rate if self.learning_rate is not None else (2e-4 if self.lora else 2e-5)


@dataclass
class TrainResult:
    out: Path
    hf_dir: Path
    gguf: Path | None
    rows: int
    skipped_long: int
    steps: int
    losses: list[tuple[int, float]] = field(default_factory=list)
    seconds: float = 0.0


# --------------------------------------------------------------------------- data


def _export_dir(run_dir: Path, scratch: Path, index: int) -> Path:
    """The run's TRL export: ``scratch/<index>-<run>`` (two runs may share a folder name) made
    from its rewards (run.db) if not there."""
    from simulation.rewards import export as export_mod

    db = run_dir / "run.db"
    if not db.is_file():
        raise InputError(Problem(str(run_dir), "not a run directory (no run.db)"))
    out = scratch / f"{index:03d}-{run_dir.name}"
    if not (out / "manifest.json").is_file():
        export_mod.export(db, out)
    return out


def load_rows(run_dirs: list[Path], fmt: str, scratch: Path) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The training rows of ``fmt`` from every run (their town-level export), and rows per run.
    Raises InputError when a run has no rewards (the export says so), or no run has a row of
    this format."""
    if fmt not in FORMATS:
        raise InputError(Problem("--format", f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}"))
    rows: list[dict[str, Any]] = []
    per_run: dict[str, int] = {}
    for index, run_dir in enumerate(run_dirs):
        path = _export_dir(run_dir, scratch, index) / "town" / f"{fmt}.jsonl"
        got = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.is_file() else []
        per_run[str(run_dir)] = len(got)
        rows.extend(got)
    if not rows:
        raise InputError(Problem("RUN_DIR", f"no {fmt} rows in {len(run_dirs)} run(s): "
                                            "too few judged turns (DPO needs two answers to one question)"))
    return rows, per_run


def _as_training_row(row: dict[str, Any], fmt: str) -> dict[str, Any]:
    """The columns each TRL trainer reads, from an exported row."""
    if fmt == "sft":  # prompt / completion: the loss is on the answer only
        return {"prompt": row["messages"][:-1], "completion": row["messages"][-1:]}
    if fmt == "dpo":
        return {"prompt": row["prompt"], "chosen": row["chosen"], "rejected": row["rejected"]}
    return {"prompt": row["prompt"], "completion": row["completion"], "label": bool(row["label"])}


def _length(tokenizer: Any, row: dict[str, Any]) -> int:
    chats = [row["prompt"] + row[k] for k in ("completion", "chosen", "rejected") if k in row]
    texts = [tokenizer.apply_chat_template(c, tokenize=False) for c in chats]
    return max(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)


# --------------------------------------------------------------------------- training


def _trainer(fmt: str, model: Any, tokenizer: Any, data: Any, out: Path, options: TrainOptions,
             peft_config: Any, callbacks: list[Any]) -> Any:
    import trl

    # KTO estimates its KL term from the other examples of a batch: it needs two or more.
    batch = max(2, options.batch_size) if fmt == "kto" else options.batch_size
    common = dict(
        output_dir=str(out / "checkpoints"), per_device_train_batch_size=batch,
        gradient_accumulation_steps=options.grad_accumulation, learning_rate=options.lr,
        num_train_epochs=options.epochs, max_steps=options.steps if options.steps else -1,
        logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, bf16=False, fp16=False,
        seed=options.seed, data_seed=options.seed, disable_tqdm=True, max_length=None,
        gradient_checkpointing=False,  # 135M parameters fit; checkpointing would cost ~20 % more compute
        lr_scheduler_type="constant" if options.steps and options.steps < 10 else "linear",
    )
    if fmt == "sft":
        args = trl.SFTConfig(**common)
        return trl.SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                              peft_config=peft_config, callbacks=callbacks)
    if fmt == "dpo":
        args = trl.DPOConfig(**common, beta=options.beta)
        return trl.DPOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                              peft_config=peft_config, callbacks=callbacks)
    args = trl.KTOConfig(**common, beta=options.beta)
    return trl.KTOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                          peft_config=peft_config, callbacks=callbacks)


def _progress_callback(on_step: Callable[[int, int, float | None], None]) -> Any:
    from transformers import TrainerCallback

    class Progress(TrainerCallback):  # type: ignore[misc]
        """Reports (step, total steps, latest loss) to the command's progress bar."""

        def __init__(self) -> None:
            self.loss: float | None = None

        def on_log(self, args, state, control, logs=None, **kw):  # noqa: ANN001
            if logs and "loss" in logs:
                self.loss = float(logs["loss"])

        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001
            on_step(state.global_step, state.max_steps, self.loss)

    return Progress()


def plot_losses(losses: list[tuple[int, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    if losses:
        ax.plot([s for s, _ in losses], [v for _, v in losses], marker="o", markersize=3)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("training loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def train(run_dirs: list[Path], base: Path, out: Path, options: TrainOptions, *,
          template_gguf: Path | None, base_label: str,
          on_step: Callable[[int, int, float | None], None] | None = None) -> TrainResult:
    """Train ``base`` (a Hugging Face folder) on the runs' rewarded turns; write ``out/hf``, the
    GGUF (when ``template_gguf``: the GGUF the base came from), ``loss.png``, ``losses.csv`` and
    ``train.json``."""
    import numpy as np
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simulation.training.gguf_out import write_gguf

    started = time.perf_counter()
    if (out / "train.json").exists():
        raise InputError(Problem(str(out), "already holds a trained model (train.json); choose another --out"))
    out.mkdir(parents=True, exist_ok=True)
    rows, per_run = load_rows(run_dirs, options.format, out / "data")
    torch.manual_seed(options.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    ready = [_as_training_row(r, options.format) for r in rows]
    kept = [r for r in ready if options.max_length is None or _length(tokenizer, r) <= options.max_length]
    if not kept:
        raise InputError(Problem("--max-length", f"all {len(ready)} examples are longer than {options.max_length} "
                                                 "tokens"))
    if options.format == "kto" and len({r["label"] for r in kept}) < 2:
        raise InputError(Problem("--format", "KTO needs desirable and undesirable turns; these runs have one kind"))
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    peft_config = None
    if options.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=options.lora_rank, lora_alpha=options.lora_alpha, lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    callbacks = [_progress_callback(on_step)] if on_step else []
    try:
        trainer = _trainer(options.format, model, tokenizer, Dataset.from_list(kept), out, options, peft_config,
                           callbacks)
    except (RuntimeError, ValueError) as exc:
        raise RunError(f"cannot set up the {options.format} trainer: {exc}") from exc
    try:
        trainer.train()
    except (RuntimeError, ValueError) as exc:
        raise RunError(f"training failed: {exc}") from exc
    losses = [(int(h["step"]), float(h["loss"])) for h in trainer.state.log_history if "loss" in h]
    trained = trainer.model
    if options.lora:
        trained = trained.merge_and_unload()
    hf_dir = out / "hf"
    trained.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    if any(not math.isfinite(v) for _, v in losses):
        raise RunError(f"training diverged (loss {losses[-1][1]}); try a lower --learning-rate")
    gguf_path = None
    if template_gguf is not None:
        weights = {k: v.detach().to(torch.float32).cpu().numpy() for k, v in trained.state_dict().items()}
        if not all(np.isfinite(v).all() for v in weights.values()):
            raise RunError("training diverged: the weights are not finite; try a lower --learning-rate")
        gguf_path = write_gguf(weights, template_gguf, out / "model.gguf", gguf_type=options.gguf_type,
                               name=f"{base_label} trained by agora ({options.format})")
    (out / "losses.csv").write_text("step,loss\n" + "".join(f"{s},{v:.6f}\n" for s, v in losses), encoding="utf-8")
    plot_losses(losses, out / "loss.png", f"{options.format.upper()} on {len(run_dirs)} run(s), {len(kept)} examples")
    seconds = time.perf_counter() - started
    result = TrainResult(out=out, hf_dir=hf_dir, gguf=gguf_path, rows=len(kept),
                         skipped_long=len(ready) - len(kept), steps=int(trainer.state.global_step),
                         losses=losses, seconds=seconds)
    manifest = {
        "base": base_label, "base_folder": str(base), "template_gguf": str(template_gguf) if template_gguf else None,
        "runs": per_run, "options": {**asdict(options), "learning_rate": options.lr},
        "rows": result.rows, "skipped_long": result.skipped_long, "steps": result.steps,
        "final_loss": losses[-1][1] if losses else None,
        "first_loss": losses[0][1] if losses else None,
        "outputs": {"hf": "hf", "gguf": "model.gguf" if gguf_path else None, "plot": "loss.png",
                    "losses": "losses.csv"},
        "seconds": round(seconds, 1),
    }
    (out / "train.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return result
