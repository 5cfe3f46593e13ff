"""Population specs and a deterministic sampler: marginal distributions in, persona files out.

Why: a town needs more people than anyone wants to write by hand (TinyTroupe's factory idea),
but a study needs to know what its population is made of and to get the same people again.
A spec (``personas/populations/*.yaml``) gives marginals for age, occupation, household and
each Big Five factor, plus name lists; one seeded numpy generator draws every field in a
fixed order, so spec + n + seed always give the same people, and names never repeat.
Text fields (traits, speaking style, the SPeCtrum identity fields, routine) are composed from
the sampled values, so every sampled persona is complete and valid without an LLM; an LLM
may add a backstory afterwards (``agora personas sample --backstories``).
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import yaml
from pydantic import Field, field_validator, model_validator

from simulation.errors import InputError, Problem
from simulation.scenario import (
    BigFive,
    Identifier,
    LongText,
    Persona,
    ResolvedPersona,
    Routine,
    ShortText,
    StrictModel,
    Unit,
    _clock_time,
    _validate,
    resolve_path,
)
from simulation.yamlfile import YamlDocument, load_yaml

if TYPE_CHECKING:
    from simulation.scenario import Scenario

FACTORS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
Weight = Annotated[float, Field(gt=0, le=1e6, description="relative weight (need not sum to 1)")]
AgeRange = tuple[Annotated[int, Field(ge=0, le=120)], Annotated[int, Field(ge=0, le=120)]]


def _ordered(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] > value[1]:
        raise ValueError(f"write the range low to high, e.g. [{value[1]}, {value[0]}]")
    return value


# --------------------------------------------------------------------------- spec


class AgeBin(StrictModel):
    range: AgeRange = Field(description="[youngest, oldest], inclusive; ages are uniform inside the bin")
    weight: Weight = 1.0

    _check = field_validator("range")(_ordered)


class Occupation(StrictModel):
    title: ShortText
    weight: Weight = 1.0
    workplace: Identifier | None = Field(
        None, description="kind of town place where they work (matched against places' kind), or none"
    )
    ages: AgeRange | None = Field(None, description="only people of these ages get this occupation")
    day: LongText = Field("", description="their usual day, without the subject: 'opens the bakery at 06:00'")
    memories: list[LongText] = Field(
        default_factory=list, max_length=20, description="seed memories; {first} is replaced by the first name"
    )

    _check = field_validator("ages")(_ordered)


class Household(StrictModel):
    text: LongText = Field(min_length=1, description="e.g. 'Lives alone in a rented flat.'")
    weight: Weight = 1.0
    ages: AgeRange | None = None

    _check = field_validator("ages")(_ordered)


class Choice(StrictModel):
    text: ShortText
    weight: Weight = 1.0


class TraitDistribution(StrictModel):
    """A normal distribution truncated to [0, 1]."""

    mean: Unit = 0.5
    sd: float = Field(0.15, gt=0, le=1)


class BigFiveSpec(StrictModel):
    openness: TraitDistribution = Field(default_factory=TraitDistribution)
    conscientiousness: TraitDistribution = Field(default_factory=TraitDistribution)
    extraversion: TraitDistribution = Field(default_factory=TraitDistribution)
    agreeableness: TraitDistribution = Field(default_factory=TraitDistribution)
    neuroticism: TraitDistribution = Field(default_factory=TraitDistribution)


class TimeWindow(StrictModel):
    earliest: time = Field(description="'HH:MM'")
    latest: time = Field(description="'HH:MM'; times are drawn uniformly in 10-minute steps")

    _check_times = field_validator("earliest", "latest", mode="before")(_clock_time)

    @model_validator(mode="after")
    def _order(self) -> TimeWindow:
        if self.latest < self.earliest:
            raise ValueError("latest must not be before earliest")
        return self


class RoutineSpec(StrictModel):
    wake: TimeWindow
    sleep: TimeWindow

    @model_validator(mode="after")
    def _order(self) -> RoutineSpec:
        if self.sleep.earliest <= self.wake.latest:
            raise ValueError("the sleep window must start after the wake window ends")
        return self


NamePart = Annotated[str, Field(min_length=1, max_length=80)]


class Names(StrictModel):
    first: list[NamePart] = Field(min_length=1, max_length=5000)
    last: list[NamePart] = Field(min_length=1, max_length=5000)


class PopulationSpec(StrictModel):
    """A population: marginal distributions of the fields of its people."""

    name: ShortText
    description: LongText = ""
    ages: list[AgeBin] = Field(min_length=1, max_length=200)
    occupations: list[Occupation] = Field(min_length=1, max_length=500)
    households: list[Household] = Field(min_length=1, max_length=200)
    big_five: BigFiveSpec = Field(default_factory=BigFiveSpec)
    names: Names
    values: list[Choice] = Field(default_factory=list, max_length=200, description="two are drawn per person")
    affiliations: list[Choice] = Field(
        default_factory=list, max_length=200, description="zero to two groups per person ('the town choir')"
    )
    concerns: list[Choice] = Field(
        default_factory=list, max_length=200, description="one per person, without the subject: 'is saving for a car'"
    )
    routine: RoutineSpec
    acquaintances: int = Field(2, ge=0, le=20, description="how many others in the population each person knows")


def _fields_of(template: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError:
        return {"?"}


def _spec_problems(doc: YamlDocument, spec: PopulationSpec) -> list[Problem]:
    """What pydantic cannot check: every age can be given an occupation and a household."""
    problems = []
    for group, items in (("occupations", spec.occupations), ("households", spec.households)):
        for i, bin_ in enumerate(spec.ages):
            lo, hi = bin_.range
            for age in range(lo, hi + 1):
                if not any(it.ages is None or it.ages[0] <= age <= it.ages[1] for it in items):
                    problems.append(doc.problem(("ages", i, "range"), f"no entry of {group} allows age {age}"))
                    break
    for i, occ in enumerate(spec.occupations):
        for j, memory in enumerate(occ.memories):
            bad = _fields_of(memory) - {"first", "name"}
            if bad:
                problems.append(doc.problem(("occupations", i, "memories", j),
                                            "only {first} and {name} may appear in braces"))
    for i, name in enumerate(spec.names.first):
        if not slug(name):
            problems.append(doc.problem(("names", "first", i), f"{name!r} has no letters to make an id from"))
    return problems


def load_spec(path: Path | str) -> PopulationSpec:
    """Load and validate a population spec; errors name file, line and field."""
    doc = load_yaml(path, "population spec")
    spec: PopulationSpec = _validate(doc, PopulationSpec, "population spec")
    problems = _spec_problems(doc, spec)
    if problems:
        raise InputError(problems)
    return spec


# --------------------------------------------------------------------------- sampling


class TooFewNames(ValueError):
    """More people were asked for than the name lists can name without repeats."""


def slug(name: str) -> str:
    """'María José Núñez' -> 'maria_jose_nunez' (a persona id)."""
    ascii_ = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    s = re.sub(r"[^a-z0-9]+", "_", ascii_.lower()).strip("_")
    s = re.sub(r"^[^a-z]+", "", s)  # an id starts with a letter
    return s[:64].rstrip("_")


@dataclass
class Sampled:
    """One sampled person and what the town placement needs to know."""

    persona: Persona
    workplace_kind: str | None


def _weights(items: list[Any]) -> np.ndarray:
    w = np.array([it.weight for it in items], dtype=float)
    return w / w.sum()


def _allowed(items: list[Any], age: int) -> list[int]:
    return [i for i, it in enumerate(items) if it.ages is None or it.ages[0] <= age <= it.ages[1]]


def _pick(rng: np.random.Generator, items: list[Any], age: int) -> Any:
    idx = _allowed(items, age)
    return items[idx[int(rng.choice(len(idx), p=_weights([items[i] for i in idx])))]]


def _pick_some(rng: np.random.Generator, items: list[Choice], k: int) -> list[str]:
    k = min(k, len(items))
    if k <= 0:
        return []
    chosen = rng.choice(len(items), size=k, replace=False, p=_weights(items))
    return [items[int(i)].text for i in sorted(chosen)]


def _truncated_normal(rng: np.random.Generator, dist: TraitDistribution) -> float:
    for _ in range(10_000):  # rejection: exact, and cheap unless the mass in [0, 1] is tiny
        x = rng.normal(dist.mean, dist.sd)
        if 0.0 <= x <= 1.0:
            return round(float(x), 2)
    return round(min(1.0, max(0.0, dist.mean)), 2)


def _time_in(rng: np.random.Generator, window: TimeWindow) -> time:
    start = window.earliest.hour * 60 + window.earliest.minute
    end = window.latest.hour * 60 + window.latest.minute
    minute = start + 10 * int(rng.integers(0, (end - start) // 10 + 1))
    return time(minute // 60, minute % 60)


def _names(rng: np.random.Generator, spec: PopulationSpec, n: int, exclude: set[str]) -> list[tuple[str, str]]:
    firsts, lasts = spec.names.first, spec.names.last
    order = rng.permutation(len(firsts) * len(lasts))
    chosen: list[tuple[str, str]] = []
    seen = set(exclude)
    seen_names: set[str] = set()
    for k in order:
        first, last = firsts[int(k) // len(lasts)], lasts[int(k) % len(lasts)]
        name = f"{first} {last}"
        pid = slug(name)
        if pid in seen or name in seen_names:
            continue
        seen.add(pid)
        seen_names.add(name)
        chosen.append((first, last))
        if len(chosen) == n:
            return chosen
    raise TooFewNames(f"the name lists give only {len(chosen)} unused names; ask for at most that many people, "
                      "or add names to the spec")


# Words for the ends of each factor: what a neighbour would say about someone.
_POLES = {
    "openness": (("practical", "conventional"), ("curious", "imaginative")),
    "conscientiousness": (("easy-going", "disorganised"), ("organised", "dependable")),
    "extraversion": (("quiet", "reserved"), ("outgoing", "talkative")),
    "agreeableness": (("blunt", "sceptical"), ("kind", "trusting")),
    "neuroticism": (("calm", "even-tempered"), ("anxious", "moody")),
}


def traits_for(b5: BigFive) -> list[str]:
    """Adjectives for the factors that are clearly high or low (two words when extreme)."""
    words: list[str] = []
    for factor in FACTORS:
        v = getattr(b5, factor)
        low, high = _POLES[factor]
        if v >= 0.65 or v <= 0.35:
            pole = high if v >= 0.65 else low
            words.extend(pole if v >= 0.8 or v <= 0.2 else pole[:1])
    return words or ["even-keeled"]


def speaking_style_for(b5: BigFive) -> str:
    parts = []
    if b5.extraversion >= 0.65:
        parts.append("Talks readily and at length, and starts conversations with strangers.")
    elif b5.extraversion <= 0.35:
        parts.append("Says little, in short sentences, and rarely starts a conversation.")
    else:
        parts.append("Chats easily with people they know, less so with strangers.")
    if b5.agreeableness >= 0.65:
        parts.append("Warm and polite; thanks people and softens any disagreement.")
    elif b5.agreeableness <= 0.35:
        parts.append("Blunt; disagrees openly and does not soften criticism.")
    if b5.neuroticism >= 0.65:
        parts.append("Often voices worries and second thoughts.")
    elif b5.neuroticism <= 0.35:
        parts.append("Sounds unhurried and sure of themself.")
    if b5.openness >= 0.65:
        parts.append("Likes to bring up ideas, books and plans.")
    return " ".join(parts)


def _an(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def _hhmm(t: time) -> str:
    return f"{t.hour:02d}:{t.minute:02d}"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _persona(rng: np.random.Generator, spec: PopulationSpec, first: str, last: str) -> Sampled:
    """One person; the order of draws is fixed, so a seed always gives the same person."""
    bin_ = spec.ages[int(rng.choice(len(spec.ages), p=_weights(spec.ages)))]
    age = int(rng.integers(bin_.range[0], bin_.range[1] + 1))
    occ: Occupation = _pick(rng, spec.occupations, age)
    household: Household = _pick(rng, spec.households, age)
    b5 = BigFive(**{f: _truncated_normal(rng, getattr(spec.big_five, f)) for f in FACTORS})
    wake, sleep = _time_in(rng, spec.routine.wake), _time_in(rng, spec.routine.sleep)
    values = _pick_some(rng, spec.values, 2)
    groups = _pick_some(rng, spec.affiliations, int(rng.integers(0, 3)))
    concern = _pick_some(rng, spec.concerns, 1)
    memory_idx = rng.permutation(len(occ.memories))[:2] if occ.memories else []

    name = f"{first} {last}"
    traits = traits_for(b5)
    social = f"{age}-year-old {occ.title}."
    if groups:
        social += f" Belongs to {_join(groups)}."
    personal = f"{first} is {_join(traits)}."
    if values:
        personal += f" Cares most about {_join(values)}."
    context = household.text.rstrip(".") + "."
    if concern:
        context += f" {first} {concern[0].rstrip('.')}."
    day = f"{first} {occ.day.rstrip('.')}." if occ.day else f"{first} spends the day around town."
    memories = [occ.memories[int(i)].format(first=first, name=name) for i in sorted(memory_idx)]
    if concern:
        memories.append(f"{first} {concern[0].rstrip('.')}.")
    persona = Persona(
        id=slug(name), name=name, age=age, occupation=occ.title, household=household.text,
        traits=traits, big_five=b5, social_identity=social, personal_identity=personal, life_context=context,
        speaking_style=speaking_style_for(b5),
        routine=Routine(wake=wake, sleep=sleep,
                        description=f"{first} gets up at {_hhmm(wake)}. {day} Bed at about {_hhmm(sleep)}."),
        memories=memories,
    )
    return Sampled(persona, occ.workplace)


def sample(spec: PopulationSpec, n: int, seed: int, exclude: set[str] | frozenset[str] = frozenset()) -> list[Sampled]:
    """``n`` people from ``spec``; ``exclude`` holds ids already taken (e.g. a scenario's named people).

    Raises TooFewNames when the name lists cannot name ``n`` people without repeats."""
    rng = np.random.default_rng(seed)
    names = _names(rng, spec, n, set(exclude))
    people = [_persona(rng, spec, first, last) for first, last in names]
    if spec.acquaintances and len(people) > 1:
        for i, person in enumerate(people):
            others = [j for j in range(len(people)) if j != i]
            k = min(spec.acquaintances, len(others))
            for j in sorted(int(x) for x in rng.choice(others, size=k, replace=False)):
                a, b = person.persona, people[j].persona
                for x, y in ((a, b), (b, a)):
                    x.relationships.setdefault(
                        y.id, f"Knows {y.name.split()[0]} from around town; {_an(y.occupation)}.")
    return people


# --------------------------------------------------------------------------- expectations


def _normal_cdf(x: float, mean: float, sd: float) -> float:
    return 0.5 * (1.0 + math.erf((x - mean) / (sd * math.sqrt(2.0))))


def truncated_cdf(x: float, dist: TraitDistribution) -> float:
    """CDF of the spec's normal truncated to [0, 1]."""
    lo, hi = _normal_cdf(0.0, dist.mean, dist.sd), _normal_cdf(1.0, dist.mean, dist.sd)
    return min(1.0, max(0.0, (_normal_cdf(min(max(x, 0.0), 1.0), dist.mean, dist.sd) - lo) / (hi - lo)))


def expected_marginals(spec: PopulationSpec) -> dict[str, dict[str, float]]:
    """Exact probabilities of each age bin, occupation and household (age limits included)."""
    bins = _weights(spec.ages)
    out: dict[str, dict[str, float]] = {
        "age": {}, "occupation": Counter(), "household": Counter()}  # type: ignore[dict-item]
    for p_bin, bin_ in zip(bins, spec.ages):
        lo, hi = bin_.range
        out["age"][f"{lo}-{hi}"] = out["age"].get(f"{lo}-{hi}", 0.0) + float(p_bin)
        for age in range(lo, hi + 1):
            p_age = float(p_bin) / (hi - lo + 1)
            for key, items, label in (("occupation", spec.occupations, "title"),
                                      ("household", spec.households, "text")):
                idx = _allowed(items, age)
                w = _weights([items[i] for i in idx])
                for i, wi in zip(idx, w):
                    out[key][getattr(items[i], label)] += p_age * float(wi)
    return {k: dict(v) for k, v in out.items()}


def observed_marginals(spec: PopulationSpec, people: list[Sampled]) -> dict[str, dict[str, int]]:
    ages: Counter[str] = Counter()
    for s in people:
        for bin_ in spec.ages:
            lo, hi = bin_.range
            if lo <= s.persona.age <= hi:
                ages[f"{lo}-{hi}"] += 1
                break
    return {
        "age": dict(ages),
        "occupation": dict(Counter(s.persona.occupation for s in people)),
        "household": dict(Counter(s.persona.household for s in people)),
    }


# --------------------------------------------------------------------------- files


class _Quoted(str):
    """A clock time, written quoted: YAML 1.1 would read an unquoted 10:30 as a number."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Quoted, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", str(v), style="'"))


def persona_yaml(persona: Persona, header: str = "") -> str:
    """A persona file's text; loads back with ``scenario.load_persona`` to an equal persona."""
    data = persona.model_dump(mode="json")
    data["routine"]["wake"] = _Quoted(_hhmm(persona.routine.wake))
    data["routine"]["sleep"] = _Quoted(_hhmm(persona.routine.sleep))
    data = {k: v for k, v in data.items() if v not in ("", [], {})}
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)
    lines = "".join(f"# {line}\n" for line in header.splitlines())
    return lines + body


