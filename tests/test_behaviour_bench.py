"""The behaviour benchmark: a scripted 5-seed run of the flagship gives a report with each
metric's mean and 95 % interval, per-seed values, plots; and the CLI around it."""

from __future__ import annotations

import json
import math

import pytest
from scripted import ScriptedBackend
from typer.testing import CliRunner

from simulation.benchmark.behaviour import estimate

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


@pytest.fixture(scope="module")
def report(tmp_path_factory, flagship, embedder):
    from simulation.benchmark.behaviour import run_benchmark, write_report

    out = tmp_path_factory.mktemp("bench")
    result = run_benchmark(flagship, SEEDS, out, ticks=6, backend=ScriptedBackend(), command="agora bench ...")
    return result, write_report(result, out), out


def test_a_scripted_five_seed_report(report):
    result, files, out = report
    assert [f.name for f in files] == ["behaviour.json", "report.md", "awareness.png", "metrics.png"]
    assert all(f.stat().st_size > 0 for f in files)
    assert [r.seed for r in result.runs] == SEEDS and len({r.run_dir for r in result.runs}) == 5
    table = result.table()
    for name in ("talk.encounters_per_agent_hour", "plans.fitting_share", "llm.calls_per_agent_hour",
                 "facts.party.aware_share", "probes.party.hallucination", "relationships.density_end"):
        e = table[name]
        assert e.n == 5 and e.low <= e.mean <= e.high, name
    data = json.loads((out / "behaviour.json").read_text())
    assert [r["seed"] for r in data["runs"]] == SEEDS
    assert data["summary"]["facts.party.aware_share"]["n"] == 5
    assert len(data["runs"][0]["awareness"]["party"]) == 6  # one point per tick
    text = (out / "report.md").read_text()
    assert "| `talk.encounters_per_agent_hour` |" in text and "95 % interval" in text
    assert "## Probe answers by verdict" in text and "agora bench ..." in text


def test_seeds_differ_and_each_run_keeps_its_behaviour_table(report):
    import sqlite3

    result, _, _ = report
    calls = {r.metrics["llm.calls_per_agent_hour"] for r in result.runs}
    assert len(calls) > 1  # the seeds give different runs
    for r in result.runs:
        con = sqlite3.connect(r.run_dir / "run.db")
        stored = dict(con.execute("select metric, value from behaviour").fetchall())
        con.close()
        assert stored == {k: v for k, v in r.metrics.items() if v is not None}


def test_agora_behaviour_recomputes_a_run(report):
    from simulation.cli import app

    result, _, _ = report
    out = CliRunner().invoke(app, ["behaviour", str(result.runs[0].run_dir)], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "talk.encounters_per_agent_hour" in out.output and "facts.party.aware_share" in out.output


def test_a_benchmark_run_again_reuses_finished_runs_and_resumes_interrupted_ones(report, flagship):
    import sqlite3

    from simulation import Simulation
    from simulation.benchmark.behaviour import run_benchmark

    result, _, out = report
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
    from simulation.cli import app

    out = CliRunner().invoke(app, ["bench", "behaviour", "scenarios/valentines.yaml", "--seeds", seeds,
                                   "--out", str(tmp_path)])
    assert out.exit_code == 2 and "--seeds" in out.output and "Traceback" not in out.output


def _fake_report(path, values: dict[str, list[float | None]]):
    path.mkdir()
    runs = [{"seed": i + 1, "run_dir": f"runs/{i}", "wall_s": 1.0,
             "metrics": {k: v[i] for k, v in values.items() if v[i] is not None}} for i in range(5)]
    (path / "behaviour.json").write_text(json.dumps({
        "scenario": "town", "seeds": [1, 2, 3, 4, 5], "ticks": 36, "backend": "scripted", "model": "m",
        "command": "", "summary": {}, "runs": runs}))
    return path


def test_compare_reports_says_which_way_each_metric_moved(tmp_path, report):
    from simulation.benchmark.compare import compare, load_report, markdown

    before = _fake_report(tmp_path / "before", {"talk.turns_median": [2, 2, 2, 3, 2], "llm.fallback_share":
                                                [0.1, 0.2, 0.1, 0.2, 0.1], "talk.two_line_share": [0.5, 0.6, 0.4, 0.5, 0.5]})
    after = _fake_report(tmp_path / "after", {"talk.turns_median": [5, 6, 5, 5, 6], "llm.fallback_share":
                                              [0.0, 0.0, 0.0, 0.0, 0.0], "talk.two_line_share": [0.4, 0.6, 0.5, 0.5, 0.6],
                                              "talk.aim.share": [0.1, 0.2, None, 0.1, 0.1]})
    reports = [load_report(before), load_report(after)]
    rows = {r.metric: r for r in compare(reports)}
    assert rows["talk.turns_median"].moved == "higher" and rows["llm.fallback_share"].moved == "lower"
    assert rows["talk.two_line_share"].moved == "overlap"
    assert rows["talk.aim.share"].estimates[0].mean is None and rows["talk.aim.share"].moved == "–", \
        "a metric the older report lacks is missing there, not zero"
    assert rows["talk.aim.share"].estimates[1].n == 4
    text = markdown(reports, list(rows.values()))
    assert "| `talk.turns_median` | 2.2 [" in text and "| higher |" in text
    # the command, with a real report as the reference
    out = tmp_path / "compare.md"
    from simulation.cli import app

    res = CliRunner().invoke(app, ["bench", "compare", str(report[2]), str(after), "--label", "scripted",
                                   "--label", "after", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "scripted" in out.read_text() and "talk.turns_median" in res.output
    res = CliRunner().invoke(app, ["bench", "compare", str(before)])
    assert res.exit_code == 2 and "two or more" in res.output
    res = CliRunner().invoke(app, ["bench", "compare", str(before), str(tmp_path / "nope")])
    assert res.exit_code == 2 and "nope" in res.output and "Traceback" not in res.output
