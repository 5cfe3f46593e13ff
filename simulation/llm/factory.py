"""Build the backend a run (or an evaluation, or a judge) asks, from settings plus command-line overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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
        except Exception as exc:  # pydantic ValidationError: name the option
            raise InputError(Problem("command line", f"bad LLM option: {exc}")) from None


def build_backend(settings: LLMSettings, base_dir: Path) -> Backend:
    """The backend ``settings`` describe; relative model paths are taken from ``base_dir``."""
    if settings.backend == "llamacpp":
        from simulation.llm.llamacpp import LlamaCppBackend

        model = resolve_path(settings.model, base_dir) if settings.model else None
        if model is not None and not model.is_file():
            raise InputError(Problem("llm.model", f"model file not found: {model}"))
        return LlamaCppBackend(model, settings.context_tokens, settings.threads)
    raise InputError(Problem("llm.backend", f"backend {settings.backend!r} is not available yet"))
