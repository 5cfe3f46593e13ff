"""Scenario and persona files: pydantic models and a loader whose errors name file, line and field.

A scenario describes one run: the clock, the town (places, objects, walking paths), the
people (persona files by reference, or inline), scheduled whispers and place events,
probe questions asked at the end, topics whose spread is measured, and LLM settings.
``scenarios/valentines.yaml`` documents every field with comments.
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import networkx as nx
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, NaiveDatetime, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from simulation.errors import FieldPath, InputError, Problem
from simulation.yamlfile import YamlDocument, load_yaml, missing_file, shown

_ID_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
Identifier = Annotated[
    str,
    Field(
        pattern=_ID_PATTERN,
        description="lower_snake_case id: a letter, then letters, digits or underscores",
    ),
]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _one_line(value: str) -> str:
    # Names, kinds and objects go into prompts and tables as one line each: a line break in a
    # name would let it pose as a line of the prompt's own text.
    if "\n" in value or "\t" in value or _CONTROL.search(value):
        raise ValueError("must be one line of text (no line breaks, tabs or control characters)")
    return value


def _printable(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must be plain text (no control characters)")
    return value


ShortText = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_one_line)]
LongText = Annotated[str, Field(max_length=4000), AfterValidator(_printable)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a scenario must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, allow_inf_nan=False)


def _clock_time(value: Any) -> Any:
    # YAML 1.1 reads an unquoted 6:30 as the base-60 integer 390.
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError("write times as quoted 'HH:MM' strings, e.g. '06:30'")
    return value


# --------------------------------------------------------------------------- personas


class BigFive(StrictModel):
    """Target Big Five trait levels on a 0-1 scale (0.5 = population average)."""

    openness: Unit
    conscientiousness: Unit
    extraversion: Unit
    agreeableness: Unit
    neuroticism: Unit


class Routine(StrictModel):
    """When a person is awake, and what a usual day looks like."""

    wake: time = Field(description="usual wake-up time, 'HH:MM'")
    sleep: time = Field(description="usual bedtime, 'HH:MM'")
    description: LongText = ""

    _check_times = field_validator("wake", "sleep", mode="before")(_clock_time)


class Persona(StrictModel):
    """One person. Persona files hold exactly this mapping."""

    id: Identifier
    name: ShortText
    age: int = Field(ge=0, le=120)
    occupation: ShortText
    household: LongText = ""
    traits: list[ShortText] = Field(default_factory=list, max_length=12)
    big_five: BigFive
    # The SPeCtrum split (Lee et al., 2025): who a person is to others, to themself, and in
    # their present circumstances. Optional, so older persona files stay valid.
    social_identity: LongText = Field(
        "", description="roles, groups and standing in town: job, family role, communities they belong to"
    )
    personal_identity: LongText = Field(
        "", description="character, values, tastes and habits: who they are to themself"
    )
    life_context: LongText = Field(
        "", description="their circumstances now: household, money, health, what is on their mind this month"
    )
    backstory: LongText = ""
    speaking_style: LongText = ""
    routine: Routine
    relationships: dict[Identifier, LongText] = Field(
        default_factory=dict, description="how this person sees others, by persona id"
    )
    memories: list[LongText] = Field(
        default_factory=list, max_length=200, description="seed memories at the start of a run"
    )

    @field_validator("relationships")
    @classmethod
    def _not_own_relation(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if info.data.get("id") in value:
            raise ValueError(f"{info.data['id']!r} is this person's own id; relationships are with others")
        return value


class PopulationEntry(StrictModel):
    """People sampled from a population spec (``personas/populations/*.yaml``) and placed in the town."""

    spec: str = Field(description="population spec YAML, relative to the scenario file")
    n: int = Field(ge=1, le=1000, description="how many people to sample")
    seed: int | None = Field(None, ge=0, le=2**31 - 1, description="sampling seed (default: the scenario's seed)")
    homes: list[Identifier] = Field(
        default_factory=list, max_length=500,
        description="place ids people live in, dealt out in a seeded order (default: every place of kind 'home')",
    )
    workplaces: dict[Identifier, Identifier] = Field(
        default_factory=dict,
        description="an occupation's workplace kind in the spec -> place id (default: a place of that kind, if any)",
    )
    start: Literal["home", "workplace"] = Field(
        "home", description="where sampled people are on the first tick (workplace falls back to home)"
    )


class PersonaEntry(StrictModel):
    """A person in a scenario: a persona (from a file or inline) and where they live."""

    file: str | None = Field(None, description="persona YAML, relative to the scenario file")
    persona: Persona | None = Field(None, description="an inline persona instead of a file")
    home: Identifier = Field(description="place id of this person's home")
    start_place: Identifier | None = Field(None, description="where they are at the start (default: home)")
    workplace: Identifier | None = Field(None, description="place id where they usually spend the working day")

    @model_validator(mode="after")
    def _one_source(self) -> PersonaEntry:
        if (self.file is None) == (self.persona is None):
            raise ValueError("give exactly one of 'file' or 'persona'")
        return self


# --------------------------------------------------------------------------- town


class Place(StrictModel):
    id: Identifier
    name: ShortText
    kind: ShortText = Field(description="home, cafe, park, shop, college, bar, ...")
    description: LongText = ""
    objects: list[ShortText] = Field(default_factory=list, max_length=50)
    position: tuple[float, float] | None = Field(
        None, description="x, y for the map in the viewer (default: a graph layout)"
    )


class PathSpec(StrictModel):
    between: tuple[Identifier, Identifier]
    minutes: int = Field(ge=1, le=600, description="walking time in game minutes")


class Town(StrictModel):
    places: list[Place] = Field(min_length=1, max_length=500)
    paths: list[PathSpec] = Field(default_factory=list, max_length=5000)


# --------------------------------------------------------------------------- run


class Clock(StrictModel):
    start: NaiveDatetime = Field(description="game time of the first tick, 'YYYY-MM-DD HH:MM' (no time zone)")
    tick_minutes: int = Field(10, ge=1, le=240, description="game minutes per tick")
    duration_hours: float = Field(24, gt=0, le=24 * 60, description="game hours in a full run")

    @model_validator(mode="after")
    def _possible(self) -> Clock:
        if self.tick_minutes > self.duration_hours * 60:
            raise ValueError(f"tick_minutes ({self.tick_minutes}) is longer than the whole run "
                             f"(duration_hours {self.duration_hours:g} = {self.duration_hours * 60:g} minutes)")
        try:
            self.start + timedelta(hours=self.duration_hours)
        except OverflowError:
            raise ValueError(f"a run of {self.duration_hours:g} hours from {self.start:%Y-%m-%d %H:%M} "
                             "would end after the year 9999") from None
        return self

    @property
    def total_ticks(self) -> int:
        return max(1, int(self.duration_hours * 60 // self.tick_minutes))

    def time_at(self, tick: int) -> datetime:
        return self.start + timedelta(minutes=tick * self.tick_minutes)

    def tick_at(self, moment: datetime) -> int:
        """First tick whose time is at or after ``moment``."""
        minutes = (moment - self.start).total_seconds() / 60
        return max(0, int(-(-minutes // self.tick_minutes)))


class ScheduledEvent(StrictModel):
    at: NaiveDatetime = Field(description="game time, 'YYYY-MM-DD HH:MM' (no time zone)")
    kind: Literal["whisper", "place_event"] = Field(
        description="whisper: a thought put into one person's mind (their 'inner voice'); "
        "place_event: something everyone at a place can see while it lasts"
    )
    text: LongText = Field(min_length=1)
    to: Identifier | None = Field(None, description="persona id (whisper)")
    place: Identifier | None = Field(None, description="place id (place_event)")
    duration_minutes: int = Field(60, ge=1, le=24 * 60, description="how long a place event lasts")

    @model_validator(mode="after")
    def _target(self) -> ScheduledEvent:
        if self.kind == "whisper" and not self.to:
            raise ValueError("a whisper needs 'to' (a persona id)")
        if self.kind == "place_event" and not self.place:
            raise ValueError("a place_event needs 'place' (a place id)")
        return self


class Probe(StrictModel):
    question: LongText = Field(min_length=1)
    agents: list[Identifier] | Literal["all"] = "all"


class Topic(StrictModel):
    id: Identifier
    keywords: list[ShortText] = Field(min_length=1, description="case-insensitive words that mark the topic")


class LLMSettings(StrictModel):
    """Which LLM answers for the agents, how it samples, and how calls are cached and retried."""

    backend: Literal["llamacpp", "vllm", "openai"] = Field(
        "llamacpp", description="llamacpp: a GGUF file in this process (CPU default); vllm: the in-process "
        "vLLM engine (GPU); openai: one or more OpenAI-compatible servers (vLLM serve, llama.cpp, Ollama, OpenAI)"
    )
    model: str | None = Field(
        None, description="llamacpp: path to a GGUF file (default: bundled SmolLM2-135M-Instruct); vllm: a Hugging "
        "Face model folder or id; openai: the served model name (default: the server's first model)"
    )
    base_urls: list[Annotated[str, Field(pattern=r"^https?://", max_length=500)]] = Field(
        default_factory=list, max_length=64,
        description="openai: server URLs such as http://127.0.0.1:8000/v1; requests go to the least busy one",
    )
    api_key_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = Field(
        "OPENAI_API_KEY", description="openai: environment variable holding the API key (unset: no key sent)"
    )
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = Field(
        "auto", description="openai: how the JSON schema is sent; auto tries json_schema, then json_object+schema"
    )
    temperature: float = Field(0.7, ge=0, le=2)
    max_tokens: int = Field(256, ge=8, le=4096, description="cap on the tokens of any one answer")
    context_tokens: int = Field(2048, ge=256, le=131072)
    threads: int | None = Field(None, ge=1, le=512, description="llamacpp: CPU threads (default: all cores)")
    concurrency: int = Field(16, ge=1, le=4096, description="openai: requests in flight per server")
    timeout_s: float = Field(120, gt=0, le=3600, description="openai: seconds before one request is abandoned")
    max_retries: int = Field(4, ge=0, le=50, description="openai: retries on timeouts, 429 and 5xx")
    patience_s: float = Field(
        300, gt=0, le=86400, description="openai: how long a server may stay unreachable before the run stops"
    )
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="vllm: GPUs per model")
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1, description="vllm: share of GPU memory to reserve")
    cache: Literal["use", "refresh", "off"] = Field(
        "use", description="replay cache: use (read and write), refresh (write only), off"
    )
    cache_path: str | None = Field(None, description="replay-cache SQLite file (default ~/.cache/agora/llm.sqlite)")


class RetrievalWeights(StrictModel):
    recency: float = Field(1.0, ge=0, le=100)
    importance: float = Field(1.0, ge=0, le=100)
    relevance: float = Field(1.0, ge=0, le=100)


class MemorySettings(StrictModel):
    """Memory retrieval and reflection, as in Generative Agents (Park et al., 2023)."""

    retrieval_weights: RetrievalWeights = Field(default_factory=RetrievalWeights)
    recency_decay: float = Field(0.995, gt=0, le=1, description="recency = decay ** game hours since last access")
    top_k: int = Field(8, ge=1, le=100, description="memories retrieved per query")
    reflection_threshold: float = Field(
        150, ge=1, le=100000, description="summed importance of new memories that triggers a reflection"
    )
    embedding_model: str | None = Field(
        None, description="sentence-transformers model folder (default: the bundled all-MiniLM-L6-v2)"
    )


class CognitionSettings(StrictModel):
    attention_bandwidth: int = Field(3, ge=1, le=50, description="how many things an agent notices per tick")
    max_conversation_turns: int = Field(6, ge=2, le=50)
    conversation_cooldown_minutes: int = Field(120, ge=0, le=24 * 60, description="before the same two talk again")
    memory_window: int = Field(8, ge=1, le=100, description="recent memories shown in a prompt")


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
    topics: list[Topic] = Field(default_factory=list)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    cognition: CognitionSettings = Field(default_factory=CognitionSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)


# --------------------------------------------------------------------------- loading


def resolve_path(value: str, base: Path) -> Path:
    """A user-given path: ``~`` expanded where possible, relative paths taken from ``base``."""
    path = Path(value)
    try:
        path = path.expanduser()
    except RuntimeError:  # '~someone' with no such user: left as is, reported as not found
        pass
    return path if path.is_absolute() else base / path


class ResolvedPersona(BaseModel):
    """A persona with the scenario's placement of it."""

    persona: Persona
    home: str
    start_place: str
    workplace: str | None = None
    source: str


class LoadedScenario(BaseModel):
    """A validated scenario with every persona resolved; what the engine runs."""

    path: str
    scenario: Scenario
    people: list[ResolvedPersona]
    source_text: str

    def persona(self, agent_id: str) -> Persona:
        return next(p.persona for p in self.people if p.persona.id == agent_id)

    def model_path(self) -> Path | None:
        """The scenario's GGUF model file (relative to the scenario file), or None for the bundled one."""
        model = self.scenario.llm.model
        return None if model is None else resolve_path(model, Path(self.path).parent)


_UNION_TAG = re.compile(r"^(list|literal|dict|tuple|set|constrained-str|function-[a-z-]+)(\[.*\])?$")


def _pydantic_problems(doc: YamlDocument, exc: ValidationError, prefix: FieldPath = ()) -> list[Problem]:
    problems = []
    seen: set[FieldPath] = set()
    for err in exc.errors(include_url=False):
        # Union branches add tags such as "list[constrained-str]" or "literal['all']" to the
        # location; they are pydantic's words, not the user's field names.
        raw = prefix + tuple(err["loc"])
        loc = tuple(p for p in raw if not (isinstance(p, str) and _UNION_TAG.match(p)))
        if any(isinstance(p, str) and p.startswith("literal[") for p in raw) and len(raw) != len(loc):
            union_field = loc
            if any(other[: len(union_field)] == union_field for other in seen) or union_field in seen:
                continue  # the other branch of the union already explains this field
        if loc in seen:
            continue
        seen.add(loc)
        msg = err["msg"]
        key = bool(loc) and loc[-1] == "[key]"  # a mapping key failed (relationships are keyed by persona id)
        if key:
            loc = loc[:-1]
            msg = f"key: {msg}"
        if err["type"] == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == _ID_PATTERN:
            msg = (f"{'key ' if key else ''}{shown(str(err['input']))} is not a lower_snake_case id (a letter, "
                   f"then letters, digits or underscores): it should match pattern '{_ID_PATTERN}'")
        elif err["type"] == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        problems.append(doc.problem(loc, msg))
    return problems


def _validate(doc: YamlDocument, model: type[BaseModel], what: str) -> Any:
    if not isinstance(doc.data, dict):
        kind = type(doc.data).__name__
        kind = {"list": "a list", "str": "a string", "int": "a number", "float": "a number",
                "NoneType": "nothing (null)", "bool": "a boolean", "datetime": "a date"}.get(kind, kind)
        raise InputError(Problem(str(doc.path), f"a {what} file must be a mapping of fields, found {kind}", 1, 1))
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        raise InputError(_pydantic_problems(doc, exc)) from None


def load_persona(path: Path | str) -> Persona:
    """Load and validate one persona file."""
    return _validate(load_yaml(path, "persona file"), Persona, "persona")


def _check_references(doc: YamlDocument, sc: Scenario, people: list[ResolvedPersona],
                      sampled: list[ResolvedPersona] | None = None) -> list[Problem]:
    problems: list[Problem] = []
    place_ids: dict[str, int] = {}
    for i, place in enumerate(sc.town.places):
        if place.id in place_ids:
            problems.append(doc.problem(("town", "places", i, "id"), f"duplicate place id {place.id!r}"))
        place_ids[place.id] = i
    for i, path in enumerate(sc.town.paths):
        a, b = path.between
        for j, end in enumerate((a, b)):
            if end not in place_ids:
                problems.append(doc.problem(("town", "paths", i, "between", j), f"unknown place {end!r}"))
        if a == b:
            problems.append(doc.problem(("town", "paths", i, "between"), f"a path from {a!r} to itself"))
    if not problems and len(place_ids) > 1:
        graph = nx.Graph()
        graph.add_nodes_from(place_ids)
        graph.add_edges_from(p.between for p in sc.town.paths)
        parts = sorted(nx.connected_components(graph), key=len, reverse=True)
        for part in parts[1:]:
            cut_off = sorted(part)[0]
            problems.append(
                doc.problem(
                    ("town", "places", place_ids[cut_off], "id"),
                    f"place {cut_off!r} cannot be reached from {sorted(parts[0])[0]!r}; add a path",
                )
            )
    agent_ids: dict[str, int] = {}
    for i, person in enumerate(people):
        pid = person.persona.id
        if pid in agent_ids:
            problems.append(doc.problem(("personas", i), f"duplicate persona id {pid!r} (also personas[{agent_ids[pid]}])"))
        agent_ids.setdefault(pid, i)
        for key in ("home", "start_place", "workplace"):
            place = getattr(sc.personas[i], key)
            if place is not None and place not in place_ids:
                problems.append(doc.problem(("personas", i, key), f"unknown place {place!r}"))
    for person in sampled or []:  # the sampler placed them in known places and kept their ids unique
        agent_ids.setdefault(person.persona.id, -1)
    end = sc.clock.start + timedelta(hours=sc.clock.duration_hours)
    for i, ev in enumerate(sc.events):
        if ev.to is not None and ev.to not in agent_ids:
            problems.append(doc.problem(("events", i, "to"), f"unknown persona {ev.to!r}"))
        if ev.place is not None and ev.place not in place_ids:
            problems.append(doc.problem(("events", i, "place"), f"unknown place {ev.place!r}"))
        if not sc.clock.start <= ev.at < end or sc.clock.tick_at(ev.at) >= sc.clock.total_ticks:
            problems.append(
                doc.problem(("events", i, "at"), f"{ev.at:%Y-%m-%d %H:%M} is outside the run "
                            f"({sc.clock.start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M})")
            )
    for i, probe in enumerate(sc.probes):
        if probe.agents != "all":
            for j, aid in enumerate(probe.agents):
                if aid not in agent_ids:
                    problems.append(doc.problem(("probes", i, "agents", j), f"unknown persona {aid!r}"))
    topic_ids: set[str] = set()
    for i, topic in enumerate(sc.topics):
        if topic.id in topic_ids:
            problems.append(doc.problem(("topics", i, "id"), f"duplicate topic id {topic.id!r}"))
        topic_ids.add(topic.id)
    if sc.llm.model is not None and sc.llm.backend == "llamacpp":
        model_path = resolve_path(sc.llm.model, Path(doc.path).parent)
        why = missing_file(model_path)
        if why is not None:
            problems.append(doc.problem(("llm", "model"), f"model file {why}: {model_path}"))
    if sc.memory.embedding_model is not None:
        folder = resolve_path(sc.memory.embedding_model, Path(doc.path).parent)
        if missing_file(folder / "modules.json") is not None:
            problems.append(doc.problem(("memory", "embedding_model"),
                                        f"no sentence-transformers model folder (with modules.json) at {folder}"))
    for i, entry in enumerate(sc.personas):  # an inline persona belongs to this scenario: its ties must too
        if entry.persona is not None:
            for other in entry.persona.relationships:
                if other not in agent_ids:
                    problems.append(doc.problem(("personas", i, "persona", "relationships", other),
                                                f"unknown persona {other!r}"))
    return problems


def load(path: Path | str) -> LoadedScenario:
    """Load, validate and resolve a scenario file. Raises InputError naming file, line and field."""
    doc = load_yaml(path, "scenario file")
    sc: Scenario = _validate(doc, Scenario, "scenario")
    people: list[ResolvedPersona] = []
    problems: list[Problem] = []
    for i, entry in enumerate(sc.personas):
        if entry.persona is not None:
            persona, source = entry.persona, f"{doc.path} (inline)"
        else:
            persona_path = Path(doc.path).parent / entry.file  # type: ignore[operator]
            why = missing_file(persona_path)
            if why is not None:
                problems.append(doc.problem(("personas", i, "file"), f"persona file {why}: {persona_path}"))
                continue
            try:
                persona = load_persona(persona_path)
            except InputError as exc:
                problems.extend(exc.problems)
                continue
            source = str(persona_path)
        people.append(
            ResolvedPersona(persona=persona, home=entry.home, start_place=entry.start_place or entry.home,
                            workplace=entry.workplace, source=source)
        )
    if problems:
        raise InputError(problems)
    sampled: list[ResolvedPersona] = []
    if sc.population is not None:
        from simulation.population import resolve_population  # it builds on this module's models

        try:
            sampled = resolve_population(doc, sc, {p.persona.id for p in people})
        except InputError as exc:
            problems.extend(exc.problems)
    problems += _check_references(doc, sc, people, sampled)
    if problems:
        raise InputError(problems)
    return LoadedScenario(path=str(doc.path), scenario=sc, people=people + sampled, source_text=doc.text)


def json_schema(kind: Literal["scenario", "persona"] = "scenario") -> dict[str, Any]:
    """JSON Schema for editors (e.g. the YAML language server's ``# yaml-language-server: $schema=``)."""
    model = Scenario if kind == "scenario" else Persona
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"Agora {kind}"
    return schema
