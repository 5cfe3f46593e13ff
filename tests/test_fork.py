"""Forks: a run branched at a tick is its parent's, row for row, before it, and its own after.

A fork replays its parent's ticks (same scenario as run, seed and whispers; answers from the
replay cache or a deterministic backend) and gets its interventions as scheduled events at the
fork's game time, so ``before_tick`` comparisons (``rundb.diff``) must find nothing, and the
intervention must be in its rows from the fork tick on.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from conftest import SMALL, step_run
from fork_support import run_fork, run_parent
from typer.testing import CliRunner

from simulation import Simulation
from simulation.errors import InputError
from simulation.run.fork import Intervention, parse_event, parse_setting, parse_whisper
from simulation.rundb.diff import first_difference
from simulation.testing import ScriptedBackend

TICKS, AT = 24, 12
NEWS = "The bakery on Elm Street will close for good on Friday."


@pytest.fixture(scope="module")
def parent(tmp_path_factory, flagship, embedder) -> Path:
    return run_parent(flagship, tmp_path_factory.mktemp("parent"), TICKS)


def _fork(parent: Path, out: Path, at: int = AT, **kw) -> Simulation:
    return run_fork(parent, out, at, **kw)


def test_a_fork_is_its_parent_before_the_fork_tick_and_gets_its_whisper_there(parent, tmp_path):
    fork = _fork(parent, tmp_path, interventions=[Intervention("whisper", NEWS, to="walter_hughes")])
    ours, theirs = parent / "run.db", fork.run_dir / "run.db"
    assert first_difference(ours, theirs, before_tick=AT) is None
    assert first_difference(ours, theirs) is not None, "after the fork it is a run of its own"
    con = sqlite3.connect(theirs)
    whispered = con.execute("select tick, agent_id from memories where source = 'whispered' and text = ?",
                            [NEWS]).fetchall()
    lineage = con.execute("select parent_run_id, parent_dir, fork_tick, interventions, ticks_done, status "
                          "from runs").fetchone()
    con.close()
    assert whispered == [(AT, "walter_hughes")]
    parent_id = sqlite3.connect(ours).execute("select run_id from runs").fetchone()[0]
    assert lineage[:3] == (parent_id, str(parent.resolve()), AT)
    assert json.loads(lineage[3]) == [{"kind": "whisper", "text": NEWS, "to": "walter_hughes", "place": None,
                                       "minutes": 60, "fact": None, "setting": None, "value": None,
                                       "persona": None, "home": None, "workplace": None, "crowd": False,
                                       "details": []}]
    assert lineage[4:] == (TICKS, "finished")


def test_a_fork_without_interventions_is_its_parent_whole(parent, tmp_path):
    """The replayed prefix and an unchanged continuation: the same run, every row."""
    fork = _fork(parent, tmp_path)
    assert first_difference(parent / "run.db", fork.run_dir / "run.db") is None


def test_a_fork_of_a_fork_keeps_both_prefixes(parent, tmp_path):
    first = _fork(parent, tmp_path / "a", interventions=[parse_event("town_square:90=A fire engine stops by the fountain")])
    second = _fork(first.run_dir, tmp_path / "b", at=AT + 4, interventions=[parse_whisper(f"grace_okafor={NEWS}")])
    assert first_difference(first.run_dir / "run.db", second.run_dir / "run.db", before_tick=AT + 4) is None
    assert first_difference(parent / "run.db", second.run_dir / "run.db", before_tick=AT) is None
    con = sqlite3.connect(second.run_dir / "run.db")
    kinds = con.execute("select tick, kind, text from events where kind in ('place_event', 'whisper') "
                        "order by id").fetchall()
    assert (AT, "place_event", "A fire engine stops by the fountain") in kinds
    assert (AT + 4, "whisper", NEWS) in kinds


def test_a_setting_changed_at_the_fork_holds_from_then_on_and_across_a_resume(parent, tmp_path):
    """Nobody stops for anyone from tick 12 (``cognition.reactions_per_hour=0``): no conversation
    starts after the fork, though the parent had some; a fork stopped after the change and resumed
    is the fork made in one go."""
    quiet = [parse_setting("cognition.reactions_per_hour=0")]
    whole = _fork(parent, tmp_path / "whole", interventions=quiet)
    started = "select count(*) from conversations where started_tick >= ?"
    assert sqlite3.connect(parent / "run.db").execute(started, [AT]).fetchone()[0] > 0
    assert sqlite3.connect(whole.run_dir / "run.db").execute(started, [AT]).fetchone()[0] == 0
    assert first_difference(parent / "run.db", whole.run_dir / "run.db", before_tick=AT) is None
    part = Simulation.fork(parent, at=AT, out=tmp_path / "part", backend=ScriptedBackend(), interventions=quiet)
    with part:
        step_run(part, 3)  # then stopped: closed as interrupted, to be resumed
    with Simulation.resume(part.run_dir, backend=ScriptedBackend()) as resumed:
        resumed.run()
    assert first_difference(whole.run_dir / "run.db", part.run_dir / "run.db") is None


def test_a_scenario_can_schedule_a_setting_change_and_a_bad_one_is_located(tmp_path):
    from simulation import scenario

    (tmp_path / "personas").symlink_to(SMALL.parent.parent / "personas")
    tmp_path = tmp_path / "scenarios"
    tmp_path.mkdir()
    text = SMALL.read_text(encoding="utf-8")
    good = text.replace("events:\n", "events:\n  - at: \"2023-02-13 09:00\"\n    kind: setting\n"
                        "    text: the town gets quieter\n    setting: cognition.reactions_per_hour\n    value: 1\n", 1)
    (tmp_path / "good.yaml").write_text(good, encoding="utf-8")
    loaded = scenario.load(tmp_path / "good.yaml")
    assert [(e.kind, e.setting, e.value) for e in loaded.scenario.events][0] == ("setting",
                                                                                 "cognition.reactions_per_hour", 1)
    (tmp_path / "bad.yaml").write_text(good.replace("    value: 1\n", "    value: -3\n", 1), encoding="utf-8")
    with pytest.raises(InputError, match=r"events\[0\]\.value.*-3 is not a valid reactions_per_hour"):
        scenario.load(tmp_path / "bad.yaml")


@pytest.mark.parametrize(("kwargs", "option", "says"), [
    ({"at": 99}, "--at", "outside what"),
    ({"interventions": [Intervention("whisper", NEWS, to="nobody")]}, "--whisper", "unknown person 'nobody'"),
    ({"interventions": [Intervention("place_event", NEWS, place="moon")]}, "--event", "unknown place 'moon'"),
    ({"interventions": [Intervention("whisper", NEWS, to="walter_hughes", fact="rumour")]}, "--fact",
     "unknown fact 'rumour'"),
    ({"interventions": [parse_setting("llm.temperature=0")]}, "--set", "cannot change during a run"),
    ({"interventions": [parse_setting("cognition.choices=often")]}, "--set", "'often' is not a valid choices"),
])
def test_a_fork_of_something_that_is_not_there_is_a_located_error(parent, tmp_path, kwargs, option, says):
    kwargs = {"at": AT, **kwargs}
    with pytest.raises(InputError) as err:
        Simulation.fork(parent, out=tmp_path, backend=ScriptedBackend(), **kwargs)
    assert str(err.value).startswith(option) and says in str(err.value)
    assert not list(tmp_path.iterdir()), "nothing is created for a bad fork"


def test_intervention_options_are_parsed_or_named_errors():
    assert parse_event("cafe:30=Free coffee") == Intervention("place_event", "Free coffee", place="cafe", minutes=30)
    assert parse_whisper("ann = hello ", fact="party") == Intervention("whisper", "hello", to="ann", fact="party")
    for bad in ("ann", "=text", "ann="):
        with pytest.raises(InputError, match="--whisper"):
            parse_whisper(bad)
    with pytest.raises(InputError, match="--event"):
        parse_event("cafe:soon=Free coffee")
    assert parse_setting("cognition.calibrate=false").value is False
    assert parse_setting("cognition.talk_prior=0.5").value == 0.5
    assert parse_setting("cognition.choices=argmax").value == "argmax"
    with pytest.raises(InputError, match="--set"):
        parse_setting("cognition.talk_prior")


def test_agora_fork_on_the_command_line(tmp_path, embedder):
    """The no-LLM control backend makes the parent and the fork: the command replays, intervenes,
    runs on, and a bad person is exit code 2 with the option named."""
    from simulation.cli import app

    runner = CliRunner()
    cache = ["--backend", "control", "--cache", "use", "--cache-path", str(tmp_path / "llm.sqlite")]
    made = runner.invoke(app, ["run", str(SMALL), "--ticks", "8", "--out", str(tmp_path / "p"), "--quiet", *cache])
    assert made.exit_code == 0, made.output
    parent = Path(made.output.strip().splitlines()[-1])
    forked = runner.invoke(app, ["fork", str(parent), "--at", "4", "--out", str(tmp_path / "f"),
                                 "--whisper", f"samira_haddad={NEWS}", *cache])
    assert forked.exit_code == 0, forked.output
    said = " ".join(forked.output.split())
    replayed = re.search(r"at tick 4 \(Mon 07:40\): (\d+) answers replayed, (\d+) from the replay cache; "
                         r"1 intervention\(s\); 4 tick\(s\) to go", said)
    assert replayed and replayed.group(1) == replayed.group(2) != "0", said
    child = Path(forked.output.strip().splitlines()[-1])
    assert first_difference(parent / "run.db", child / "run.db", before_tick=4) is None
    verified = runner.invoke(app, ["verify", str(child), "--cache-path", str(tmp_path / "llm.sqlite")])
    assert verified.exit_code == 0 and "every row is the same" in verified.output, verified.output
    bad = runner.invoke(app, ["fork", str(parent), "--at", "4", "--out", str(tmp_path / "g"), "--backend", "control",
                              "--whisper", "nobody=hello", "--quiet"])
    assert bad.exit_code == 2 and "--whisper" in bad.output and "unknown person 'nobody'" in bad.output
    assert "Traceback" not in bad.output


@pytest.mark.slow
def test_a_fork_on_the_bundled_model_replays_its_prefix_from_the_cache(tmp_path, embedder):
    """No LLM call of the prefix is made again: every answer before the fork tick comes from the
    replay cache the parent filled, and the rows are the parent's. The two-person town: tick 0
    asks the model for both people's importance ratings and plans, which is the mechanism; the
    small flagship's eight people took 90 s for the same check."""
    from conftest import MINIMAL, with_settings

    from simulation import scenario

    loaded = with_settings(scenario.load(MINIMAL), llm={"cache": "use", "cache_path": str(tmp_path / "llm.sqlite")})
    with Simulation.from_scenario(loaded, out=tmp_path / "p", ticks=2, seed=5) as parent:
        step_run(parent)  # two ticks, no probes: stopped, which a fork may branch like any run
    answers = []
    fork = Simulation.fork(parent.run_dir, at=1, out=tmp_path / "f", on_llm=answers.append,
                           interventions=[Intervention("whisper", NEWS, to="bob")])
    with fork:
        pass  # the replayed tick is what is checked
    assert answers and all(c.cache_hit for c in answers)
    assert first_difference(parent.run_dir / "run.db", fork.run_dir / "run.db", before_tick=1) is None