def write_sample(out: Path, spec_path: Path, spec: PopulationSpec, people: list[Sampled], seed: int,
                 backstory_failures: int = 0, calls: list[dict[str, Any]] | None = None) -> list[Path]:
    """Persona files, population.json (who, and expected vs observed marginals), marginals.html,
    and the backstory calls when an LLM wrote backstories. Returns the persona files."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    n = len(people)
    paths = []
    for i, s in enumerate(people):
        path = out / f"{s.persona.id}.yaml"
        header = (f"Sampled by `agora personas sample` from {spec_path} (n {n}, seed {seed}, person {i + 1}).\n"
                  "Edit freely: it is an ordinary persona file.")
        path.write_text(persona_yaml(s.persona, header), "utf-8")
        paths.append(path)
    manifest = {
        "spec": str(spec_path), "n": n, "seed": seed, "backstories": calls is not None,
        "backstory_failures": backstory_failures,
        "people": [{"id": s.persona.id, "name": s.persona.name, "age": s.persona.age,
                    "occupation": s.persona.occupation, "household": s.persona.household,
                    "workplace_kind": s.workplace_kind,
                    "big_five": s.persona.big_five.model_dump(), "file": p.name} for s, p in zip(people, paths)],
        "expected": expected_marginals(spec), "observed": observed_marginals(spec, people),
    }
    (out / "population.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
    if calls is not None:  # every LLM attempt, so each backstory can be traced to its prompt
        (out / "backstory_calls.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in calls),
                                                   "utf-8")
    marginals_figure(spec, people).write_html(out / "marginals.html", include_plotlyjs="directory")
    return paths


# --------------------------------------------------------------------------- scenarios


def resolve_population(doc: YamlDocument, sc: Scenario, taken: set[str]) -> list[ResolvedPersona]:
    """Sample a scenario's ``population:`` and place its people in the town; errors are located."""
    entry = sc.population
    assert entry is not None
    here = ("population",)
    spec_path = resolve_path(entry.spec, Path(doc.path).parent)
    if not spec_path.is_file():
        what = "is a directory" if spec_path.is_dir() else "not found"
        raise InputError(doc.problem(here + ("spec",), f"population spec {what}: {spec_path}"))
    spec = load_spec(spec_path)  # its own problems name the spec file
    places = {p.id: p for p in sc.town.places}
    problems: list[Problem] = []
    for j, home in enumerate(entry.homes):
        if home not in places:
            problems.append(doc.problem(here + ("homes", j), f"unknown place {home!r}"))
    kinds = {o.workplace for o in spec.occupations if o.workplace}
    for kind, place in entry.workplaces.items():
        if kind not in kinds:
            problems.append(doc.problem(here + ("workplaces", kind),
                                        f"no occupation in {spec_path.name} works at a {kind!r}; "
                                        f"its workplace kinds are {', '.join(sorted(kinds)) or 'none'}"))
        elif place not in places:
            problems.append(doc.problem(here + ("workplaces", kind), f"unknown place {place!r}"))
    homes = list(entry.homes) or [p.id for p in sc.town.places if p.kind.strip().lower() == "home"]
    if not homes:
        problems.append(doc.problem(here, "the town has no place of kind 'home'; list the homes under 'homes'"))
    if problems:
        raise InputError(problems)
    seed = sc.seed if entry.seed is None else entry.seed
    try:
        people = sample(spec, entry.n, seed, taken)
    except TooFewNames as exc:
        raise InputError(doc.problem(here + ("n",), str(exc))) from None
    rng = np.random.default_rng([seed, 1])  # placement has its own stream: it never changes who is sampled
    order = [homes[int(i)] for i in rng.permutation(len(homes))]
    by_kind: dict[str, list[str]] = {}
    for p in sc.town.places:
        by_kind.setdefault(p.kind.strip().lower(), []).append(p.id)
    resolved = []
    for i, s in enumerate(people):
        home = order[i % len(order)]
        workplace = None
        if s.workplace_kind:
            candidates = [entry.workplaces[s.workplace_kind]] if s.workplace_kind in entry.workplaces \
                else by_kind.get(s.workplace_kind, [])
            if candidates:
                workplace = candidates[int(rng.integers(len(candidates)))]
        start = workplace if entry.start == "workplace" and workplace else home
        resolved.append(ResolvedPersona(persona=s.persona, home=home, start_place=start, workplace=workplace,
                                        source=f"{spec_path} (sampled {i + 1} of {entry.n}, seed {seed})"))
    return resolved


