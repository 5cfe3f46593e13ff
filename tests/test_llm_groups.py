"""A model per person: ``llm.groups`` in the scenario, ``llm: GROUP`` on a person or a population.

Each person's questions go to their group's backend (and the content-free calibration question to
each group's model), run.db records the model that answered every call and each person's group,
the replay cache keeps the models apart, and a two-group run replays, resumes and verifies
exactly. The doubles are two scripted backends under different model ids, the second answering
differently (it never starts a conversation on its own), so a call sent to the wrong model shows.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import get_args

import pytest
from conftest import agora

from simulation import Simulation, scenario
from simulation.errors import InputError
from simulation.llm import registry
from simulation.llm.cache import CachedBackend, ReplayCache
from simulation.llm.factory import BackendChoice
from simulation.llm.settings import DEFAULT_GROUP, GroupSettings
from simulation.llm.types import LLMRequest
from simulation.run.verify import verify
from simulation.rundb.behaviour import behaviour
from simulation.rundb.diff import first_difference
from simulation.rundb.groups import UNGROUPED, group_of, recorded_models
from simulation.testing import ScriptedBackend

TICKS = 18
QUIET = ("isabella_rodriguez", "samira_haddad", "walter_hughes")
"""The people of group ``quiet`` in the small flagship; the other five ask the llm block's own model."""


class Quiet(ScriptedBackend):
    """The second model: another model id, and its people never stop to talk when they see someone."""

    model_id = "scripted-quiet"

    def __init__(self) -> None:
        super().__init__(talk=False)


def grouped(loaded, groups=None, members=QUIET):
    """``loaded`` with model groups (default: ``quiet``, a control block at another temperature) and
    ``members`` in the first of them, as if the file said ``llm: quiet`` on their entries."""
    groups = groups if groups is not None else {"quiet": {"backend": "control", "temperature": 0.4}}
    sc = loaded.scenario
    llm = registry.parse_settings({**sc.llm.model_dump(exclude={"groups"}), "groups": groups})
    first = next(iter(groups))
    people = [rp.model_copy(update={"llm_group": first}) if rp.persona.id in members else rp for rp in loaded.people]
    return loaded.model_copy(update={"scenario": sc.model_copy(update={"llm": llm}), "people": people})


@pytest.fixture(scope="module")
def two_models(flagship):
    return grouped(flagship)


def _run(loaded, out: Path, default, quiet, ticks: int = TICKS, seed: int = 4) -> Path:
    with Simulation.from_scenario(loaded, backend=default, groups={"quiet": quiet}, out=out, ticks=ticks,
                                  seed=seed) as sim:
        sim.run()
        return sim.run_dir


@pytest.fixture(scope="module")
def cached_run(tmp_path_factory, two_models, embedder):
    """A finished two-group run whose answers all went through one replay-cache file, and its backends."""
    where = tmp_path_factory.mktemp("groups")
    cache_file = where / "llm.sqlite"
    default, quiet = ScriptedBackend(), Quiet()
    cache = ReplayCache(cache_file)
    run_dir = _run(two_models, where / "runs", CachedBackend(default, cache), CachedBackend(quiet, ReplayCache(cache_file)))
    cache.close()
    return run_dir, cache_file, default, quiet


# ---------------------------------------------------------------------------- the scenario


def _scenario_file(tmp_path: Path, llm: str, entry: str = "    llm: quiet\n") -> Path:
    text = (Path(__file__).parent / "data" / "good" / "minimal.yaml").read_text()
    text = text.replace("    home: home_a\n  - persona:", f"    home: home_a\n{entry}  - persona:", 1)
    path = tmp_path / "groups.yaml"
    path.write_text(text + llm)
    return path


