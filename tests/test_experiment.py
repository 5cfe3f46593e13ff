"""Experiments: conditions over the same seeds, compared seed by seed with the control.

The statistics are checked against a hand computation; the spec's and the overrides' bad input
against located messages; and a whole experiment runs through the command line on the no-LLM
control backend (report, JSON, plot), and runs again without redoing a finished run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import SMALL
from typer.testing import CliRunner

from simulation.errors import InputError
from simulation.experiment import effect, load_spec
from simulation.experiment.overrides import condition_scenario, set_path


def test_effects_match_a_hand_computation():
    # differences 1, 2, 2: mean 5/3, sd sqrt(1/3), t(0.975, 2) = 4.303
    e = effect("talk.conversations", [1, 2, 3], [2, 4, 5])
    assert e.difference.mean == pytest.approx(5 / 3)
    half = 4.303 * math.sqrt(1 / 3) / math.sqrt(3)
    assert (e.difference.low, e.difference.high) == (pytest.approx(5 / 3 - half, abs=1e-3),
                                                     pytest.approx(5 / 3 + half, abs=1e-3))
    assert e.d == pytest.approx((5 / 3) / math.sqrt(1 / 3))
    assert e.verdict == "higher" and not e.share
    assert e.control.mean == 2 and e.condition.mean == pytest.approx(11 / 3)
    share = effect("facts.party.aware_share", [0.25, 0.5, 0.5], [0.25, 0.25, 0.375])
    assert share.share and share.difference.mean == pytest.approx(-0.125) and share.verdict == "overlap"
    missing = effect("talk.turns_mean", [4.0, None, 5.0], [5.0, 6.0, None])
    assert missing.difference.n == 1 and missing.d is None and missing.verdict == "overlap"  # one pair: never "moved"
    assert effect("x", [1, 2], [1, 2]).verdict == "same"


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: t\nscenario: {SMALL}\n" + body, encoding="utf-8")
    return path


@pytest.mark.parametrize(("body", "says"), [
    ("seeds: [1, 1]\nconditions: [{name: a}, {name: b}]\n", "seeds must differ"),
    ("seeds: [1, 2]\nconditions: [{name: a}, {name: a}]\n", "a given twice"),
    ("seeds: [1, 2]\ncontrol: c\nconditions: [{name: a}, {name: b}]\n", "control 'c' is not one of the conditions"),
    ("seeds: [1]\nconditions: [{name: a}, {name: b}]\n", "seeds"),
    ("seeds: [1, 2]\nconditions: [{name: a}]\n", "conditions"),
])
def test_a_bad_experiment_file_is_a_located_error(tmp_path, body, says):
    with pytest.raises(InputError, match=says) as err:
        load_spec(_spec(tmp_path, body))
    assert str(tmp_path / "spec.yaml") in str(err.value)


def test_a_missing_scenario_is_named(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("name: t\nscenario: nowhere.yaml\nseeds: [1, 2]\nconditions: [{name: a}, {name: b}]\n")
    with pytest.raises(InputError, match=r"spec.yaml:2:\d+: scenario: scenario file not found"):
        load_spec(path)


def test_overrides_set_fields_by_dotted_path_and_bad_ones_name_the_condition():
    data = {"events": [{"to": "ann"}], "cognition": {"talk_prior": 1}}
    set_path(data, "events.0.to", "bob")
    set_path(data, "cognition.talk_prior", 0)
    set_path(data, "memory.top_k", 4)
    assert data == {"events": [{"to": "bob"}], "cognition": {"talk_prior": 0}, "memory": {"top_k": 4}}
    with pytest.raises(ValueError, match="events is a list of 1: '3' is not an index"):
        set_path(data, "events.3.to", "x")
    loaded = condition_scenario(SMALL, "walter", {"events.0.to": "walter_hughes"}, "spec.yaml: conditions[1]")
    assert loaded.scenario.events[0].to == "walter_hughes"
    assert "condition walter" in loaded.source_text.splitlines()[0]
    with pytest.raises(InputError, match=r"spec.yaml: conditions\[1\]: the scenario with its overrides is not valid:"
                                         r".*unknown persona 'nobody'"):
        condition_scenario(SMALL, "x", {"events.0.to": "nobody"}, "spec.yaml: conditions[1]")
    with pytest.raises(InputError, match=r"overrides.events.9.to"):
        condition_scenario(SMALL, "x", {"events.9.to": "walter_hughes"}, "spec.yaml: conditions[1]")


def test_agora_experiment_reports_each_condition_against_the_control_and_reuses_its_runs(tmp_path, embedder):
    from simulation.cli import app

    spec = _spec(tmp_path, "seeds: [1, 2]\nticks: 6\ncontrol: as_is\nconditions:\n  - name: as_is\n"
                           "  - name: quiet\n    overrides: {cognition.reactions_per_hour: 0}\n")
    out = tmp_path / "out"
    runner = CliRunner()
    done = runner.invoke(app, ["experiment", str(spec), "--out", str(out), "--backend", "control"])
    assert done.exit_code == 0, done.output
    assert done.output.strip().splitlines()[-1] == str(out / "report.md")
    data = json.loads((out / "experiment.json").read_text())
    assert [c["name"] for c in data["conditions"]] == ["as_is", "quiet"]
    assert all([r["seed"] for r in c["runs"]] == [1, 2] for c in data["conditions"])
    conversations = next(e for e in data["effects"]["quiet"] if e["metric"] == "talk.conversations")
    as_is = [r["metrics"]["talk.conversations"] for r in data["conditions"][0]["runs"]]
    quiet = [r["metrics"]["talk.conversations"] for r in data["conditions"][1]["runs"]]
    assert conversations["difference"]["mean"] == pytest.approx(sum(q - a for a, q in zip(as_is, quiet)) / 2)
    assert quiet == [0, 0] and sum(as_is) > 0
    report = (out / "report.md").read_text()
    assert "## quiet against as_is" in report and "| quiet | `cognition.reactions_per_hour` = `0` | 2 | 1 |" in report
    assert (out / "effects.png").stat().st_size > 0
    runs = sorted(p.name for p in (out / "quiet" / "runs").iterdir())
    again = runner.invoke(app, ["experiment", str(spec), "--out", str(out), "--backend", "control", "--quiet"])
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in (out / "quiet" / "runs").iterdir()) == runs, "finished runs are not made again"
    bad = runner.invoke(app, ["experiment", str(_spec(tmp_path, "seeds: [1, 2]\nconditions: [{name: a}]\n"))])
    assert bad.exit_code == 2 and "conditions" in bad.output and "Traceback" not in bad.output


def test_the_committed_example_experiment_is_valid():
    from simulation.experiment.runner import scenarios

    path = SMALL.parent.parent / "experiments" / "who-hears-first.yaml"
    spec, scenario = load_spec(path)
    loaded = scenarios(spec, scenario, path)
    assert {name: s.scenario.events[0].to for name, s in loaded.items()} == {
        "isabella": "isabella_rodriguez", "walter": "walter_hughes", "samira": "samira_haddad"}
    assert loaded["walter"].scenario.events[0].text.startswith("Isabella Rodriguez is throwing")


def test_the_committed_ablations_experiment_is_valid():
    from simulation.experiment.believability import judge_of
    from simulation.experiment.runner import scenarios

    path = SMALL.parent.parent / "experiments" / "ga-ablations.yaml"
    spec, scenario = load_spec(path)
    loaded = scenarios(spec, scenario, path)
    assert loaded["no_retrieval"].scenario.memory.retrieval == "recent"
    assert loaded["no_reflection_no_planning"].scenario.cognition.planning is False
    assert "reflect" not in loaded["no_reflection"].scenario.cognition.phases
    judge = path.parent.parent / ".cache" / "measure-model" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    if judge.exists():  # make measure-model
        assert judge_of(spec.believability, path.parent)[0].model == str(judge.resolve())
    else:  # said before any run, naming the field
        with pytest.raises(InputError, match="believability.judge.model: model file not found"):
            judge_of(spec.believability, path.parent)


def test_a_condition_can_fork_another_conditions_runs_at_a_tick(tmp_path, embedder):
    """Each seed's run of the base condition is forked at tick 3: the pair shares its first three
    ticks row for row and differs only by what the intervention does from there."""
    from simulation.cli import app
    from simulation.rundb.diff import first_difference

    spec = _spec(tmp_path, "seeds: [1, 2]\nticks: 6\nconditions:\n  - name: as_is\n  - name: hushed\n"
                           "    fork: {of: as_is, at: 3, set: [cognition.reactions_per_hour=0],\n"
                           "           whisper: [walter_hughes=The mill is for sale.]}\n")
    out = tmp_path / "out"
    runner = CliRunner()
    done = runner.invoke(app, ["experiment", str(spec), "--out", str(out), "--backend", "control", "--quiet"])
    assert done.exit_code == 0, done.output
    data = json.loads((out / "experiment.json").read_text())
    parents = {r["seed"]: Path(r["run_dir"]) for r in data["conditions"][0]["runs"]}
    forks = {r["seed"]: Path(r["run_dir"]) for r in data["conditions"][1]["runs"]}
    assert sorted(forks) == [1, 2]
    for seed, fork in forks.items():
        assert first_difference(parents[seed] / "run.db", fork / "run.db", before_tick=3) is None
        assert first_difference(parents[seed] / "run.db", fork / "run.db") is not None
    assert "as_is's runs forked at tick 3: walter_hughes=The mill is for sale.; cognition.reactions_per_hour=0" \
        in (out / "report.md").read_text()
    made = sorted(p.name for p in (out / "hushed" / "runs").iterdir())
    again = runner.invoke(app, ["experiment", str(spec), "--out", str(out), "--backend", "control", "--quiet"])
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in (out / "hushed" / "runs").iterdir()) == made
    edited = _spec(tmp_path, "seeds: [1, 2]\nticks: 6\nconditions:\n  - name: as_is\n  - name: hushed\n"
                             "    fork: {of: as_is, at: 4}\n")
    refused = runner.invoke(app, ["experiment", str(edited), "--out", str(out), "--backend", "control", "--quiet"])
    assert refused.exit_code == 2 and "is a fork at tick 3" in " ".join(refused.output.split())


def test_a_fork_condition_must_fork_a_plain_one(tmp_path):
    with pytest.raises(InputError, match="forks 'b', which is not a condition that is not a fork"):
        load_spec(_spec(tmp_path, "seeds: [1, 2]\nconditions:\n  - name: a\n  - name: b\n    fork: {of: b, at: 2}\n"))
    with pytest.raises(InputError, match="both overrides and fork"):
        load_spec(_spec(tmp_path, "seeds: [1, 2]\nconditions:\n  - name: a\n  - name: b\n"
                                  "    overrides: {seed: 3}\n    fork: {of: a, at: 2}\n"))


def test_the_ablations_are_overrides_of_a_condition():
    """docs/experiments.md's three switches, as an experiment's conditions set them."""
    from conftest import SMALL

    from simulation.experiment.overrides import condition_scenario

    lean = ["perceive", "importance", "decide", "converse", "recap"]
    loaded = condition_scenario(SMALL, "no_reflection_no_planning",
                                {"cognition.phases": lean, "cognition.planning": False}, "ablations.yaml")
    assert loaded.scenario.cognition.phases == lean and loaded.scenario.cognition.planning is False
    recent = condition_scenario(SMALL, "no_retrieval", {"memory.retrieval": "recent"}, "ablations.yaml")
    assert recent.scenario.memory.retrieval == "recent" and recent.scenario.cognition.planning is True


def test_an_experiment_interviews_every_run_and_ranks_the_conditions(tmp_path, embedder):
    """``believability:``: each run's people answer GA's interview on the run's own model (the
    control here), matched across conditions by seed and person, and a judge ranks the conditions
    (the control judge always answers "1", which both orders turn into no preference)."""
    from simulation.cli import app

    spec = _spec(tmp_path, "seeds: [1, 2]\nticks: 6\nconditions:\n  - name: as_is\n"
                           "  - name: quiet\n    overrides: {cognition.reactions_per_hour: 0}\n"
                           "believability: {judge: {backend: control}, per_category: 1, bootstrap: 50}\n")
    out = tmp_path / "out"
    runner = CliRunner()
    done = runner.invoke(app, ["experiment", str(spec), "--out", str(out), "--backend", "control", "--quiet"])
    assert done.exit_code == 0, done.output
    for condition in ("as_is", "quiet"):
        for seed in (1, 2):
            interview = json.loads((out / condition / "believability" / f"seed-{seed}" / "results.json").read_text())
            assert interview["suites"] == {"believability": [t["key"] for t in interview["targets"]]}
    ranked = json.loads((out / "believability" / "ranking.json").read_text())
    assert sorted(c["label"] for c in ranked["conditions"]) == ["as_is", "quiet"]
    assert len(ranked["agents"]) == 2 * 8 and all(a.split("/")[0] in ("1", "2") for a in ranked["agents"])
    assert ranked["comparisons"] == 2 * 8 * 5, "one question per category, one pair of conditions"
    assert all(abs(c["log_strength"]) < 1e-9 for c in ranked["conditions"]), "a habit is no preference"
    report = (out / "report.md").read_text()
    assert "## Believability" in report and "believability/report.md" in report
    stamp = (out / "as_is" / "believability" / "seed-1" / "results.json").stat().st_mtime_ns
    again = runner.invoke(app, ["experiment", str(spec), "--out", str(out), "--backend", "control", "--quiet"])
    assert again.exit_code == 0, again.output
    assert (out / "as_is" / "believability" / "seed-1" / "results.json").stat().st_mtime_ns == stamp, "not asked again"


def test_a_missing_judge_model_is_bad_input_before_any_run(tmp_path):
    from simulation.cli import app

    spec = _spec(tmp_path, "seeds: [1, 2]\nticks: 6\nconditions:\n  - name: a\n  - name: b\n"
                           "    overrides: {cognition.seek: false}\n"
                           "believability: {judge: {model: no-such-judge.gguf}}\n")
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["experiment", str(spec), "--out", str(out), "--backend", "control", "--quiet"])
    assert done.exit_code == 2 and "believability.judge.model" in done.output and "Traceback" not in done.output
    assert not (out / "a" / "runs").exists(), "nothing ran"
