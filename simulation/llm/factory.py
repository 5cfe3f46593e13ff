"""Build the backend a run (or an evaluation, or a judge) asks, from settings plus command-line overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from simulation.errors import InputError, Problem
from simulation.llm.backend import Backend
from simulation.scenario import LLMSettings, resolve_path


@dataclass
class BackendChoice:
    """Command-line overrides of a scenario's ``llm:`` block (None / empty = keep the scenario's)."""

    backend: str | None = None
    model: str | None = None
    base_urls: list[str] = field(default_factory=list)
    cache: str | None = None
    cache_path: str | None = None

    def apply(self, settings: LLMSettings) -> LLMSettings:
        update = {k: v for k, v in (("backend", self.backend), ("model", self.model), ("cache", self.cache),
                                    ("cache_path", self.cache_path)) if v is not None}
        if self.base_urls:
            update["base_urls"] = list(self.base_urls)
        if self.backend is not None and self.backend != settings.backend and self.model is None:
            update["model"] = None  # another backend's model name means nothing to this one
        try:
            return LLMSettings.model_validate({**settings.model_dump(), **update})
        except ValidationError as exc:  # name the command-line option, as a scenario error names the field
            raise InputError([
                Problem("--" + str(e["loc"][0]).replace("_", "-").replace("base-urls", "base-url"), e["msg"])
                for e in exc.errors(include_url=False)
            ]) from None


def build_backend(settings: LLMSettings, base_dir: Path) -> Backend:
    """The backend ``settings`` describe, behind the replay cache unless ``cache: off``.

    Relative model paths are taken from ``base_dir`` (the scenario's folder)."""
    backend = _raw_backend(settings, base_dir)
    if settings.cache == "off":
        return backend
    from simulation.llm.cache import CachedBackend, ReplayCache, default_cache_path

    path = resolve_path(settings.cache_path, base_dir) if settings.cache_path else default_cache_path()
    try:
        cache = ReplayCache(path)
    except Exception:
        backend.close()
        raise
    return CachedBackend(backend, cache, settings.cache)


def _raw_backend(settings: LLMSettings, base_dir: Path) -> Backend:
    if settings.backend == "llamacpp":
        from simulation.llm.llamacpp import LlamaCppBackend

        model = resolve_path(settings.model, base_dir) if settings.model else None
        if model is not None and not model.is_file():
            raise InputError(Problem("llm.model", f"model file not found: {model}"))
        return LlamaCppBackend(model, settings.context_tokens, settings.threads)
    if settings.backend == "openai":
        from simulation.llm.openai import OpenAIBackend, api_key_from_env

        if not settings.base_urls:
            raise InputError(Problem("llm.base_urls", "the openai backend needs a server: give --base-url URL "
                                     "(e.g. http://127.0.0.1:8000/v1) or llm.base_urls in the scenario"))
        return OpenAIBackend(
            settings.base_urls, settings.model, api_key=api_key_from_env(settings.api_key_env),
            concurrency=settings.concurrency, timeout_s=settings.timeout_s, max_retries=settings.max_retries,
            patience_s=settings.patience_s, structured_output=settings.structured_output,
        )
    from simulation.llm.vllm import VLLMBackend

    if settings.model is None:
        raise InputError(Problem("llm.model", "the vllm backend needs a model: a Hugging Face folder or id "
                                 "(--model or llm.model)"))
    local = resolve_path(settings.model, base_dir)
    model = str(local) if local.exists() else settings.model
    return VLLMBackend(model, context_tokens=settings.context_tokens,
                       tensor_parallel_size=settings.tensor_parallel_size,
                       gpu_memory_utilization=settings.gpu_memory_utilization)