def test_a_group_says_what_differs_and_takes_the_rest_from_the_llm_block(tmp_path):
    path = _scenario_file(tmp_path, "llm:\n  temperature: 0.3\n  threads: 2\n  groups:\n"
                                    "    quiet: {model: other.gguf, context_tokens: 1024}\n"
                                    "    served: {backend: openai, base_urls: ['http://gpu1:8000/v1']}\n"
                                    "    control: {backend: control}\n")
    (tmp_path / "other.gguf").write_bytes(b"GGUF")
    loaded = scenario.load(path)
    llm = loaded.scenario.llm
    quiet, served = llm.groups["quiet"], llm.groups["served"]
    assert (quiet.backend, quiet.model, quiet.temperature, quiet.threads, quiet.context_tokens) == \
        ("llamacpp", "other.gguf", 0.3, 2, 1024)
    # another backend takes the shared settings only: not llamacpp's threads, nor its model
    assert (served.backend, served.model, served.temperature, served.base_urls) == \
        ("openai", None, 0.3, ["http://gpu1:8000/v1"])
    assert llm.groups["control"].backend == "control" and llm.group(None) is llm
    assert loaded.llm_groups() == {"ann": "quiet"}
    # what a run saves and resumes from reads back as it was
    assert type(loaded).model_validate_json(loaded.model_dump_json()).scenario.llm == llm
    res = agora("validate", path)
    assert res.exit_code == 0, res.output
    assert "model group quiet: llamacpp, other.gguf; 1 of the people" in res.stdout
    assert "model group served: openai, its default model; named by nobody, so never started" in res.stdout


def test_a_group_is_checked_like_the_llm_block_each_problem_at_its_line(tmp_path):
    path = _scenario_file(tmp_path, "llm:\n  groups:\n"
                                    "    quiet: {backend: openai, threads: 2}\n"
                                    "    nested: {groups: {inner: {}}}\n"
                                    "    default: {temperature: 0.1}\n"
                                    "    wrong: {backend: gpt}\n"
                                    "    hot: {temperature: 9}\n")
    with pytest.raises(InputError) as caught:
        scenario.load(path)
    said = {p.field: p.message for p in caught.value.problems}
    assert said["llm.groups.quiet.threads"] == "'threads' is a setting of the llamacpp backend, not of openai"
    assert "no groups of its own" in said["llm.groups.nested"]
    assert "names the people without a group" in said["llm.groups.default"]
    assert said["llm.groups.wrong.backend"].startswith("unknown backend 'gpt'")
    assert "llm.groups.hot.temperature" in said
    assert all(p.line for p in caught.value.problems) and all(p.file == str(path) for p in caught.value.problems)


def test_an_unknown_group_or_a_missing_model_file_is_bad_input_located_exit_2(tmp_path):
    path = _scenario_file(tmp_path, "llm:\n  groups:\n    big: {model: nowhere.gguf}\n", entry="    llm: quiet\n")
    with pytest.raises(InputError) as caught:
        scenario.load(path)
    said = {p.field: (p.line, p.message) for p in caught.value.problems}
    assert said["personas[0].llm"][1] == "unknown model group 'quiet'; the scenario's groups: big"
    assert said["personas[0].llm"][0] == 22  # the line that says it
    assert said["llm.groups.big.model"][1].startswith("model file not found")
    res = agora("validate", path)
    assert res.exit_code == 2, res.output
    assert "personas[0].llm: unknown model group 'quiet'" in res.output and "Traceback" not in res.output
    alone = _scenario_file(tmp_path, "")
    res = agora("run", alone, "--out", tmp_path / "runs", "--ticks", 1)
    assert res.exit_code == 2 and "unknown model group 'quiet'; the scenario has no llm.groups" in res.output
    assert not (tmp_path / "runs").exists()


def test_a_population_names_a_group_for_everyone_it_samples(tmp_path):
    source = Path(__file__).parent / "data" / "populations" / "scenario_population_defaults.yaml"
    text = source.read_text().replace("../../../", f"{source.parents[3]}/")
    text = text.replace("  n: 6\n", "  n: 6\n  llm: crowd\n", 1)
    assert "llm: crowd" in text
    path = tmp_path / "grouped_population.yaml"
    path.write_text(text + "llm:\n  groups:\n    crowd: {backend: control}\n")
    loaded = scenario.load(path)
    named = {"ada_ash", "isabella_rodriguez"}
    assert {rp.llm_group for rp in loaded.people if rp.persona.id not in named} == {"crowd"}
    assert {rp.llm_group for rp in loaded.people if rp.persona.id in named} == {None}
    assert len(loaded.llm_groups()) == 6


def test_the_group_blocks_are_the_registrys_backends_and_reports_agree_on_the_ungrouped():
    union = get_args(get_args(GroupSettings)[0])
    assert set(union) == {entry.settings for entry in registry.BACKENDS.values()}
    assert UNGROUPED == DEFAULT_GROUP


