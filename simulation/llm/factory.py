"""Build the backend a run (or an evaluation, or a judge) asks, from settings plus command-line overrides.

The one factory: every command builds its backends here, from ``registry.BACKENDS``, so tests
swap in a double by replacing ``build_backend`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulation.errors import InputError, Problem
from simulation.formats.paths import resolve_path
from simulation.llm import registry
from simulation.llm.backend import Backend
from simulation.llm.lazy import LazyBackend, counter_for
from simulation.llm.settings import LLMSettings

__all__ = ["BackendChoice", "build_backend"]


@dataclass
class BackendChoice:
    """Command-line overrides of a scenario's ``llm:`` block (None / empty = keep the scenario's).

    ``backend``, ``model`` and ``base_urls`` change the block's own backend, the one that answers
    everyone in no model group (``llm.groups``); a group keeps its own, unless ``everyone``. The
    replay cache (``cache``, ``cache_path``) is the run's: it changes for every group too."""

    backend: str | None = None
    model: str | None = None
    base_urls: list[str] = field(default_factory=list)
    cache: str | None = None
    cache_path: str | None = None
    option_prefix: str = "--"
    everyone: bool = False
    """Every model group gets the block's backend as chosen here (the no-LLM control: nobody asks a model)."""
    """How the options are spelled in messages: ``--`` for the agents' LLM, ``--judge-`` for a judge's."""

    def option(self, setting: str) -> str:
        """The command-line option that sets ``setting`` (``base_urls`` -> ``--base-url``)."""
        return self.option_prefix + ("base-url" if setting == "base_urls" else setting.replace("_", "-"))

    def apply(self, settings: LLMSettings) -> LLMSettings:
        """``settings`` with these overrides; a bad override is InputError naming its option.

        Another backend keeps only the settings every backend shares: the old backend's own
        (and its model name) mean nothing to the new one. A model path given here is taken from
        the working directory."""
        name = self.backend if self.backend is not None else settings.backend
        entry = registry.lookup(name, self.option("backend"))
        data = settings.model_dump()
        if name != settings.backend:
            data = {k: v for k, v in data.items() if k in LLMSettings.model_fields}
            data["model"] = None
        model = self.model
        if model is not None and resolve_path(model, Path.cwd()).exists():
            model = str(resolve_path(model, Path.cwd()))
        update: dict[str, Any] = {k: v for k, v in (("model", model), ("cache", self.cache),
                                                    ("cache_path", self.cache_path)) if v is not None}
        if self.base_urls:
            update["base_urls"] = list(self.base_urls)
        cache = {k: v for k, v in (("cache", self.cache), ("cache_path", self.cache_path)) if v is not None}
        data["groups"] = {group: {**values, **cache} for group, values in data.get("groups", {}).items()}
        try:
            chosen = entry.settings.model_validate({**data, **update, "backend": name})
        except ValidationError as exc:
            raise InputError([self._problem(e, name) for e in exc.errors(include_url=False)]) from None
        why = chosen.model_problem(Path.cwd()) if self.model is not None else None
        if why is not None:
            raise InputError(Problem(self.option("model"), why))
        if self.everyone and chosen.groups:
            alike = chosen.model_copy(update={"groups": {}})
            chosen = chosen.model_copy(update={"groups": {group: alike for group in chosen.groups}})
        return chosen

    def _problem(self, error: Any, backend: str) -> Problem:
        setting = str(error["loc"][0])
        if error["type"] == "extra_forbidden":
            owners = registry.owners_of(setting)
            return Problem(self.option(setting), f"only the {' or '.join(owners)} backend takes this option, "
                                                 f"not {backend}: add {self.option('backend')} {owners[0]}")
        return Problem(self.option(setting), error["msg"])


def build_backend(settings: LLMSettings, base_dir: Path, recorded_model: str | None = None) -> Backend:
    """The backend ``settings`` describe, behind the replay cache unless ``cache: off``.

    Relative model paths are taken from ``base_dir`` (the scenario's folder). With ``cache: use``
    the backend starts on the first request the cache cannot answer (``LazyBackend``), so a
    replay needs no server, GPU or model file; its model id, which keys the cache, comes from
    the backend class without starting it, else from ``recorded_model`` (what the run being
    resumed or verified recorded), else the backend is started now to find out."""
    entry = registry.lookup(settings.backend, "llm.backend")
    if settings.cache == "use":
        model_id = entry.replay_id(settings, base_dir) or recorded_model
        backend: Backend = (LazyBackend(entry.name, model_id, lambda: entry.build(settings, base_dir),
                                        counter=lambda: counter_for(entry.name, model_id, settings, base_dir))
                            if model_id is not None else entry.build(settings, base_dir))
    else:
        backend = entry.build(settings, base_dir)
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
