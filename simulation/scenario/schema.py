"""A scenario file as a whole: the ``Scenario`` model, its JSON Schema, and its own error wording.

``scenarios/valentines.yaml`` documents every field with comments.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from simulation.errors import FieldPath
from simulation.formats.fields import LongText, ShortText, StrictModel
from simulation.formats.persona import Persona
from simulation.llm import registry
from simulation.llm.registry import AnyLLMSettings
from simulation.scenario.measures import Fact, FactDetail, Probe, Topic
from simulation.scenario.people import PersonaEntry, PopulationEntry
from simulation.scenario.settings import CognitionSettings, MemorySettings, changed_section
from simulation.scenario.story import Story
from simulation.scenario.timeline import Clock, ScheduledEvent
from simulation.scenario.town import Town

__all__ = ["Scenario", "explain", "json_schema"]


def _run_dir_name(value: str) -> str:
    # The name starts the run directory's name (runs/NAME-DATE-TIME-XXXX): no path separators,
    # and short enough in bytes for any file system.
    if "/" in value or "\\" in value:
        raise ValueError("must not contain '/' or '\\' (it names the run directory)")
    if len(value.encode("utf-8")) > 200:
        raise ValueError("is longer than 200 bytes in UTF-8 (it names the run directory)")
    return value


class Scenario(StrictModel):
    name: Annotated[ShortText, AfterValidator(_run_dir_name)]
    description: LongText = ""
    seed: int = Field(0, ge=0, le=2**31 - 1)
    clock: Clock
    town: Town
    personas: list[PersonaEntry] = Field(min_length=1, max_length=1000)
    population: PopulationEntry | None = Field(None, description="sampled people added to the named personas")
    events: list[ScheduledEvent] = Field(default_factory=list)
    probes: list[Probe] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list, description="news whose spread through the town is traced")
    topics: list[Topic] = Field(default_factory=list, description="older keyword topics: loaded, no longer measured")
    story: Story = Field(default_factory=Story, description="the beats the story should reach, scored in the "
                         "behaviour report")
    llm: AnyLLMSettings = Field(default_factory=registry.default_settings,
                                description="the LLM: 'backend' picks which, and which other settings apply")
    cognition: CognitionSettings = Field(default_factory=CognitionSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)

    def with_setting(self, setting: str, value: object) -> Scenario:
        """This scenario with ``setting`` ("cognition.reactions_per_hour", one of
        ``timeline.CHANGEABLE``) set to ``value``, validated (ValueError saying why not): what a
        ``setting`` event changes from its tick on."""
        section, _, name = setting.partition(".")
        return self.model_copy(update={section: changed_section(getattr(self, section), name, value)})

    def delivery_order(self) -> list[tuple[int, int, ScheduledEvent]]:
        """(tick, index, event) of every scheduled event in the order a run delivers them: by the
        tick it falls in, then as listed. The model steps by it, and whatever asks who is in the
        town when, or how a fact stands, walks it (``LoadedScenario.in_town``, the reference checks,
        a fork's checks)."""
        return sorted(((self.clock.tick_at(ev.at), i, ev) for i, ev in enumerate(self.events)),
                      key=lambda t: (t[0], t[1]))

    def with_correction(self, fact: str, text: str, details: list[FactDetail] | None = None) -> Scenario:
        """This scenario with fact ``fact``'s text replaced by ``text`` (and its details by ``details``,
        unless None): what a ``correction`` event makes of it from its tick on. The fact keeps its id
        and ``known_by``, so what it was called before and after is one fact that changed."""
        update: dict[str, Any] = {"text": text, **({"details": list(details)} if details is not None else {})}
        return self.model_copy(update={"facts": [f.model_copy(update=update) if f.id == fact else f
                                                 for f in self.facts]})


def explain(loc: FieldPath, error: dict[str, Any]) -> str | None:
    """Messages about the ``llm:`` block that name backends (pydantic's would name models).

    ``loc`` is pydantic's own location: ``("llm", BACKEND, SETTING)`` inside the block, and
    ``("llm", BACKEND, "groups", NAME, BACKEND, SETTING)`` inside a model group's."""
    if loc[:1] != ("llm",):
        return None
    if error["type"] == "union_tag_invalid":
        return registry.unknown_backend(error.get("ctx", {}).get("tag"))
    if error["type"] == "extra_forbidden" and len(loc) >= 3 and loc[-2] in registry.BACKENDS:
        owners = registry.owners_of(str(loc[-1]))
        if owners:
            return f"{loc[-1]!r} is a setting of the {' or '.join(owners)} backend, not of {loc[-2]}"
    return None


def json_schema(kind: Literal["scenario", "persona"] = "scenario") -> dict[str, Any]:
    """JSON Schema for editors (e.g. the YAML language server's ``# yaml-language-server: $schema=``)."""
    model = Scenario if kind == "scenario" else Persona
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"Agora {kind}"
    return schema