# ---------------------------------------------------------------------------- a run on two models


def test_each_persons_calls_go_to_their_groups_model_and_run_db_says_which(cached_run):
    run_dir, _, default, quiet = cached_run
    con = sqlite3.connect(run_dir / "run.db")
    by_group = con.execute(
        "select a.llm_group, c.backend, c.model, count(*) from llm_calls c join agents a "
        "on a.agent_id = c.agent_id group by 1, 2, 3").fetchall()
    assert by_group == [(None, "scripted", "scripted-v1", by_group[0][3]), ("quiet", "scripted", "scripted-quiet",
                                                                            by_group[1][3])]
    assert all(row[3] > 0 for row in by_group)
    # each double was asked by its own people only (a question for nobody: its group's calibration)
    assert {r.agent_id for batch in quiet.batches for r in batch} <= set(QUIET) | {None}
    assert not {r.agent_id for batch in default.batches for r in batch} & set(QUIET)
    assert {r.purpose for batch in quiet.batches for r in batch if r.agent_id is None} == {"calibrate"}
    # the group's own temperature for its questions (ratings are at 0)
    temps = dict(con.execute("select a.llm_group is not null, max(c.temperature) from llm_calls c join agents a "
                             "on a.agent_id = c.agent_id group by 1").fetchall())
    assert temps == {0: 0.7, 1: 0.4}
    assert group_of(con, con.execute("select run_id from runs").fetchone()[0]) == {p: "quiet" for p in QUIET}
    assert recorded_models(con) == {None: ("scripted", "scripted-v1"), "quiet": ("scripted", "scripted-quiet")}
    assert con.execute("select settings from llm_groups").fetchone()[0].startswith('{"backend": "control"')
    # the quiet people started no conversation (their model never chooses to talk)
    starters = {p for p, in con.execute("select json_extract(participants, '$[0]') from conversations")}
    assert starters and not starters & set(QUIET)


def test_a_two_group_run_replays_exactly_from_the_cache_each_model_under_its_own_keys(cached_run, two_models,
                                                                                     tmp_path):
    run_dir, cache_file, _, _ = cached_run
    models = dict(sqlite3.connect(cache_file).execute("select model, count(*) from completions group by model"))
    assert set(models) == {"scripted:scripted-v1", "scripted:scripted-quiet"}
    again_default, again_quiet = ScriptedBackend(), Quiet()
    replayed = _run(two_models, tmp_path, CachedBackend(again_default, ReplayCache(cache_file)),
                    CachedBackend(again_quiet, ReplayCache(cache_file)))
    assert again_default.batches == [] and again_quiet.batches == [], "every answer came from the cache"
    assert first_difference(replayed / "run.db", run_dir / "run.db") is None
    # a question one model answered is not an answer of the other's: groups never share answers
    con = sqlite3.connect(run_dir / "run.db")
    row = con.execute("select messages, json_schema, max_tokens, temperature, seed from llm_calls "
                      "where agent_id = 'daniel_okafor' and options is null limit 1").fetchone()
    request = LLMRequest(messages=json.loads(row[0]), json_schema=json.loads(row[1]), max_tokens=row[2],
                         temperature=row[3], seed=row[4])
    cache = ReplayCache(cache_file)
    assert cache.get_many([request.key("scripted:scripted-v1")]), "daniel's own model's answer is there"
    assert cache.get_many([request.key("scripted:scripted-quiet")]) == {}
    cache.close()


def test_agora_verify_remakes_a_two_group_run_row_for_row(cached_run):
    run_dir, cache_file, _, _ = cached_run
    result = verify(run_dir, cache_file)
    assert result.same, result.difference
    assert result.replayed > 0
    res = agora("verify", run_dir, "--cache-path", cache_file, width=240)
    assert res.exit_code == 0 and "every row is the same" in res.stdout, res.output


def test_a_two_group_run_stopped_and_resumed_is_the_run_made_in_one_go(cached_run, two_models, tmp_path):
    run_dir, _, _, _ = cached_run
    part = Simulation.from_scenario(two_models, backend=ScriptedBackend(), groups={"quiet": Quiet()},
                                    out=tmp_path, ticks=TICKS, seed=4)
    with part:
        for _ in range(7):
            part.step()  # then stopped: closed as interrupted
    quiet = Quiet()
    with Simulation.resume(part.run_dir, backend=ScriptedBackend(), groups={"quiet": quiet}) as resumed:
        resumed.run()
    assert quiet.batches, "the resumed ticks asked the quiet model again"
    assert first_difference(run_dir / "run.db", part.run_dir / "run.db") is None


