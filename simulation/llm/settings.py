"""What a scenario's ``llm:`` block may say: settings every backend shares, and each backend's own.

The block stays flat in YAML (``llm: {backend: openai, base_urls: [...], temperature: 0.5}``);
``backend`` picks the model that validates it (see ``simulation.llm.registry``), so a setting
that belongs to another backend is an error that names it instead of a value silently unused.
These models import nothing heavy: validating a scenario must not load httpx or llama.cpp.

``groups`` names more blocks like it, the model groups (``llm.groups.NAME``): a person or a
population that says ``llm: NAME`` asks that group's backend instead (docs/llm.md, "A model per
person"). A group says what differs from the block around it and takes the rest from it (with
another backend, only the settings every backend shares, and not its model); a group has no
groups of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from simulation.formats.fields import Identifier
from simulation.formats.paths import resolve_path
from simulation.formats.strict import StrictModel
from simulation.formats.yamlfile import missing_file

__all__ = ["CALL_TIMEOUT_S", "DEFAULT_GROUP", "ControlSettings", "GroupSettings", "LLMSettings", "LlamaCppSettings",
           "OpenAISettings", "VLLMSettings"]


CALL_TIMEOUT_S = 600.0
"""Default seconds a backend call may go without delivering an answer (``simulation.llm.deadline``).
Generous: the slowest honest case is a long batch on two cores, whose first answer comes only
after every prompt of the batch has been read (eight 1,500-token prompts at 30 tokens/s: under
7 minutes)."""


DEFAULT_GROUP = "default"
"""What the behaviour report calls the people who name no model group (they ask the ``llm:``
block's own backend); so no group may have this name."""


def _group_name(name: str) -> str:
    if name == DEFAULT_GROUP:
        raise ValueError(f"{DEFAULT_GROUP!r} names the people without a group (in reports); give the group another name")
    return name


GroupName = Annotated[Identifier, AfterValidator(_group_name)]


def _no_groups_within(group: LLMSettings) -> LLMSettings:
    if group.groups:
        raise ValueError("a model group has no groups of its own: list every group under llm.groups")
    return group


def _backend_required(schema: dict[str, Any]) -> None:
    # An editor checks ``llm:`` against the backends' schemas (oneOf): a block without
    # 'backend' must match only the default backend's, so the others require it there.
    # Python objects still default it, so OpenAISettings() needs no backend="openai".
    schema.setdefault("required", []).append("backend")


class LLMSettings(StrictModel):
    """Settings every backend takes: which backend, which model, how it samples, and the replay cache.

    A base only: a scenario's block is validated as one backend's subclass (``registry.parse_settings``)."""

    backend: str
    model: str | None = Field(None, description="the model (its meaning depends on the backend)")
    temperature: float = Field(0.7, ge=0, le=2)
    max_tokens: int = Field(256, ge=8, le=4096, description="cap on the tokens of any one answer")
    context_tokens: int = Field(2048, ge=256, le=131072)
    call_timeout_s: float = Field(
        CALL_TIMEOUT_S, ge=0, le=86400, description="seconds a backend call may go without delivering an answer before "
        "the run stops with an error naming it (resumable); 0: no deadline")
    cache: Literal["use", "refresh", "off"] = Field(
        "use", description="replay cache: use (read and write), refresh (write only), off"
    )
    cache_path: str | None = Field(None, description="replay-cache SQLite file (default ~/.cache/agora/llm.sqlite)")
    groups: dict[GroupName, GroupSettings] = Field(
        default_factory=dict, max_length=64,
        description="model groups: NAME -> an llm block of its own (what differs from this one; the rest is taken "
        "from here). A person or population with 'llm: NAME' asks that group's backend (docs/llm.md)")

    @model_validator(mode="before")
    @classmethod
    def _groups_inherit(cls, data: Any) -> Any:
        """Each group completed from the block around it: a group says only what differs."""
        if not isinstance(data, dict) or not isinstance(data.get("groups"), dict):
            return data
        backend = data.get("backend", cls.model_fields["backend"].default)
        shared = {k: v for k, v in data.items() if k != "groups"}
        groups: dict[Any, Any] = {}
        for name, group in data["groups"].items():
            if isinstance(group, LLMSettings):
                group = group.model_dump(exclude_unset=True)
            if not isinstance(group, dict):
                groups[name] = group  # not a mapping: validation says so, at the group
                continue
            own = group.get("backend", backend)
            base = (shared if own == backend else
                    {k: v for k, v in shared.items() if k in LLMSettings.model_fields and k not in ("model", "backend")})
            groups[name] = {**base, **group, "backend": own}
        return {**data, "groups": groups}

    def group(self, name: str | None) -> LLMSettings:
        """The settings of model group ``name`` (None: this block's own)."""
        return self if name is None else self.groups[name]

    def model_problem(self, base_dir: Path) -> str | None:
        """What is wrong with ``model`` before anything is loaded (relative paths from ``base_dir``), or None.

        Only a backend whose model is a local file can know; the others learn it when they start."""
        return None


class LlamaCppSettings(LLMSettings):
    """llama.cpp in this process: a GGUF file on the CPU (the default backend)."""

    backend: Literal["llamacpp"] = Field("llamacpp", description="llamacpp: a GGUF file in this process (CPU)")
    model: str | None = Field(
        None, description="path to a GGUF file, relative to the scenario file (default: bundled SmolLM2-135M-Instruct)"
    )
    threads: int | None = Field(None, ge=1, le=512, description="CPU threads (default: all cores)")
    sequences: int = Field(8, ge=1, le=64, description="answers generated together, one KV stream of "
                           "context_tokens each (memory grows with it; answers do not change)")

    def model_problem(self, base_dir: Path) -> str | None:
        if self.model is None:
            return None
        path = resolve_path(self.model, base_dir)
        why = missing_file(path)
        return None if why is None else f"model file {why}: {path}"


class VLLMSettings(LLMSettings):
    """vLLM's in-process engine, on a GPU."""

    model_config = ConfigDict(json_schema_extra=_backend_required)

    backend: Literal["vllm"] = Field("vllm", description="vllm: the in-process vLLM engine (GPU)")
    model: str | None = Field(None, description="a Hugging Face model folder or id (required)")
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="GPUs per model")
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1, description="share of GPU memory to reserve")