# --------------------------------------------------------------------------- LLM backstories and plots


def add_backstories(people: list[Sampled], backend: Any, seed: int, temperature: float = 0.7,
                    on_progress: Any = None, on_call: Any = None) -> int:
    """Ask the LLM for a short backstory per person, all in one batch; returns how many failed.

    The prompt shows the sampled fields inside the delimited persona block, so the story is
    built on them; an answer that does not name the person is retried once, then left empty."""
    import asyncio

    from pydantic import BaseModel, ConfigDict

    from simulation import batching
    from simulation.evaluation import prompts
    from simulation.llm.client import LLMClient

    class Backstory(BaseModel):
        model_config = ConfigDict(extra="ignore")

        backstory: Annotated[str, Field(min_length=40, max_length=500)]

    client = LLMClient(backend, run_seed=seed, temperature=temperature, max_tokens=560,
                       on_progress=on_progress, on_call=on_call)

    async def one(s: Sampled) -> bool:
        first = s.persona.name.split()[0]
        msgs = [{"role": "system", "content": prompts.render("judge_system.j2")},
                {"role": "user", "content": prompts.render("backstory.j2", **prompts.persona_context(s.persona))}]
        answer = await client.ask(
            msgs, Backstory, default=Backstory(backstory="-" * 40), purpose="backstory", agent_id=s.persona.id,
            tick=None, max_tokens=560, check=lambda a: None if first in a.backstory else f"name {first} in it")
        if answer.ok:
            s.persona.backstory = answer.value.backstory.strip()
        return answer.ok

    async def all_() -> list[bool]:
        return list(await asyncio.gather(*(one(s) for s in people)))

    return sum(not ok for ok in batching.run(all_(), name="backstories"))