def test_a_fork_of_a_two_group_run_is_its_parent_before_the_fork_tick(cached_run, tmp_path):
    run_dir, cache_file, _, _ = cached_run
    default, quiet = ScriptedBackend(), Quiet()
    with Simulation.fork(run_dir, at=6, out=tmp_path, ticks=2, backend=CachedBackend(default, ReplayCache(cache_file)),
                         groups={"quiet": CachedBackend(quiet, ReplayCache(cache_file))}) as fork:
        fork.step()
        fork.step()  # then closed, before the probes, which the parent asked at another time
    assert default.batches == [] and quiet.batches == [], "the prefix and the two ticks after came from the cache"
    assert first_difference(run_dir / "run.db", fork.run_dir / "run.db", before_tick=6) is None
    assert recorded_models(sqlite3.connect(fork.run_dir / "run.db"))["quiet"] == ("scripted", "scripted-quiet")


def test_a_group_nobody_injects_is_built_from_its_settings_and_resumed_on_its_recorded_model(flagship, tmp_path,
                                                                                           embedder):
    loaded = grouped(flagship, {"quiet": {"backend": "control", "cache": "off"}})
    with Simulation.from_scenario(loaded, backend=ScriptedBackend(), out=tmp_path, ticks=4, seed=2) as sim:
        sim.step()
    con = sqlite3.connect(sim.run_dir / "run.db")
    assert recorded_models(con)["quiet"] == ("control", "control")
    models = dict(con.execute("select a.agent_id, c.model from llm_calls c join agents a on a.agent_id = c.agent_id"))
    assert {models[p] for p in QUIET if p in models} == {"control"}
    assert {m for p, m in models.items() if p not in QUIET} == {"scripted-v1"}
    con.close()
    with Simulation.resume(sim.run_dir, backend=ScriptedBackend()) as resumed:
        resumed.run()
    con = sqlite3.connect(sim.run_dir / "run.db")
    late = set(con.execute("select c.model from llm_calls c join agents a on a.agent_id = c.agent_id "
                           "where a.llm_group = 'quiet' and c.tick > 0"))
    assert late == {("control",)}


def test_the_behaviour_report_splits_the_llm_and_talk_by_group(cached_run, tmp_path):
    run_dir, _, _, _ = cached_run
    for part in run_dir.glob("run.db*"):  # altered below (its WAL too)
        shutil.copy(part, tmp_path / part.name)
    con = sqlite3.connect(tmp_path / "run.db")
    run_id = con.execute("select run_id from runs").fetchone()[0]
    metrics = behaviour(con, run_id)
    hours = TICKS * 10 / 60
    for group, members in (("quiet", len(QUIET)), (UNGROUPED, 8 - len(QUIET))):
        side = "is not null" if group == "quiet" else "is null"
        calls, = con.execute(f"select count(*) from llm_calls c join agents a on a.agent_id = c.agent_id "
                             f"where a.llm_group {side} and c.purpose not like 'probe%'").fetchone()
        assert metrics[f"llm.group.{group}.calls_per_agent_hour"] == pytest.approx(calls / (members * hours))
        lines, = con.execute(f"select count(*) from utterances u join agents a on a.agent_id = u.speaker_id "
                             f"where a.llm_group {side}").fetchone()
        assert metrics[f"talk.group.{group}.lines_per_agent_hour"] == pytest.approx(lines / (members * hours))
        assert metrics[f"llm.group.{group}.fallback_share"] is not None
    # a run.db before schema 12 has no groups: its report has no split, found from its layout
    con.execute("alter table agents drop column llm_group")
    con.execute("drop table llm_groups")
    assert not any(".group." in name for name in behaviour(con, run_id))
    assert group_of(con, run_id) == {}
    assert recorded_models(con) == {None: ("scripted", "scripted-v1")}


