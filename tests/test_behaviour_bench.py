"""The behaviour benchmark: a scripted 5-seed run of the flagship gives a report with each
metric's mean and 95 % interval, per-seed values, plots; and the CLI around it."""

from __future__ import annotations

import json
import math

import pytest
from conftest import agora

from simulation.benchmark.behaviour import estimate
from simulation.testing import ScriptedBackend

SEEDS = [1, 2, 3, 4, 5]


def test_estimate_is_the_mean_and_a_student_t_interval():
    e = estimate([1.0, 2.0, 3.0, 4.0, 5.0], "talk.turns_mean")
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)  # t(0.975, 4) * sd / sqrt(n)
    assert (e.mean, e.n) == (3.0, 5) and e.low == pytest.approx(3 - half) and e.high == pytest.approx(3 + half)
    assert estimate([None, 2.0], "x") == estimate([2.0], "x")  # a seed without a value does not count
    assert estimate([], "x").mean is None
    clipped = estimate([0.0, 1.0, 1.0], "talk.two_line_share")  # a share stays inside [0, 1]
    assert clipped.low == 0.0 and clipped.high == 1.0
    signed = estimate([-0.2, -0.1, 0.0], "reward.tie")  # a change of sentiment may be negative
    assert signed.mean == pytest.approx(-0.1) and signed.low < -0.1 < 0 < signed.high
    assert estimate([-0.2, -0.1, 0.0], "talk.turns_mean").low == 0.0  # a count's interval stops at 0
    for name in ("moods.hobbs_cafe_1000.gap", "moods.market.saw_shift", "moods.market.unseen_shift"):
        assert estimate([-0.2, -0.1, 0.0], name).low < -0.2, name  # a change of valence may be negative
    assert estimate([-0.2, -0.1, 0.0], "moods.market.saw").low == 0.0  # how many noticed it is a count


@pytest.fixture(scope="module")
def report(tmp_path_factory, flagship, embedder):
    from simulation.benchmark.behaviour import run_benchmark
    from simulation.benchmark.report import write_report
    from simulation.llm.control import ControlBackend

    out = tmp_path_factory.mktemp("bench")
    result = run_benchmark(flagship, SEEDS, out, ticks=6, backend=ScriptedBackend(), command="agora bench ...")
    control = run_benchmark(flagship, SEEDS, out / "control", ticks=6, backend=ControlBackend())
    return result, write_report(result, out, control), out, control


def test_a_scripted_five_seed_report(report):
    result, files, out, _ = report
    assert [f.name for f in files] == ["behaviour.json", "report.md", "probes.csv", "fact_memories.csv",
                                       "tellings.csv", "awareness.png", "metrics.png"]
    assert all(f.stat().st_size > 0 for f in files)
    assert [r.seed for r in result.runs] == SEEDS and len({r.run_dir for r in result.runs}) == 5
    table = result.table()
    for name in ("talk.encounters_per_agent_hour", "llm.calls_per_agent_hour", "facts.party.told",
                 "facts.party.aware_share", "probes.party.hallucination", "relationships.density_end"):
        e = table[name]
        assert e.n == 5 and e.low <= e.mean <= e.high, name
    assert "plans.fitting_share" not in table and "plans.valid_place_share" not in table, \
        "metrics that hold by construction are not reported"
    data = json.loads((out / "behaviour.json").read_text())
    assert [r["seed"] for r in data["runs"]][:5] == SEEDS  # (and seed 6, which the resume test added)
    assert data["summary"]["facts.party.aware_share"]["n"] == 5
    assert data["summary"]["talk.conversations"]["distinct"] == result.distinct("talk.conversations") >= 1
    assert data["trajectories"] == result.trajectories == len({r.trajectory for r in result.runs})
    assert {"told", "told_own_words", "told_example", "from_unaware", "aware"} <= {
        k.split(".")[2] for k in data["summary"] if k.startswith("facts.party.")}
    assert len(data["runs"][0]["awareness"]["party"]) == 6  # one point per tick
    text = (out / "report.md").read_text()
    assert "| `talk.encounters_per_agent_hour` |" in text and "95 % interval" in text
    assert "## Probe answers by verdict" in text and "agora bench ..." in text
    assert "distinct trajectories" in text and "## Headline" in text and "probes.csv" in text