class OpenAISettings(LLMSettings):
    """One or more OpenAI-compatible servers: vLLM serve, llama.cpp server, Ollama, OpenAI."""

    model_config = ConfigDict(json_schema_extra=_backend_required)

    backend: Literal["openai"] = Field("openai", description="openai: one or more OpenAI-compatible servers")
    model: str | None = Field(None, description="the served model name (default: the server's first model)")
    base_urls: list[Annotated[str, Field(pattern=r"^https?://", max_length=500)]] = Field(
        default_factory=list, max_length=64,
        description="server URLs such as http://127.0.0.1:8000/v1; requests go to the least busy one",
    )
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = Field(
        "OPENAI_API_KEY", description="environment variable holding the API key (unset: no key sent)"
    )
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = Field(
        "auto", description="how the JSON schema is sent; auto tries json_schema, then json_object+schema"
    )
    concurrency: int = Field(16, ge=1, le=4096, description="requests in flight per server")
    timeout_s: float = Field(120, gt=0, le=3600, description="seconds before one request is abandoned")
    max_retries: int = Field(4, ge=0, le=50, description="retries on timeouts, 429 and 5xx")
    patience_s: float = Field(
        300, gt=0, le=86400, description="how long a server may stay unreachable before the run stops"
    )


class ControlSettings(LLMSettings):
    """The no-LLM control (``simulation.llm.control``): the engine's script with no model, for
    measuring what a model adds (``agora bench behaviour --control``)."""

    model_config = ConfigDict(json_schema_extra=_backend_required)

    backend: Literal["control"] = Field("control", description="control: no LLM; every answer is the prompt's "
                                        "example or the first option (a baseline for the behaviour benchmark)")


GroupSettings = Annotated[
    Union[LlamaCppSettings, VLLMSettings, OpenAISettings, ControlSettings],
    Field(discriminator="backend"),
    AfterValidator(_no_groups_within),
]
"""A model group's block (``llm.groups.NAME``): one backend's settings, as the ``llm:`` block's own.
The backends are ``registry.BACKENDS``'s (tests/test_llm_groups.py checks the two agree)."""

for _model in (LLMSettings, LlamaCppSettings, VLLMSettings, OpenAISettings, ControlSettings):
    _model.model_rebuild()