def test_a_town_where_nobody_names_a_group_has_no_split_and_no_group_rows(flagship, make_run, embedder):
    with make_run(ScriptedBackend(), ticks=2) as sim:
        sim.run()
        con = sqlite3.connect(sim.run_dir / "run.db")
        assert con.execute("select count(*) from llm_groups").fetchone() == (0,)
        assert not any(".group." in name for name in behaviour(con, sim.run_id))


# ---------------------------------------------------------------------------- who chooses which backend


def test_the_command_line_changes_the_llm_blocks_backend_and_everyones_replay_cache(two_models):
    llm = two_models.scenario.llm
    chosen = BackendChoice(backend="openai", base_urls=["http://gpu1:8000/v1"], cache="off").apply(llm)
    assert chosen.backend == "openai" and chosen.groups["quiet"].backend == "control"
    assert chosen.cache == "off" and chosen.groups["quiet"].cache == "off"
    assert chosen.groups["quiet"].temperature == 0.4
    control = BackendChoice(backend="control", cache="off", everyone=True).apply(llm)
    assert {g.backend for g in control.groups.values()} == {"control"} and control.groups["quiet"].temperature == 0.7


def test_backends_passed_for_a_group_the_scenario_lacks_are_bad_input(two_models, tmp_path):
    with pytest.raises(InputError, match="no model group 'loud'"):
        Simulation.from_scenario(two_models, backend=ScriptedBackend(), groups={"quiet": Quiet(), "loud": Quiet()},
                                 out=tmp_path, ticks=1)
    assert not any(tmp_path.iterdir()), "nothing made"


def test_a_persons_context_window_and_draw_temperature_are_their_groups(flagship, tmp_path, embedder):
    loaded = grouped(flagship, {"quiet": {"backend": "control", "context_tokens": 1024, "temperature": 0.2}})
    with Simulation.from_scenario(loaded, backend=ScriptedBackend(), groups={"quiet": Quiet()}, out=tmp_path,
                                  ticks=1) as sim:
        mind = sim.model.mind
        isabella, daniel = mind.person("isabella_rodriguez"), mind.person("daniel_okafor")
        assert (mind.settings_of(isabella).context_tokens, mind.settings_of(isabella).temperature) == (1024, 0.2)
        assert (mind.settings_of(daniel).context_tokens, mind.settings_of(daniel).temperature) == (2048, 0.7)
        assert mind.settings_of(daniel) is mind.settings


def test_an_experiment_condition_puts_a_person_on_another_model_by_overrides():
    from conftest import SMALL

    from simulation.experiment.overrides import condition_scenario

    loaded = condition_scenario(SMALL, "isabella_on_control",
                                {"llm.groups": {"alt": {"backend": "control"}}, "personas.0.llm": "alt"}, "exp.yaml")
    assert loaded.llm_groups() == {loaded.people[0].persona.id: "alt"}
    with pytest.raises(InputError, match="unknown model group 'alt'"):
        condition_scenario(SMALL, "no_group", {"personas.0.llm": "alt"}, "exp.yaml")


@pytest.mark.slow
def test_one_person_on_the_bundled_model_one_on_the_double_records_both_and_replays_exactly(tmp_path, embedder):
    """Issue 36's "done": a town on two models, the bundled SmolLM2 (built from the group's settings)
    and the scripted double, records which answered each call, and ``agora verify`` re-makes it
    from the replay cache alone."""
    from conftest import MINIMAL

    cache_file = tmp_path / "llm.sqlite"
    loaded = grouped(scenario.load(MINIMAL), {"bundled": {"backend": "llamacpp", "threads": 1, "cache": "use",
                                                          "cache_path": str(cache_file)}}, members=("ann",))
    cache = ReplayCache(cache_file)
    with Simulation.from_scenario(loaded, backend=CachedBackend(ScriptedBackend(), cache), out=tmp_path / "runs",
                                  ticks=3, seed=1) as sim:
        sim.run(3)
        run_dir = sim.run_dir
    cache.close()
    con = sqlite3.connect(run_dir / "run.db")
    models = dict(con.execute("select agent_id, group_concat(distinct model) from llm_calls "
                              "where agent_id is not null group by agent_id"))
    bundled = recorded_models(con)["bundled"]
    assert bundled[0] == "llamacpp" and bundled[1].startswith("SmolLM2-135M-Instruct")
    assert models == {"ann": bundled[1], "bob": "scripted-v1"}
    con.close()
    result = verify(run_dir, cache_file)
    assert result.same, result.difference
