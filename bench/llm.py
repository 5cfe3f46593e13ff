"""The LLM layer's speed, measured in one process: the same requests, the same backend,
asked one by one (sequential) and through the batching client (one batch); then replayed
from the replay cache. Prints a table of wall time, calls/s, tokens/s and the ratios, and
checks that batched answers equal sequential ones (seeds never depend on the batch).

For ``llamacpp`` the batch is also asked of a backend with one sequence (``--sequences 1``: the
batch's answers generated one after another, as before batched decoding) beside the default
(``simulation.llm.llamacpp.SEQUENCES`` sequences: the answers generated together, one decode
step per token of the batch), so the two are measured in the same run on the same requests;
the ``decode steps`` column counts the generation decodes each took.

    .venv/bin/python bench/llm.py [--agents 8,32] [--backends llamacpp,openai] [--servers 1]

Backends: ``llamacpp`` (in process), ``openai`` (llama-cpp-python's own server on loopback,
``--servers N`` of them as a fleet, threads split between them), ``vllm`` (when installed;
``--vllm-model`` a Hugging Face folder, see tools/gguf_to_hf.py), and ``transformers``
(the same model dequantised, left-padded batches, no grammar: a raw-throughput reference,
needs the ``gguf`` package).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from simulation.llm import batching  # noqa: E402
from simulation.llm.cache import CachedBackend, ReplayCache  # noqa: E402
from simulation.llm.client import LLMClient  # noqa: E402
from simulation.scenario import load_persona  # noqa: E402


class NextAction(BaseModel):
    action: str = Field(max_length=80)
    minutes: int = Field(ge=5, le=120)


def workload(n: int) -> list[list[dict[str, str]]]:
    """One question per agent, each with its own persona block (as in a town's decide phase)."""
    personas = [load_persona(p) for p in sorted((ROOT / "personas").glob("*.yaml"))]
    prompts = []
    for i in range(n):
        p = personas[i % len(personas)]
        system = (f"You are {p.name}, {p.age}, {p.occupation}. {p.backstory}\n"
                  f"How you speak: {p.speaking_style}\nYour day: {p.routine.description}\n"
                  "Answer with JSON only.")
        user = f"It is {8 + i % 9}:{(i * 7) % 60:02d} on a Monday. What do you do next, and for how many minutes?"
        prompts.append([{"role": "system", "content": system}, {"role": "user", "content": user}])
    return prompts


def ask_all(client: LLMClient, prompts: list[list[dict[str, str]]], batched: bool) -> list[Any]:
    default = NextAction(action="wait", minutes=10)

    async def one(i: int, messages: list[dict[str, str]]) -> Any:
        return await client.ask(messages, NextAction, default=default, purpose="bench", agent_id=f"a{i}", tick=0)

    async def run() -> list[Any]:
        if batched:
            return await asyncio.gather(*(one(i, m) for i, m in enumerate(prompts)))
        return [await one(i, m) for i, m in enumerate(prompts)]

    return batching.run(run(), name="bench")


def measure(label: str, backend: Any, prompts: list, batched: bool, max_tokens: int) -> dict[str, Any]:
    client = LLMClient(backend, run_seed=11, temperature=0.7, max_tokens=max_tokens)
    inner = getattr(backend, "inner", backend)
    if hasattr(inner, "prefix"):  # every pass starts cold: no saved prefix from the pass before
        inner.prefix.clear()
    seqs = getattr(inner, "seqs", None)
    steps0 = seqs.steps if seqs is not None else 0
    start = time.perf_counter()
    answers = ask_all(client, prompts, batched)
    wall = time.perf_counter() - start
    s = client.stats
    return {"label": label, "wall": wall, "calls": s.calls, "batches": s.batches, "hits": s.cache_hits,
            "steps": seqs.steps - steps0 if seqs is not None else None,
            "prompt": s.prompt_tokens, "completion": s.completion_tokens, "failures": s.parse_failures,
            "answers": [a.value.model_dump_json() for a in answers]}


def build(name: str, stack: ExitStack, servers: int, vllm_model: str | None, sequences: int | None = None) -> Any:
    threads = os.cpu_count() or 2
    if name == "llamacpp":
        from simulation.llm.llamacpp import SEQUENCES, LlamaCppBackend

        return LlamaCppBackend(threads=threads, sequences=sequences or SEQUENCES)
    if name == "openai":
        from llm_servers import llama_server

        from simulation.llm.llamacpp import bundled_model_path
        from simulation.llm.openai import OpenAIBackend

        urls = [stack.enter_context(llama_server(bundled_model_path(), threads=max(1, threads // servers)))
                for _ in range(servers)]
        return OpenAIBackend(urls, timeout_s=600, concurrency=8)
    if name == "vllm":
        from simulation.llm.vllm import VLLMBackend

        if not vllm_model:
            raise SystemExit("--vllm-model (a Hugging Face folder) is needed for the vllm backend")
        return VLLMBackend(vllm_model, gpu_memory_utilization=float(os.environ.get("AGORA_VLLM_GPU_MEMORY", "0.4")))
    raise SystemExit(f"unknown backend {name}")


def transformers_reference(prompts: list, max_tokens: int, batch: int) -> dict[str, Any] | None:
    """Raw generation throughput of the same model in transformers, left-padded batches, no grammar."""
    try:
        import gguf  # noqa: F401
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        return None
    from simulation.llm.llamacpp import bundled_model_path

    path = bundled_model_path()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, torch_dtype=torch.float32)
    model.eval()
    texts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in prompts]
    start = time.perf_counter()
    prompt_tokens = completion_tokens = 0
    with torch.inference_mode():
        for i in range(0, len(texts), batch):
            enc = tok(texts[i:i + batch], return_tensors="pt", padding=True)
            torch.manual_seed(0)
            out = model.generate(**enc, max_new_tokens=max_tokens, do_sample=True, temperature=0.7,
                                 pad_token_id=tok.pad_token_id)
            prompt_tokens += int(enc["attention_mask"].sum())
            new = out[:, enc["input_ids"].shape[1]:]
            completion_tokens += int((new != tok.pad_token_id).sum())
    wall = time.perf_counter() - start
    return {"label": f"transformers, batches of {batch} (no grammar)", "wall": wall, "calls": len(texts),
            "batches": -(-len(texts) // batch), "hits": 0, "prompt": prompt_tokens, "completion": completion_tokens,
            "failures": 0, "answers": []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="8,32", help="comma-separated numbers of concurrent agents")
    ap.add_argument("--backends", default="llamacpp", help="llamacpp, openai, vllm, transformers (comma-separated)")
    ap.add_argument("--servers", type=int, default=1, help="openai: llama.cpp servers in the fleet")
    ap.add_argument("--vllm-model")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--no-sequential", action="store_true", help="skip the one-by-one pass (it is the slow one)")
    args = ap.parse_args()
    console = Console(width=170)
    table = Table(title=f"LLM layer on {os.cpu_count()} CPU cores (SmolLM2-135M Q4_1 unless noted)")
    for col in ("backend", "agents", "mode", "wall s", "calls/s", "prompt tok/s", "gen tok/s", "batches",
                "decode steps", "cache hits", "parse fail", "vs sequential", "same answers"):
        table.add_column(col, justify="left" if col in ("backend", "mode") else "right")
    for name in args.backends.split(","):
        for n in (int(x) for x in args.agents.split(",")):
            prompts = workload(n)
            if name == "transformers":
                row = transformers_reference(prompts, args.max_tokens, batch=min(16, n))
                if row is None:
                    console.print("[yellow]transformers reference skipped: pip install gguf to load the GGUF[/]")
                    continue
                _add(table, name, n, row, None, None)
                continue
            with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
                raw = build(name, stack, args.servers, args.vllm_model)
                stack.callback(raw.close)
                seq = None
                if not args.no_sequential:
                    seq = measure("sequential", raw, prompts, batched=False, max_tokens=args.max_tokens)
                    _add(table, name, n, seq, None, None)
                if name == "llamacpp":
                    one = build(name, stack, args.servers, args.vllm_model, sequences=1)
                    stack.callback(one.close)
                    single = measure("batched, 1 sequence", one, prompts, batched=True, max_tokens=args.max_tokens)
                    _add(table, name, n, single, seq, seq["answers"] == single["answers"] if seq else None)
                cached = CachedBackend(raw, ReplayCache(Path(tmp) / "c.sqlite"))
                label = f"batched, {raw.seqs.n_seq} sequences" if name == "llamacpp" else "batched"
                batched = measure(label, cached, prompts, batched=True, max_tokens=args.max_tokens)
                _add(table, name, n, batched, seq, seq["answers"] == batched["answers"] if seq else None)
                replay = measure("cached replay", cached, prompts, batched=True, max_tokens=args.max_tokens)
                _add(table, name, n, replay, batched, replay["answers"] == batched["answers"])
                console.print(f"done: {name}, {n} agents", style="dim")
    console.print(table)


def _add(table: Table, backend: str, n: int, row: dict[str, Any], base: dict[str, Any] | None,
         same: bool | None) -> None:
    wall = max(row["wall"], 1e-9)
    ratio = f"{base['wall'] / wall:.2f}x faster" if base else "-"
    fresh = row["calls"] - row["hits"]
    table.add_row(backend, str(n), row["label"], f"{wall:.2f}", f"{row['calls'] / wall:.2f}",
                  f"{row['prompt'] / wall:.0f}" if fresh else "-", f"{row['completion'] / wall:.1f}" if fresh else "-",
                  str(row["batches"]), "-" if row.get("steps") is None else str(row["steps"]), str(row["hits"]),
                  str(row["failures"]), ratio,
                  "-" if same is None else ("yes" if same else "NO"))


if __name__ == "__main__":
    main()
