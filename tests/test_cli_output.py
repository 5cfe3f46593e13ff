"""What the CLI prints: text from users and the model is shown literally, never as markup."""

from __future__ import annotations

import io

from rich.console import Console

from simulation.cli import common
from simulation.cli.run import print_summary
from simulation.rundb.summary import AgentSummary, FactSpread, RunSummary


def test_summary_prints_model_text_with_brackets_literally(monkeypatch):
    odd = "Yes [/INST] at the [bold]cafe[/bold] [/]"
    summary = RunSummary(
        run_id="r[1]", scenario="s[/]", status="finished", ticks_done=1, ticks_planned=1, start="a", end="b",
        game_hours=1, agents=[AgentSummary("x", "Ann [/]", "job", "Cafe [x]", odd, 1, 1, 0, 0, 1, 10)],
        conversations=0, utterances=0, llm_calls=1, parse_failures=0, fallbacks=0, cache_hits=0, generated_tokens=5,
        prompt_tokens=5,
        completion_tokens=5, llm_seconds=1.0, tick_llm_seconds=1.0, wall_seconds=2.0,
        facts={"party": FactSpread([("Ann [/]", "2023-02-13 07:00", "heard", "Bob [b]", 1)], 1, 1, 0.0, 1.0, 0,
                                   {"right": 1})},
        probes=[("Ann [/]", "Q [/]?", odd)],
    )
    buf = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=buf, width=200, color_system=None))
    print_summary(summary, 3.0)
    out = buf.getvalue()
    assert "[/INST]" in out and "[bold]cafe[/bold]" in out and "Ann [/]" in out
    assert "No conversations happened" in out
    assert "Ann [/] 02-13 07:00 heard from Bob [b]" in out and "told to 1 by someone, 1/1 aware" in out
    assert "failing" not in out  # no purpose fell back


def test_summary_flags_a_purpose_that_fails_half_the_time_in_red(monkeypatch):
    summary = RunSummary(
        run_id="r", scenario="s", status="finished", ticks_done=1, ticks_planned=1, start="a", end="b",
        game_hours=1, agents=[], conversations=0, utterances=0, llm_calls=4, parse_failures=2, fallbacks=2,
        cache_hits=0, generated_tokens=5, prompt_tokens=5, completion_tokens=5, llm_seconds=1.0,
        tick_llm_seconds=1.0, wall_seconds=2.0,
        behaviour={"llm.fallback_share.questions": 1.0, "llm.fallback_share.react": 0.49,
                   "llm.fallback_share.plan": 0.5})
    buf = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=buf, width=200, force_terminal=True, color_system="truecolor"))
    print_summary(summary, 3.0)
    out = buf.getvalue()
    lines = [line for line in out.splitlines() if "failing" in line]
    assert len(lines) == 2 and "questions" in lines[0] and "plan" in lines[1] and "react" not in out.split("failing")[-1]
    assert all("\x1b[1;31m" in line for line in lines), "flagged in bold red"


def test_summary_of_a_scripted_run_reports_memories_retrievals_and_density(make_run, scripted, monkeypatch):
    from simulation.rundb.summary import summarize

    run = make_run(scripted, ticks=8)
    for _ in range(run.ticks):
        run.model.step()
    s = summarize(run.run_dir / "run.db")
    assert s.memory_kinds and "seed" not in s.memory_kinds
    assert s.retrievals == run.store.db["retrievals"].count
    assert s.density is not None and 0.0 <= s.density[0] <= s.density[1] <= 1.0
    buf = io.StringIO()
    monkeypatch.setattr(common, "console", Console(file=buf, width=200, color_system=None))
    print_summary(s, 1.0)
    assert "Who-knows-whom density" in buf.getvalue() and "retrievals" in buf.getvalue()