def test_the_control_runs_beside_and_the_margin_is_paired_by_seed(report):
    from simulation.rundb.intervals import paired

    result, _, out, control = report
    assert control.backend == "control" and [r.seed for r in control.runs] == SEEDS
    assert control.trajectories == 1, "the control uses no seed: every seed is the same run"
    assert control.runs[0].metrics["talk.example_share"] == 1.0, "the control's lines are its examples"
    data = json.loads((out / "behaviour.json").read_text())
    assert data["control"]["summary"]["talk.conversations"]["mean"] == control.table()["talk.conversations"].mean
    name = "talk.conversations"
    expected = paired([r.metrics.get(name) for r in control.runs], [r.metrics.get(name) for r in result.runs])
    assert data["margin"][name]["mean"] == pytest.approx(expected.mean)
    assert "LLM − control" in (out / "report.md").read_text()


def test_the_audit_csvs_hold_the_rows_behind_the_shares(report):
    import csv

    result, _, out, _ = report
    probes = list(csv.DictReader((out / "probes.csv").open()))
    verdicts = sum(sum(v.values()) for r in result.runs for v in r.verdicts.values())
    assert len(probes) >= verdicts > 0 and {"verdict", "answer", "aware", "ok"} <= set(probes[0])
    memories = list(csv.DictReader((out / "fact_memories.csv").open()))
    assert memories and {"source", "from_agent", "text", "tick", "aware_source", "example_line"} <= set(memories[0])
    tellings = list(csv.DictReader((out / "tellings.csv").open()))
    told = sum(r.metrics.get("facts.party.told") or 0 for r in result.runs)
    assert len([t for t in tellings if t["fact_id"] == "party"]) == told


def test_a_move_never_made_is_zero_not_missing(report):
    from simulation.core import Aim
    from simulation.rundb.behaviour import AIMS

    assert set(AIMS) == {a.value for a in Aim}
    result, *_ = report
    for r in result.runs:
        if r.metrics.get("talk.conversations"):
            assert all(r.metrics[f"talk.aim.{aim}"] is not None for aim in AIMS)
            assert sum(r.metrics[f"talk.aim.{aim}"] for aim in AIMS) == pytest.approx(1.0)


def test_a_benchmark_refuses_runs_of_another_engine_or_scenario(report, flagship, tmp_path):
    import shutil
    import sqlite3

    from simulation.benchmark.behaviour import run_benchmark
    from simulation.errors import InputError

    result, _, out, _ = report
    copy = tmp_path / "bench"
    shutil.copytree(out / "runs", copy / "runs")
    db = next((copy / "runs").glob("*/run.db"))
    con = sqlite3.connect(db)
    seed = con.execute("select seed from runs").fetchone()[0]
    con.execute("update runs set engine = 'someother00000000'")
    con.commit()
    with pytest.raises(InputError, match="not this engine"):
        run_benchmark(flagship, [seed], copy, ticks=6, backend=ScriptedBackend())
    con.execute("update runs set engine = ?, scenario_sha256 = 'x'", (result.engine,))
    con.commit()
    con.close()
    with pytest.raises(InputError, match="other scenario content"):
        run_benchmark(flagship, [seed], copy, ticks=6, backend=ScriptedBackend())


def test_seeds_differ_and_each_run_keeps_its_behaviour_table(report):
    import sqlite3

    result, *_ = report
    behaviours = {tuple(sorted((k, v) for k, v in r.metrics.items() if v is not None)) for r in result.runs}
    assert len(behaviours) > 1  # the seeds give different runs
    for r in result.runs:
        con = sqlite3.connect(r.run_dir / "run.db")
        stored = dict(con.execute("select metric, value from behaviour").fetchall())
        con.close()
        assert stored == {k: v for k, v in r.metrics.items() if v is not None}


def test_agora_behaviour_recomputes_a_run(report):
    result, *_ = report
    out = agora("behaviour", str(result.runs[0].run_dir))
    assert out.exit_code == 0, out.output
    assert "talk.encounters_per_agent_hour" in out.output and "facts.party.aware_share" in out.output


