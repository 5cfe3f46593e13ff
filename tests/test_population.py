"""Population specs and the sampler: determinism, marginals, validity, scenarios with populations.

The marginal checks draw 2,000 people and compare counts with the spec's exact expected
probabilities (chi-square for age bins, occupations and households; Big Five in 0.1-wide
bins whose edges sit between the 2-decimal values the sampler writes, so rounding cannot
bias them). A correct sampler fails each check with probability 0.001.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import agora
from scipy import stats

from simulation import population as pop
from simulation.errors import InputError
from simulation.scenario import load, load_persona

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "populations"
UNIFORM = DATA / "uniform.yaml"
VILLE = ROOT / "personas" / "populations" / "ville.yaml"
ALPHA = 0.001


@pytest.fixture(scope="module")
def uniform() -> pop.PopulationSpec:
    return pop.load_spec(UNIFORM)


@pytest.fixture(scope="module")
def big_sample(uniform: pop.PopulationSpec) -> list[pop.Sampled]:
    return pop.sample(uniform, 2000, seed=11)


def _pooled(observed: dict[str, int], expected: dict[str, float], n: int) -> tuple[dict[str, int], dict[str, float]]:
    """Categories expected fewer than 5 times pooled into one (the chi-square approximation needs it)."""
    keep = {k: v for k, v in expected.items() if v * n >= 5}
    obs = {k: observed.get(k, 0) for k in keep}
    if len(keep) < len(expected):
        keep["_rest"] = 1 - sum(keep.values())
        obs["_rest"] = n - sum(obs.values())
    return obs, keep


def _chi2(observed: dict[str, int], expected: dict[str, float], n: int) -> float:
    keys = sorted(expected)
    obs = np.array([observed.get(k, 0) for k in keys], dtype=float)
    exp = np.array([expected[k] * n for k in keys])
    assert obs.sum() == n, f"observed categories outside the spec: {set(observed) - set(expected)}"
    return float(stats.chisquare(obs, exp).pvalue)


# --------------------------------------------------------------------------- determinism and validity


def test_same_seed_same_people(uniform: pop.PopulationSpec) -> None:
    a = [s.persona for s in pop.sample(uniform, 30, seed=4)]
    b = [s.persona for s in pop.sample(uniform, 30, seed=4)]
    assert a == b


def test_other_seed_other_people(uniform: pop.PopulationSpec) -> None:
    a = [s.persona.id for s in pop.sample(uniform, 30, seed=4)]
    b = [s.persona.id for s in pop.sample(uniform, 30, seed=5)]
    assert a != b


def test_names_never_repeat_and_ids_are_valid(big_sample: list[pop.Sampled]) -> None:
    names = [s.persona.name for s in big_sample]
    ids = [s.persona.id for s in big_sample]
    assert len(set(names)) == len(names) == 2000
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,63}", i) for i in ids)


def test_excluded_ids_are_never_sampled(uniform: pop.PopulationSpec) -> None:
    first = pop.sample(uniform, 40, seed=2)
    taken = {s.persona.id for s in first[:10]}
    again = pop.sample(uniform, 40, seed=2, exclude=taken)
    assert not taken & {s.persona.id for s in again}


def test_too_few_names_is_a_clear_error() -> None:
    spec = pop.load_spec(DATA / "small_names.yaml")
    assert len(pop.sample(spec, 4, seed=0)) == 4
    with pytest.raises(pop.TooFewNames, match="only 4 unused names"):
        pop.sample(spec, 5, seed=0)


def test_every_sampled_persona_file_validates(tmp_path: Path) -> None:
    spec = pop.load_spec(VILLE)
    for s in pop.sample(spec, 60, seed=8):
        path = tmp_path / f"{s.persona.id}.yaml"
        path.write_text(pop.persona_yaml(s.persona, "a header"), "utf-8")
        loaded = load_persona(path)
        assert loaded == s.persona
        assert loaded.social_identity and loaded.personal_identity and loaded.life_context
        assert loaded.routine.wake < loaded.routine.sleep
        assert "'" in path.read_text().split("wake:")[1].splitlines()[0], "times must be written quoted"


def test_age_limits_of_occupations_and_households_hold() -> None:
    spec = pop.load_spec(VILLE)
    occ = {o.title: o.ages for o in spec.occupations}
    hh = {h.text: h.ages for h in spec.households}
    for s in pop.sample(spec, 500, seed=3):
        p = s.persona
        for limits in (occ[p.occupation], hh[p.household]):
            assert limits is None or limits[0] <= p.age <= limits[1]


def test_sampled_relationships_point_inside_the_population(uniform: pop.PopulationSpec) -> None:
    people = pop.sample(uniform, 20, seed=1)
    ids = {s.persona.id for s in people}
    for s in people:
        assert s.persona.relationships, "acquaintances: 1 gives everyone someone"
        assert set(s.persona.relationships) <= ids - {s.persona.id}


# --------------------------------------------------------------------------- marginals


@pytest.mark.parametrize("field", ["age", "occupation", "household"])
def test_categorical_marginals_match_the_spec(uniform: pop.PopulationSpec, big_sample: list[pop.Sampled],
                                              field: str) -> None:
    expected = pop.expected_marginals(uniform)[field]
    observed = pop.observed_marginals(uniform, big_sample)[field]
    assert _chi2(observed, expected, len(big_sample)) > ALPHA


def test_expected_marginals_account_for_age_limits() -> None:
    spec = pop.load_spec(VILLE)
    expected = pop.expected_marginals(spec)
    for field in ("age", "occupation", "household"):
        assert sum(expected[field].values()) == pytest.approx(1.0)
    people = pop.sample(spec, 2000, seed=21)
    for field in ("occupation", "household"):
        observed = pop.observed_marginals(spec, people)[field]
        assert _chi2(*_pooled(observed, expected[field], 2000), 2000) > ALPHA


@pytest.mark.parametrize("factor", pop.FACTORS)
def test_big_five_follow_the_truncated_normal(uniform: pop.PopulationSpec, big_sample: list[pop.Sampled],
                                              factor: str) -> None:
    dist = getattr(uniform.big_five, factor)
    values = np.array([getattr(s.persona.big_five, factor) for s in big_sample])
    assert values.min() >= 0 and values.max() <= 1
    edges = [0.0] + [k / 10 - 0.005 for k in range(1, 10)] + [1.0]
    expected = {f"{a:.3f}": pop.truncated_cdf(b, dist) - pop.truncated_cdf(a, dist) for a, b in zip(edges, edges[1:])}
    counts = np.histogram(values, bins=edges)[0]
    observed = {f"{a:.3f}": int(c) for a, c in zip(edges, counts)}
    assert _chi2(*_pooled(observed, expected, len(values)), len(values)) > ALPHA
    # and the truncation is the spec's: scipy's truncnorm agrees with our CDF
    a, b = (0 - dist.mean) / dist.sd, (1 - dist.mean) / dist.sd
    assert pop.truncated_cdf(0.42, dist) == pytest.approx(stats.truncnorm.cdf(0.42, a, b, dist.mean, dist.sd))


# --------------------------------------------------------------------------- specs with problems


def test_bad_spec_problems_are_located() -> None:
    with pytest.raises(InputError) as info:
        pop.load_spec(DATA / "bad_spec.yaml")
    text = str(info.value)
    assert re.search(r"bad_spec\.yaml:4:\d+: ages\[0\]\.range: write the range low to high", text)
    assert re.search(r"bad_spec\.yaml:7:\d+: occupations\[0\]\.colour: unknown key 'colour'", text)


def test_uncovered_age_is_located() -> None:
    pattern = r"uncovered_age\.yaml:4:\d+: ages\[0\]\.range: no entry of occupations allows age 66"
    with pytest.raises(InputError, match=pattern):
        pop.load_spec(DATA / "uncovered_age.yaml")


# --------------------------------------------------------------------------- scenarios with a population


def test_scenario_adds_the_sampled_population() -> None:
    loaded = load(DATA / "scenario_population.yaml")
    named, sampled = loaded.people[:2], loaded.people[2:]
    assert [p.persona.id for p in named] == ["ada_ash", "isabella_rodriguez"]
    assert len(sampled) == 12
    assert "ada_ash" not in {p.persona.id for p in sampled}
    assert {p.home for p in sampled} == {"home_b", "home_c"}
    for p in sampled:
        occ = p.persona.occupation
        expected = {"baker": "cafe", "gardener": "park"}.get(occ)
        assert p.workplace == expected, (occ, p.workplace)
        assert p.start_place == (p.workplace or p.home)  # start: workplace
        assert "sampled" in p.source
    again = load(DATA / "scenario_population.yaml")
    assert [p.model_dump() for p in again.people] == [p.model_dump() for p in loaded.people]


def test_scenario_population_defaults_use_home_places_and_scenario_seed() -> None:
    loaded = load(DATA / "scenario_population_defaults.yaml")
    sampled = loaded.people[2:]
    assert len(sampled) == 6
    assert {p.home for p in sampled} <= {"home_a", "home_b", "home_c"}  # every place of kind home (any case)
    direct = pop.sample(pop.load_spec(VILLE), 6, seed=5, exclude={"ada_ash", "isabella_rodriguez"})
    assert [p.persona for p in sampled] == [s.persona for s in direct]


@pytest.mark.parametrize(("name", "pattern"), [
    ("scenario_population_bad_home.yaml",
     r"scenario_population_bad_home\.yaml:34:\d+: population\.homes\[1\]: unknown place 'castle'"),
    ("scenario_population_missing_spec.yaml",
     r"scenario_population_missing_spec\.yaml:32:\d+: population\.spec: population spec not found"),
    ("scenario_population_too_many.yaml",
     r"scenario_population_too_many\.yaml:33:\d+: population\.n: the name lists give only 4"),
    ("scenario_population_bad_workplace.yaml", r"population\.workplaces\.cafe: unknown place 'moon'"),
    ("scenario_population_bad_workplace.yaml",
     r"population\.workplaces\.school: no occupation in uniform\.yaml works at a 'school'"),
    ("scenario_population_bad_spec.yaml", r"bad_spec\.yaml:4:\d+: ages\[0\]\.range"),
    ("scenario_population_bad_n.yaml",
     r"scenario_population_bad_n\.yaml:33:\d+: population\.n: Input should be greater"),
])
def test_population_errors_are_located(name: str, pattern: str) -> None:
    with pytest.raises(InputError) as info:
        load(DATA / name)
    assert re.search(pattern, str(info.value)), str(info.value)


def test_a_sampled_town_runs(make_run, scripted) -> None:
    loaded = load(DATA / "scenario_population.yaml")
    run = make_run(scripted, ticks=3, loaded=loaded)
    for _ in range(run.ticks):
        run.model.step()
    agents = run.store.db.execute("select count(*) from agents").fetchone()[0]
    assert agents == 14
    personas = [json.loads(r[0]) for r in run.store.db.execute("select persona from agents")]
    assert all("social_identity" in p for p in personas)


# --------------------------------------------------------------------------- the command


def test_sample_command_writes_valid_files(tmp_path: Path) -> None:
    out = tmp_path / "town"
    result = agora("personas", "sample", "--spec", str(VILLE), "--n", "7", "--seed", "2", "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith(str(out))
    files = sorted(out.glob("*.yaml"))
    assert len(files) == 7
    for f in files:
        assert load_persona(f).id == f.stem
    manifest = json.loads((out / "population.json").read_text())
    assert manifest["n"] == 7 and manifest["seed"] == 2 and len(manifest["people"]) == 7
    assert (out / "marginals.html").stat().st_size > 1000
    expected = [s.persona.id for s in pop.sample(pop.load_spec(VILLE), 7, seed=2)]
    assert sorted(expected) == [f.stem for f in files]


def test_sample_command_refuses_to_overwrite(tmp_path: Path) -> None:
    args = ["personas", "sample", "--spec", str(VILLE), "--n", "3", "--out", str(tmp_path), "--quiet"]
    assert agora(*args).exit_code == 0
    again = agora(*args)
    assert again.exit_code == 2
    assert "already exists" in again.output


@pytest.mark.parametrize(("args", "fragment"), [
    (["--spec", "tests/data/populations/bad_spec.yaml", "--n", "3"], "bad_spec.yaml:4:"),
    (["--spec", "tests/data/populations/nowhere.yaml", "--n", "3"], "population spec not found"),
    (["--spec", "tests/data/populations/small_names.yaml", "--n", "5"], "--n: the name lists give only 4"),
])
def test_sample_command_bad_input_exits_2(tmp_path: Path, args: list[str], fragment: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = agora("personas", "sample", *args, "--out", str(tmp_path / "o"))
    assert result.exit_code == 2, result.output
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_sample_command_backstories_from_the_llm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from eval_support import EvalDouble

    double = EvalDouble()
    out = tmp_path / "b"
    result = agora("personas", "sample", "--spec", str(VILLE), "--n", "4", "--seed", "1", "--out", str(out),
                   "--backstories", "--quiet", monkeypatch=monkeypatch, backend=double)
    assert result.exit_code == 0, result.output
    for f in out.glob("*.yaml"):
        p = load_persona(f)
        assert p.backstory.startswith(p.name.split()[0]), p.backstory
    assert len(double.batches) == 1 and len(double.batches[0]) == 4  # one batch for everyone
    calls = [json.loads(line) for line in (out / "backstory_calls.jsonl").read_text().splitlines()]
    assert len(calls) == 4 and all(c["parse_ok"] and c["request"]["purpose"] == "backstory" for c in calls)
    assert double.closed


def test_a_sampled_population_can_be_the_background_crowd() -> None:
    text = (DATA / "scenario_population.yaml").read_text()
    assert "\npopulation:\n" in text
    variant = DATA / ".crowd-variant.yaml"  # beside the original: its spec path is relative
    variant.write_text(text.replace("\npopulation:\n", "\npopulation:\n  crowd: true\n"))
    try:
        loaded = load(variant)
    finally:
        variant.unlink()
    sampled = {rp.persona.id for rp in loaded.people if "sampled" in rp.source}
    assert len(sampled) == 12
    assert {rp.persona.id for rp in loaded.people if rp.crowd} == sampled
