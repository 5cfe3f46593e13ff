"""The LLM backends Agora knows: each name with its settings model and its backend class.

A scenario's ``llm:`` block, the ``--backend`` options and ``factory.build_backend`` all read
this one table, so a new backend is one entry here (with its settings model and a class that
has ``from_settings``; its settings model joins ``settings.GroupSettings`` too, which a model
group's block is validated as, and a test keeps the two agreeing), and an unknown name is the
same clear error everywhere. Backend
classes are named, not imported: loading one pulls in httpx, llama.cpp or vLLM, which
validating a scenario or printing ``--help`` must not pay for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, Union

from pydantic import BeforeValidator, Field, TypeAdapter

from simulation.errors import InputError, Problem
from simulation.formats.yamlfile import shown
from simulation.llm.settings import ControlSettings, LlamaCppSettings, LLMSettings, OpenAISettings, VLLMSettings

if TYPE_CHECKING:
    from simulation.llm.backend import Backend

__all__ = [
    "BACKENDS", "DEFAULT_BACKEND", "AnyLLMSettings", "BackendEntry", "as_recorded", "backend_help", "default_settings",
    "lookup",
    "names_text", "owners_of", "own_fields", "parse_settings", "unknown_backend",
]


class BuildsFromSettings(Protocol):
    """A backend class: it turns its settings model into a running backend."""

    @classmethod
    def from_settings(cls, settings: Any, base_dir: Path) -> Backend: ...

    @classmethod
    def replay_id(cls, settings: Any, base_dir: Path) -> str | None:
        """The model id the backend will have, found without starting it (None: only starting can
        tell); raises InputError for settings it could never start from."""
        ...


@dataclass(frozen=True)
class BackendEntry:
    name: str
    settings: type[LLMSettings]
    backend: str
    """``module:Class`` of the backend, imported when a backend is built."""
    summary: str
    """A few words for ``--backend``'s help."""

    def backend_class(self) -> BuildsFromSettings:
        module, _, name = self.backend.partition(":")
        return getattr(importlib.import_module(module), name)

    def build(self, settings: LLMSettings, base_dir: Path) -> Backend:
        """The backend ``settings`` describe; relative paths in them are taken from ``base_dir``."""
        return self.backend_class().from_settings(settings, base_dir)

    def replay_id(self, settings: LLMSettings, base_dir: Path) -> str | None:
        """The model id a backend built from ``settings`` will have, without building it."""
        return self.backend_class().replay_id(settings, base_dir)

    def resumed(self, settings: LLMSettings, recorded_model: str) -> LLMSettings:
        """The settings a run that recorded ``recorded_model`` goes on with (resumed or verified): the
        backend class's ``resumed_settings`` where it has one (llama.cpp keeps the file a run began
        with, when the bundled default has changed since), else ``settings`` as they are."""
        try:
            keep = getattr(self.backend_class(), "resumed_settings", None)
        except ImportError:
            return settings
        return settings if keep is None else keep(settings, recorded_model)


BACKENDS: dict[str, BackendEntry] = {entry.name: entry for entry in (
    BackendEntry("llamacpp", LlamaCppSettings, "simulation.llm.llamacpp:LlamaCppBackend", "GGUF on the CPU"),
    BackendEntry("vllm", VLLMSettings, "simulation.llm.vllm:VLLMBackend", "in-process engine"),
    BackendEntry("openai", OpenAISettings, "simulation.llm.openai:OpenAIBackend", "servers"),
    BackendEntry("control", ControlSettings, "simulation.llm.control:ControlBackend",
                 "no LLM: the engine's script, a baseline"),
)}
DEFAULT_BACKEND = "llamacpp"


def as_recorded(settings: LLMSettings, made_by: tuple[str, str] | None) -> LLMSettings:
    """``settings`` as a run that recorded ``made_by`` (backend, model id) goes on with, resumed or
    verified (``BackendEntry.resumed``); as they are when another backend made it, or nothing did."""
    entry = BACKENDS.get(made_by[0]) if made_by is not None and made_by[0] == settings.backend else None
    return settings if entry is None else entry.resumed(settings, made_by[1])


def _or(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def names_text() -> str:
    """"'llamacpp', 'vllm', 'openai' or 'control'": the known names, as error messages list them."""
    return _or([repr(name) for name in BACKENDS])


def backend_help() -> str:
    """``--backend``'s help: every backend with a few words, the default marked."""
    return _or([f"{e.name} ({e.summary}{', default' if e.name == DEFAULT_BACKEND else ''})"
                for e in BACKENDS.values()])


def unknown_backend(name: object) -> str:
    return f"unknown backend {shown(name) if isinstance(name, str) else repr(name)}; expected {names_text()}"


def lookup(name: str, where: str) -> BackendEntry:
    """The entry of ``name``; an unknown name is bad input located at ``where`` (a field or an option)."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise InputError(Problem(where, unknown_backend(name))) from None


def owners_of(setting: str) -> list[str]:
    """The backends whose own settings include ``setting`` (none for a setting no backend knows)."""
    return [e.name for e in BACKENDS.values() if setting in e.settings.model_fields]


def own_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the settings its backend does not take.

    For blocks Agora wrote itself before each backend had its own settings (run.db files
    stored every backend's fields); never for what a user wrote, where such a field is an error."""
    entry = BACKENDS.get(data.get("backend", DEFAULT_BACKEND))
    return dict(data) if entry is None else {k: v for k, v in data.items() if k in entry.settings.model_fields}


def _with_default_backend(value: Any) -> Any:
    # The discriminator must be present to pick a model; a block without one is the default's.
    if isinstance(value, Mapping) and "backend" not in value:
        return {"backend": DEFAULT_BACKEND, **value}
    return value


AnyLLMSettings = Annotated[
    Union[tuple(entry.settings for entry in BACKENDS.values())],  # type: ignore[valid-type]
    Field(discriminator="backend"),
    BeforeValidator(_with_default_backend),
]
"""A scenario's ``llm:`` block: the settings model of the backend it names (default llamacpp)."""


@lru_cache(maxsize=1)
def _adapter() -> TypeAdapter[Any]:
    return TypeAdapter(AnyLLMSettings)


def parse_settings(data: Mapping[str, Any]) -> LLMSettings:
    """Validate an ``llm:`` block (raises pydantic's ValidationError)."""
    return _adapter().validate_python(data)


def default_settings() -> LLMSettings:
    """The settings of a scenario without an ``llm:`` block."""
    return parse_settings({})