def test_a_benchmark_run_again_reuses_finished_runs_and_resumes_interrupted_ones(report, flagship):
    import sqlite3

    from simulation import Simulation
    from simulation.benchmark.behaviour import run_benchmark

    result, _, out, _ = report
    first = result.runs[0]
    con = sqlite3.connect(first.run_dir / "run.db")  # a verdict scored by older rules
    probe_id, verdict = con.execute("select id, verdict from probes where fact_id = 'party' limit 1").fetchone()
    con.execute("update probes set verdict = 'stale' where id = ?", (probe_id,))
    con.commit()
    con.close()
    with Simulation.from_scenario(flagship, seed=6, out=out / "runs", ticks=6, backend=ScriptedBackend()) as sim:
        sim.run(ticks=2)  # stopped after 2 of 6 ticks: interrupted
    stopped = sim.run_dir

    again = run_benchmark(flagship, [1, 6], out, ticks=6, backend=ScriptedBackend())
    assert again.runs[0].run_dir == first.run_dir and again.runs[0].metrics == first.metrics
    assert again.runs[1].run_dir == stopped and again.runs[1].metrics["probes.party.answers"] == 8
    con = sqlite3.connect(first.run_dir / "run.db")
    assert con.execute("select verdict from probes where id = ?", (probe_id,)).fetchone()[0] == verdict
    assert con.execute("select ticks_done, status from runs").fetchone() == (6, "finished")
    con.close()
    assert len(list((out / "runs").glob("*/run.db"))) == 6  # nothing ran twice


@pytest.mark.parametrize("seeds", ["1,x", "1,1", "-3"])
def test_bad_seeds_are_bad_input(seeds, tmp_path):
    out = agora("bench", "behaviour", "scenarios/valentines.yaml", "--seeds", seeds, "--out", str(tmp_path))
    assert out.exit_code == 2 and "--seeds" in out.output and "Traceback" not in out.output


def _fake_report(path, values: dict[str, list[float | None]], seeds=(1, 2, 3, 4, 5), cpu: str | None = None):
    path.mkdir()
    runs = [{"seed": seed, "run_dir": f"runs/{i}", "wall_s": 1.0,
             "metrics": {k: v[i] for k, v in values.items() if v[i] is not None}} for i, seed in enumerate(seeds)]
    (path / "behaviour.json").write_text(json.dumps({
        "scenario": "town", "seeds": list(seeds), "ticks": 36, "backend": "scripted", "model": "m",
        "command": "", "summary": {}, "runs": runs, **({"cpu": cpu} if cpu is not None else {})}))
    return path


def test_a_report_records_its_cpu_and_compare_says_when_two_differ(tmp_path, report):
    """llama.cpp is compiled for its host: the same seed is another town on another kind of CPU, so a
    comparison across kinds (or with a kind not recorded) says its seeds are not paired replicates."""
    from simulation.benchmark.compare import compare, load_report, markdown
    from simulation.benchmark.host import cpu

    assert json.loads((report[2] / "behaviour.json").read_text())["cpu"] == cpu()
    assert f"CPU `{cpu()}`" in (report[2] / "report.md").read_text()
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu sse2 avx avx2 fma f16c avx512f avx512_vnni\n")
    assert cpu(info) == "avx2 fma f16c avx512f avx512_vnni" and cpu(tmp_path / "nope") == "unknown"
    values = {"talk.conversations": [4, 4, 4, 4, 4]}
    avx2 = _fake_report(tmp_path / "avx2", values, cpu="avx2 fma f16c")
    avx512 = _fake_report(tmp_path / "avx512", values, cpu="avx2 fma f16c avx512f")
    twin = _fake_report(tmp_path / "twin", values, cpu="avx2 fma f16c")
    old = _fake_report(tmp_path / "old", values)

    def note(*paths):
        reports = [load_report(p) for p in paths]
        return markdown(reports, compare(reports))

    assert "kinds of CPU" not in note(avx2, twin) and "paired replicate" not in note(avx2, twin)
    assert "different or unrecorded kinds of CPU (avx2: avx2 fma f16c; avx512: avx2 fma f16c avx512f)" \
        in note(avx2, avx512)
    assert "old: not recorded" in note(avx2, old)
    assert "none of the reports records" in note(old, _fake_report(tmp_path / "older", values))