def marginals_figure(spec: PopulationSpec, people: list[Sampled]) -> Any:
    """Observed vs expected shares (age bins, occupations, households) and Big Five histograms."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    expected, observed = expected_marginals(spec), observed_marginals(spec, people)
    n = max(1, len(people))
    fig = make_subplots(rows=3, cols=5, specs=[[{"colspan": 5}, None, None, None, None],
                                                [{"colspan": 5}, None, None, None, None],
                                                [{}, {}, {}, {}, {}]],
                        subplot_titles=["age and household", "occupation", *FACTORS], vertical_spacing=0.12)
    for row, keys in ((1, ("age", "household")), (2, ("occupation",))):
        cats = [f"{k}: {c}" for k in keys for c in expected[k]]
        exp = [expected[k][c] for k in keys for c in expected[k]]
        obs = [observed[k].get(c, 0) / n for k in keys for c in expected[k]]
        fig.add_trace(go.Bar(x=cats, y=exp, name="expected", marker_color="#bbb", showlegend=row == 1), row=row, col=1)
        fig.add_trace(go.Bar(x=cats, y=obs, name="sampled", marker_color="#3366cc", showlegend=row == 1),
                      row=row, col=1)
    for col, f in enumerate(FACTORS, start=1):
        dist = getattr(spec.big_five, f)
        edges = [i / 10 for i in range(11)]
        exp = [truncated_cdf(b, dist) - truncated_cdf(a, dist) for a, b in zip(edges, edges[1:])]
        vals = [getattr(s.persona.big_five, f) for s in people]
        obs = [sum(a <= v < b or (b == 1.0 and v == 1.0) for v in vals) / n for a, b in zip(edges, edges[1:])]
        mids = [round(a + 0.05, 2) for a in edges[:-1]]
        fig.add_trace(go.Bar(x=mids, y=obs, marker_color="#3366cc", showlegend=False), row=3, col=col)
        fig.add_trace(go.Scatter(x=mids, y=exp, mode="lines+markers", line={"color": "#444"}, showlegend=False),
                      row=3, col=col)
    fig.update_layout(title=f"Population '{spec.name}': {len(people)} sampled people vs the spec's marginals",
                      barmode="group", template="plotly_white", height=1100)
    return fig