def test_compare_pairs_the_seeds_and_says_which_way_each_metric_moved(tmp_path, report):
    from simulation.benchmark.compare import compare, load_report, markdown

    before = _fake_report(tmp_path / "before", {
        "talk.turns_median": [2, 2, 2, 3, 2], "llm.fallback_share": [0.1, 0.2, 0.1, 0.2, 0.1],
        "talk.two_line_share": [0.5, 0.6, 0.4, 0.5, 0.5], "probes.party.wrong_share": [0.2, 0.6, 0.3, 0.5, 0.4],
        "talk.conversations": [4, 4, 4, 4, 4]})
    after = _fake_report(tmp_path / "after", {
        "talk.turns_median": [5, 6, 5, 5, 6], "llm.fallback_share": [0.0, 0.0, 0.0, 0.0, 0.0],
        "talk.two_line_share": [0.4, 0.6, 0.5, 0.5, 0.6], "talk.aim.share": [0.1, 0.2, None, 0.1, 0.1],
        # every seed a little worse: the two unpaired intervals overlap, the paired difference does not
        "probes.party.wrong_share": [0.3, 0.7, 0.4, 0.6, 0.5], "talk.conversations": [4, 4, 4, 4, 4]})
    reports = [load_report(before), load_report(after)]
    rows = {r.metric: r for r in compare(reports)}
    assert rows["talk.turns_median"].moved == "higher" and rows["llm.fallback_share"].moved == "lower"
    assert rows["talk.two_line_share"].moved == "overlap" and rows["talk.conversations"].moved == "same"
    wrong = rows["probes.party.wrong_share"]
    assert wrong.estimates[0].high > wrong.estimates[1].low, "unpaired, the intervals overlap"
    assert wrong.moved == "higher" and wrong.differences[0].mean == pytest.approx(0.1)
    assert rows["talk.aim.share"].estimates[0].mean is None and rows["talk.aim.share"].moved == "–", \
        "a metric the older report lacks is missing there, not zero"
    assert rows["talk.aim.share"].estimates[1].n == 4
    text = markdown(reports, list(rows.values()))
    assert "| `talk.turns_median` | 2.2 [" in text and "| higher |" in text and "Δ after − before" in text
    # the command, with a real report as the reference
    out = tmp_path / "compare.md"
    res = agora("bench", "compare", str(report[2]), str(after), "--label", "scripted", "--label", "after",
                "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "scripted" in out.read_text() and "talk.turns_median" in out.read_text() and "paired" in res.output
    res = agora("bench", "compare", str(before))
    assert res.exit_code == 2 and "two or more" in res.output
    res = agora("bench", "compare", str(before), str(tmp_path / "nope"))
    assert res.exit_code == 2 and "nope" in res.output and "Traceback" not in res.output
    other = _fake_report(tmp_path / "other", {"talk.turns_median": [2, 2, 2, 3, 2]}, seeds=(1, 2, 3, 4, 6))
    res = agora("bench", "compare", str(before), str(other))
    assert res.exit_code == 2 and "same seeds" in res.output and "Traceback" not in res.output
    # --seeds pairs them on the seeds both ran, and shows only those
    out = tmp_path / "common.md"
    res = agora("bench", "compare", str(before), str(other), "--seeds", "1,3", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "| 1, 3 |" in out.read_text() and "| 1, 2, 3" not in out.read_text()
    res = agora("bench", "compare", str(before), str(other), "--seeds", "1,5")
    assert res.exit_code == 2 and "did not run seed 5" in res.output and "other" in res.output


def test_rescore_judges_an_earlier_benchmark_by_todays_rules_and_says_so(report, tmp_path):
    import shutil
    import sqlite3

    result, _, out, _ = report
    copy = tmp_path / "older"
    shutil.copytree(out / "runs", copy / "runs")
    for db in (copy / "runs").glob("*/run.db"):  # as if an older engine had made them
        con = sqlite3.connect(db)
        con.execute("update runs set engine = null")
        con.execute("update probes set verdict = 'stale'")
        con.commit()
        con.close()
    res = agora("bench", "rescore", str(copy), "--out", str(tmp_path / "rescored"))
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "rescored" / "behaviour.json").read_text())
    assert data["engine"] == "unrecorded" and data["scored_by"] == result.engine
    assert [r["seed"] for r in data["runs"]][:5] == SEEDS  # (and seed 6, which the resume test added)
    assert data["runs"][0]["metrics"] == result.runs[0].metrics, "same rules, same numbers"
    assert "stale" not in json.dumps(data["runs"][0]["verdicts"])
    assert "**Rescored**" in (tmp_path / "rescored" / "report.md").read_text()
    res = agora("bench", "rescore", str(tmp_path / "nothing"), "--out", str(tmp_path / "x"))
    assert res.exit_code == 2 and "holds no runs" in res.output
