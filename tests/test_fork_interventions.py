"""The interventions that change the town itself: a person removed, a person added, a fact's text
corrected (``agora fork --remove / --add / --correct``, and the scheduled events ``departure``,
``arrival`` and ``correction`` of a scenario's timeline).

Each is checked like the others (tests/test_fork.py): the fork's rows before the fork tick are its
parent's (``rundb.diff`` with ``before_tick``), and the intervention is in its rows from that tick
on; a fork stopped after it and resumed is the fork made in one go, and ``agora verify`` re-makes
one; bad input is one message naming the option (or the file, line and field), exit code 2.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import ROOT, SMALL, agora, step_run, with_settings
from fork_support import run_fork, run_parent

from simulation import Simulation
from simulation.errors import InputError
from simulation.run.fork import (Intervention, parse_addition, parse_corrections, parse_interventions,
                                 parse_removal, parse_whisper)
from simulation.rundb.diff import first_difference
from simulation.rundb.metrics import density_by_tick
from simulation.testing import ScriptedBackend

TICKS, AT = 24, 12
ELI = ROOT / "personas" / "townsfolk" / "eli_novak.yaml"
"""Not one of the small flagship's people; Grace's persona knows him, and he knows Grace and Samira."""
PARTY = ("Isabella Rodriguez is throwing a Valentine's Day party at Hobbs Cafe on February 14, from 5pm to 7pm, "
         "and everyone is invited.")
MOVED = ("Isabella Rodriguez is throwing a Valentine's Day party at the Rose and Crown Pub on February 14, "
         "from 5pm to 7pm.")
RUMOUR = "Isabella's party is at Hobbs Cafe on February 14 at 5pm."


@pytest.fixture(scope="module")
def parent(tmp_path_factory, flagship, embedder) -> Path:
    # Every person is asked the probes (recognition off): these tests read which version of the party
    # an answer names, whoever recognises the question.
    loaded = with_settings(flagship, cognition={"recognition_margin": None})
    return run_parent(loaded, tmp_path_factory.mktemp("parent"), TICKS)


def _fork(parent: Path, out: Path, at: int = AT, **kw) -> Simulation:
    return run_fork(parent, out, at, **kw)


def _rows(run_dir: Path, sql: str, args: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(run_dir / "run.db")
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _readers_work(run_dir: Path) -> None:
    """What iterates a run's people reads it without failing: the summary, the behaviour metrics,
    the attendance of happenings and the facts as they stand."""
    from simulation.rundb.attendance import attendance
    from simulation.rundb.behaviour import behaviour
    from simulation.rundb.facts import facts
    from simulation.rundb.summary import summarize

    assert summarize(run_dir / "run.db").agents
    con = sqlite3.connect(run_dir / "run.db")
    try:
        run_id = con.execute("select run_id from runs").fetchone()[0]
        assert behaviour(con, run_id)
        attendance(con, run_id)
        assert set(facts(con, run_id)) == {"party", "market"}
    finally:
        con.close()


# ---------------------------------------------------------------------- per person, while there

def _as_before(con: sqlite3.Connection, run_id: str) -> dict[str, float | None]:
    """The per-person numbers by the formulas used before people could arrive or leave: everyone
    ever in the run, over the whole run (``n * hours``, density over all ``n``, aware / ``n``)."""
    from simulation.rundb.behaviour import encounters, game_hours
    from simulation.rundb.facts import spread
    from simulation.rundb.metrics import knows_by_tick, pair_density

    n = con.execute("select count(*) from agents where run_id = ?", (run_id,)).fetchone()[0]
    named = con.execute("select count(*) from agents where run_id = ? and not crowd", (run_id,)).fetchone()[0]
    hours = game_hours(con, run_id)
    calls, tokens = con.execute("select count(*), sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) "
                                "from llm_calls where run_id = ? and purpose not like 'probe%'", (run_id,)).fetchone()
    gained, = con.execute("select coalesce(sum(importance), 0) from memories where run_id = ? and importance is not "
                          "null and kind not in ('seed', 'reflection', 'summary')", (run_id,)).fetchone()
    days = {(a, t[:10], x.split(" is ", 1)[-1].rsplit(" at ", 1)[0].lower()) for a, t, x in con.execute(
        "select agent_id, sim_time, text from events where run_id = ? and kind = 'action'", (run_id,))}
    pairs = [k.pairs for k in knows_by_tick(con, run_id)]
    return {
        "talk.encounters_per_agent_hour": 2 * encounters(con, run_id) / (n * hours),
        "llm.calls_per_agent_hour": calls / (n * hours), "llm.tokens_per_agent_hour": tokens / (n * hours),
        "plans.activities_per_agent_day": len(days) / max(1e-9, n * hours / 24.0),
        "memory.importance_per_agent_hour": gained / (named * hours),
        "relationships.density_start": pair_density(n, pairs[0]), "relationships.density_end": pair_density(n, pairs[-1]),
        **{f"facts.{f}.aware_share": s.aware / n for f, s in spread(con, run_id).items()},
    }


def test_an_ordinary_runs_per_person_numbers_are_what_they_were(parent):
    """Everyone there from the start to the end: person-hours are people x game hours, bit for bit."""
    from simulation.rundb.behaviour import behaviour

    con = sqlite3.connect(parent / "run.db")
    try:
        run_id = con.execute("select run_id from runs").fetchone()[0]
        before, now = _as_before(con, run_id), behaviour(con, run_id)
    finally:
        con.close()
    assert {k: now[k] for k in before} == before


def test_per_person_numbers_count_the_hours_each_was_in_the_town(parent, tmp_path):
    """Eli arrives half way and Walter leaves then: 8 people for 12 ticks, then 8 again (Eli in,
    Walter out), so 8 people-equivalents over the run's hours; the density of a tick is over the
    people there then; the aware share over those in the town at the end."""
    from simulation.rundb.behaviour import behaviour, game_hours
    from simulation.rundb.facts import spread
    from simulation.rundb.metrics import knows_by_tick
    from simulation.rundb.presence import headcount, run_ticks, stays

    changes = [parse_addition(f"{ELI}@town_square"), parse_removal("walter_hughes")]
    fork = _fork(parent, tmp_path, interventions=changes)
    con = sqlite3.connect(fork.run_dir / "run.db")
    try:
        run_id = con.execute("select run_id from runs").fetchone()[0]
        stayed = stays(con, run_id)
        assert headcount(stayed, run_ticks(con, run_id)) == 8.0 and len(stayed) == 9
        assert headcount(stayed, run_ticks(con, run_id), ["eli_novak", "walter_hughes"]) == 1.0
        hours = game_hours(con, run_id)
        calls, = con.execute("select count(*) from llm_calls where run_id = ? and purpose not like 'probe%'",
                             (run_id,)).fetchone()
        got = behaviour(con, run_id)
        assert got["llm.calls_per_agent_hour"] == calls / (8.0 * hours)
        knows = knows_by_tick(con, run_id)
        assert {k.people for k in knows} == {8}
        born: dict[frozenset[str], int] = {}
        for a, b, tick in con.execute("select agent_id, other_id, tick from relationships where run_id = ?", (run_id,)):
            born[frozenset((a, b))] = min(tick, born.get(frozenset((a, b)), tick))
        for k in knows:
            gone = "eli_novak" if k.tick < AT else "walter_hughes"
            assert k.pairs == sum(t <= k.tick and gone not in pair for pair, t in born.items()), k
        assert any("walter_hughes" in pair and t < AT for pair, t in born.items()), "Walter's ties leave with him"
        party = spread(con, run_id)["party"]
        assert party.people == 8 and got["facts.party.aware_share"] == party.aware_share
    finally:
        con.close()


# ---------------------------------------------------------------------- a person removed

@pytest.mark.parametrize("leaver", [0, 1], ids=["who-began-it-leaves", "the-other-leaves"])
def test_a_person_removed_at_the_fork_leaves_the_town_and_their_conversation_ends(parent, tmp_path, leaver):
    """Someone in the middle of a conversation leaves: it ends then ("left the town"), the one who
    stays recaps it (and has its end event), and nothing of the one who left follows: no state,
    memory, question, line, relationship or probe answer; their ``agents`` row says when they left."""
    open_then = _rows(parent, "select id, participants, started_tick from conversations "
                              "where ended_tick - started_tick >= 2 and started_tick >= 1 order by id")
    assert open_then, "the scripted parent has a conversation that goes on for some ticks"
    conv_id, participants, started = open_then[0]
    pair = json.loads(participants)
    leaves, stays = pair[leaver], pair[1 - leaver]
    at = started + 1
    fork = _fork(parent, tmp_path, at=at, interventions=[parse_removal(leaves)])
    ours, theirs = parent / "run.db", fork.run_dir / "run.db"
    assert first_difference(ours, theirs, before_tick=at) is None
    assert _rows(fork.run_dir, "select ended_tick, end_reason from conversations where id = ?", (conv_id,)) == [
        (at, "left the town")]
    recaps = _rows(fork.run_dir, "select agent_id from memories where kind = 'conversation' and tick = ?", (at,))
    assert (stays,) in recaps and (leaves,) not in recaps
    for table in ("agent_states", "memories", "llm_calls", "relationships", "plans", "retrievals"):
        assert not _rows(fork.run_dir, f"select 1 from {table} where agent_id = ? and tick >= ?", (leaves, at)), table
    assert _rows(parent, "select count(*) from agent_states where agent_id = ? and tick >= ?", (leaves, at))[0][0] > 0
    assert not _rows(fork.run_dir, "select 1 from utterances where ? in (speaker_id, listener_id) and tick >= ?",
                     (leaves, at))
    assert _rows(fork.run_dir, "select tick, kind from events where agent_id = ? and tick >= ?", (leaves, at)) == [
        (at, "departure")]
    assert _rows(fork.run_dir, "select agent_id from events where kind = 'conversation_end' and "
                               "json_extract(data, '$.conversation_id') = ?", (conv_id,)) == [(stays,)]
    assert dict(_rows(fork.run_dir, "select agent_id, left_tick from agents")) == {
        a: (at if a == leaves else None) for a, in _rows(parent, "select agent_id from agents")}
    asked = {a for a, in _rows(fork.run_dir, "select distinct agent_id from probes")}
    assert leaves not in asked and stays in asked
    interventions = json.loads(_rows(fork.run_dir, "select interventions from runs")[0][0])
    assert [(iv["kind"], iv["to"]) for iv in interventions] == [("departure", leaves)]
    _readers_work(fork.run_dir)


def test_a_run_resumed_after_someone_left_remembers_them_as_they_left(parent, tmp_path):
    """The checkpoint keeps whoever left: resumed between the departure and the end, the one who
    left is as they were when they left (not as the run started), and the rows are those of the
    fork made in one go."""
    leaves = "walter_hughes"
    whole = _fork(parent, tmp_path / "whole", interventions=[parse_removal(leaves)])
    part = Simulation.fork(parent, at=AT, out=tmp_path / "part", backend=ScriptedBackend(),
                           interventions=[parse_removal(leaves)])
    with part:
        step_run(part, 2)
    with Simulation.resume(part.run_dir, backend=ScriptedBackend()) as resumed:
        gone = resumed.model.mind.person(leaves)
        assert gone.stored() == whole.model.mind.person(leaves).stored()
        assert leaves not in {a.agent_id for a in resumed.model.agents}
        resumed.run()
    assert first_difference(whole.run_dir / "run.db", part.run_dir / "run.db") is None


def test_a_prefix_comparison_leaves_out_only_the_importance_of_lines_of_conversations_still_open(parent, tmp_path):
    """A line's importance changes at its conversation's recap, which for a conversation open at
    the fork comes after it: only those are not compared. Any other memory's importance is."""
    copy = tmp_path / "run.db"
    shutil.copy(parent / "run.db", copy)
    (conv, started, ended), = _rows(parent, "select id, started_tick, ended_tick from conversations "
                                            "where ended_tick - started_tick >= 2 order by id limit 1")
    line, = _rows(parent, "select id from memories where conversation_id = ? and tick = ? limit 1", (conv, started))
    (plain,), = _rows(parent, "select id from memories where conversation_id is null and tick between 1 and ? "
                              "and importance is not null order by id limit 1", (started,))
    for memory_id, at, compared in ((line[0], started + 1, False), (line[0], ended + 1, True),
                                    (plain, started + 1, True)):
        con = sqlite3.connect(copy)
        con.execute("update memories set importance = importance + 1 where id = ?", (memory_id,))
        con.commit()
        con.close()
        found = first_difference(parent / "run.db", copy, before_tick=at)
        assert (found is not None) == compared and (found is None or found.column == "importance"), (memory_id, at)
        shutil.copy(parent / "run.db", copy)


# ---------------------------------------------------------------------- a person added

def test_a_person_added_at_the_fork_arrives_there_and_lives_in_the_town_from_then_on(parent, tmp_path):
    """Eli Novak, of the big flagship's townsfolk, arrives at the Town Square at 09:00 and is
    whispered news at once: his ``agents`` row, seed memories, ties (his persona's and Grace's to
    him) and an arrival event at the fork tick, then a state every tick, a day planned, probes."""
    arrive = parse_addition(f"{ELI}@town_square,workplace=oak_hill_college")
    fork = _fork(parent, tmp_path, interventions=[arrive, parse_whisper("eli_novak=The mill is for sale.")])
    assert first_difference(parent / "run.db", fork.run_dir / "run.db", before_tick=AT) is None
    assert not _rows(parent, "select 1 from agents where agent_id = 'eli_novak'")
    assert _rows(fork.run_dir, "select home, start_place, crowd, arrived_tick, left_tick from agents "
                               "where agent_id = 'eli_novak'") == [("town_square", "town_square", 0, AT, None)]
    assert [t for t, in _rows(fork.run_dir, "select tick from agent_states where agent_id = 'eli_novak' "
                                            "order by tick")] == list(range(AT, TICKS))
    assert _rows(fork.run_dir, "select tick, kind, place, text from events where agent_id = 'eli_novak' "
                               "order by id limit 2") == [
        (AT, "arrival", "town_square", "Eli Novak arrives in town at Town Square."),
        (AT, "whisper", "town_square", "The mill is for sale.")]
    seeds = _rows(fork.run_dir, "select tick from memories where agent_id = 'eli_novak' and kind = 'seed'")
    assert seeds and {t for t, in seeds} == {AT}
    ties = _rows(fork.run_dir, "select agent_id, other_id from relationships where tick = ? and "
                               "'eli_novak' in (agent_id, other_id)", (AT,))
    assert {("grace_okafor", "eli_novak"), ("eli_novak", "grace_okafor"), ("eli_novak", "samira_haddad")} <= set(ties)
    assert _rows(fork.run_dir, "select count(*) from plans where agent_id = 'eli_novak'")[0][0] >= 1
    assert _rows(fork.run_dir, "select count(*) from probes where agent_id = 'eli_novak'")[0][0] == 2
    _readers_work(fork.run_dir)


# ---------------------------------------------------------------------- a fact corrected

def test_a_fact_corrected_at_the_fork_is_what_later_memories_and_probes_are_scored_against(parent, tmp_path):
    """The party moves to the Rose and Crown at 09:00: the change is recorded (its old text
    beside), a rumour of Hobbs Cafe told afterwards is a changed detail where the same words were
    kept before, and the probes are scored by the new place (re-scoring them agrees)."""
    corrected = parse_corrections([f"party={MOVED}"], ["party.place=rose_and_crown"])
    rumour = parse_whisper(f"grace_okafor={RUMOUR}", fact="party")
    fork = _fork(parent, tmp_path, interventions=[*corrected, rumour])
    assert first_difference(parent / "run.db", fork.run_dir / "run.db", before_tick=AT) is None
    (tick, text, data), = _rows(fork.run_dir, "select tick, text, data from events where kind = 'correction'")
    data = json.loads(data)
    assert (tick, text, data["fact"], data["was"]) == (AT, MOVED, "party", PARTY)
    assert {d["name"]: d["value"] for d in data["details"]} == {"place": "rose_and_crown", "day": "2023-02-14",
                                                                "time": "17:00-19:00"}
    said = "select tick, json_extract(details, '$.place') from fact_memories where fact_id = 'party' and declared = 1 " \
           "and source = 'whispered' order by tick"
    assert _rows(parent, said) == [(0, "kept")]
    assert _rows(fork.run_dir, said) == [(0, "kept"), (AT, "changed")], "Hobbs Cafe is the wrong place from the fork on"

    from simulation.provenance.rescore import rescore_probes
    from simulation.rundb.facts import facts

    con = sqlite3.connect(":memory:")  # a copy: re-scoring writes
    source = sqlite3.connect(fork.run_dir / "run.db")
    source.backup(con)
    source.close()
    try:
        run_id = con.execute("select run_id from runs").fetchone()[0]
        party = facts(con, run_id)["party"]
        assert (party.text, party.corrected) == (MOVED, AT)
        stored = con.execute("select id, verdict, details from probes where fact_id = 'party' order by id").fetchall()
        assert stored and rescore_probes(con, run_id) == len(stored)
        assert con.execute("select id, verdict, details from probes where fact_id = 'party' order by id").fetchall() \
            == stored, "probes were scored against the corrected fact, as re-scoring does"
        old_place = "select verdict, json_extract(details, '$.place') from probes where fact_id = 'party' " \
                    "and aware = 1 and answer like '%Hobbs Cafe%'"
        named = con.execute(old_place).fetchall()
        assert named and set(named) == {("wrong", "changed")}, "the old place is wrong by then"
        in_parent = _rows(parent, old_place)
        assert in_parent and ("wrong", "changed") not in in_parent, "the same words, before any correction"
        (probe_id,), = con.execute("select id from probes where fact_id = 'party' and aware = 1 limit 1").fetchall()
        con.execute("update probes set answer = 'It is at the Rose and Crown Pub on February 14, 5pm.' where id = ?",
                    (probe_id,))
        rescore_probes(con, run_id)
        assert con.execute("select verdict, json_extract(details, '$.place') from probes where id = ?",
                           (probe_id,)).fetchone() == ("right", "kept"), "the new place is right"
    finally:
        con.close()
    _readers_work(fork.run_dir)


AWARE = "('seeded', 'whispered', 'perceived', 'heard')"


def _plans_for(sim: Simulation, person: str) -> tuple[set[str], list[str]]:
    """Where ``person`` would go to the party: the places of the happenings they know of (what
    plans and invitations are made from), and the party options of their menu on February 14."""
    from datetime import date

    from simulation.cognition.menu import day_menu

    mind = sim.model.mind
    me = sim.model.people[person].state
    places = {h.place for h in mind.happenings(person) if h.fact == "party"}
    menu = [o.label for o in day_menu(me, mind, [], date(2023, 2, 14)) if "party" in o.label]
    return places, menu


def test_after_a_correction_each_person_acts_on_the_version_they_were_told(parent, tmp_path):
    """The party moves to the Rose and Crown at 09:00. Someone who heard of it at Hobbs Cafe
    before and is told nothing new still plans for Hobbs Cafe (and their answer that it is there
    is wrong by the corrected fact); Isabella, whispered the new place, plans for the pub. Which
    version each holds comes back the same after a resume."""
    aware_before = {a for a, in _rows(parent, f"select agent_id from fact_memories where fact_id = 'party' "
                                              f"and source in {AWARE} and tick < ?", (AT,))}
    told, untold = "isabella_rodriguez", sorted(aware_before - {"isabella_rodriguez"})
    assert told in aware_before and untold, "the scripted parent has someone else who heard of the party by then"
    changes = [*parse_corrections([f"party={MOVED}"], ["party.place=rose_and_crown"]),
               parse_whisper(f"{told}={MOVED}", fact="party")]
    fork = _fork(parent, tmp_path / "whole", interventions=changes)
    for person in untold:
        places, menu = _plans_for(fork, person)
        assert places == {"hobbs_cafe"} and menu == ["going to the Valentine's Day party at Hobbs Cafe"], person
        assert not _rows(fork.run_dir, "select 1 from fact_memories where fact_id = 'party' and agent_id = ? and "
                                       "tick >= ? and declared = 1", (person, AT))
        (answer, verdict, details), = _rows(
            fork.run_dir, "select answer, verdict, details from probes where fact_id = 'party' and agent_id = ?",
            (person,))
        assert "Hobbs Cafe" in answer and verdict == "wrong" and json.loads(details)["place"] == "changed"
    places, menu = _plans_for(fork, told)
    assert places == {"rose_and_crown"} and menu == ["going to the Valentine's Day party at The Rose and Crown Pub"]

    part = Simulation.fork(parent, at=AT, out=tmp_path / "part", backend=ScriptedBackend(), interventions=changes)
    with part:
        step_run(part, 3)
        held = {fact: dict(people) for fact, people in part.model.facts.held.items()}
    assert held["party"][told] == 1 and all(held["party"].get(p) == 0 for p in untold)
    with Simulation.resume(part.run_dir, backend=ScriptedBackend()) as resumed:
        assert resumed.model.facts.held == held, "replayed from the rows"
        resumed.run()
    assert resumed.model.facts.held == fork.model.facts.held
    assert first_difference(fork.run_dir / "run.db", part.run_dir / "run.db") is None


def test_the_detector_checks_texts_against_a_corrected_fact(embedder):
    from simulation.provenance.conveys import ConveysDetector, FactText
    from simulation.provenance.details import Detail

    place = Detail("place", "place", "hobbs_cafe")
    detector = ConveysDetector(embedder, [FactText("party", PARTY, (place,))], {"hobbs_cafe": "Hobbs Cafe",
                                                                               "rose_and_crown": "The Rose and Crown"})
    before = detector.scores([MOVED])[0][0, 0]
    detector.replace(FactText("party", MOVED, (Detail("place", "place", "rose_and_crown"),)))
    assert detector.scores([MOVED])[0][0, 0] > 0.99 > before


# ---------------------------------------------------------------------- together, resumed, verified

def test_the_three_together_across_a_resume_are_the_fork_made_in_one_go(parent, tmp_path):
    """Stopped two ticks after the fork and resumed (twice): the arrival, the departure and the
    correction are made again from the checkpoint, and the rows are those of one uninterrupted fork."""
    changes = parse_interventions(correct=[f"party={MOVED}"], detail=["party.place=rose_and_crown"],
                                  add=[f"{ELI}@town_square,crowd"], remove=["theo_lindqvist"],
                                  whisper=["eli_novak=The mill is for sale."])
    assert [iv.kind for iv in changes] == ["correction", "arrival", "whisper", "departure"]
    whole = _fork(parent, tmp_path / "whole", interventions=changes)
    assert first_difference(parent / "run.db", whole.run_dir / "run.db", before_tick=AT) is None
    assert _rows(whole.run_dir, "select crowd from agents where agent_id = 'eli_novak'") == [(1,)]
    part = Simulation.fork(parent, at=AT, out=tmp_path / "part", backend=ScriptedBackend(), interventions=changes)
    with part:
        step_run(part, 2)
    with Simulation.resume(part.run_dir, backend=ScriptedBackend()) as resumed:
        step_run(resumed, 3)
    with Simulation.resume(part.run_dir, backend=ScriptedBackend()) as resumed:
        resumed.run()
    assert first_difference(whole.run_dir / "run.db", part.run_dir / "run.db") is None


def test_agora_fork_removes_adds_and_corrects_on_the_command_line(tmp_path, embedder):
    """On the no-LLM control: the fork replays its prefix, makes the three changes, runs on and is
    verified row for row; bad input names the option, exit code 2, no traceback, nothing made."""
    cache = ["--backend", "control", "--cache", "use", "--cache-path", str(tmp_path / "llm.sqlite")]
    made = agora("run", SMALL, "--ticks", "8", "--out", tmp_path / "p", "--quiet", *cache)
    assert made.exit_code == 0, made.output
    parent = Path(made.output.strip().splitlines()[-1])
    forked = agora("fork", parent, "--at", "4", "--out", tmp_path / "f", "--remove", "walter_hughes",
                   "--add", f"{ELI}@town_square,home=ville_library", "--correct", f"party={MOVED}",
                   "--detail", "party.place=rose_and_crown", *cache)
    assert forked.exit_code == 0, forked.output
    assert "3 intervention(s)" in " ".join(forked.output.split())
    assert "note: eli_novak: habits at places this town lacks are left out: " in " ".join(forked.output.split()), \
        "given no workplace, his lectures have nowhere to be (as agora validate says)"
    child = Path(forked.output.strip().splitlines()[-1])
    assert first_difference(parent / "run.db", child / "run.db", before_tick=4) is None
    assert _rows(child, "select agent_id, home, arrived_tick, left_tick from agents where arrived_tick > 0 or "
                        "left_tick is not null order by agent_id") == [("eli_novak", "ville_library", 4, None),
                                                                       ("walter_hughes", "hughes_house", 0, 4)]
    verified = agora("verify", child, "--cache-path", tmp_path / "llm.sqlite")
    assert verified.exit_code == 0 and "every row is the same" in verified.output, verified.output
    for args, option, says in [
        (["--remove", "nobody"], "--remove", "unknown person 'nobody'"),
        (["--remove", "walter_hughes", "--remove", "walter_hughes"], "--remove", "is not in the town at the fork"),
        (["--correct", "rumour=It was all a joke."], "--correct", "unknown fact 'rumour'"),
        (["--correct", f"party={MOVED}", "--detail", "party.colour=red"], "--detail", "has no detail 'colour'"),
        (["--correct", f"party={MOVED}", "--detail", "party.time=late"], "--detail", "a time detail's value"),
        (["--detail", "party.place=rose_and_crown"], "--detail", "give --correct party=TEXT too"),
        (["--correct", f"party={MOVED}"], "--correct",
         "the new text of fact 'party' does not name its place Hobbs Cafe (hobbs_cafe); a fact's text and details "
         "must agree: if that changed too, give it, e.g. --detail party.place=NEW_PLACE"),
        (["--correct", "party=Isabella's party is at the Rose and Crown Pub at the weekend.", "--detail",
          "party.place=rose_and_crown"], "--correct", "does not name its day 2023-02-14"),
        (["--add", f"{tmp_path / 'nobody.yaml'}@town_square"], "--add", "persona file not found"),
        (["--add", f"{ELI}@moon"], "--add", "unknown place 'moon'"),
        (["--add", f"{ELI}"], "--add", "expected PERSONA_FILE@PLACE"),
        (["--add", f"{SMALL.parent.parent / 'personas' / 'walter_hughes.yaml'}@town_square"], "--add",
         "'walter_hughes'"),
    ]:
        bad = agora("fork", parent, "--at", "4", "--out", tmp_path / "bad", "--backend", "control", "--quiet", *args)
        said = " ".join(bad.output.split())
        assert bad.exit_code == 2 and option in said and says in said, (args, said)
        assert "Traceback" not in bad.output
    assert not (tmp_path / "bad").exists(), "nothing is made for a bad fork"


def test_the_options_are_parsed_or_named_errors(tmp_path):
    assert parse_removal("walter_hughes") == Intervention("departure", "", to="walter_hughes")
    assert parse_removal("walter_hughes = Walter takes the train.").text == "Walter takes the train."
    added = parse_addition("people/eli.yaml@town_square,home=ville_library,crowd", base=tmp_path)
    assert (added.kind, added.persona, added.place, added.home, added.workplace, added.crowd) == (
        "arrival", str(tmp_path / "people" / "eli.yaml"), "town_square", "ville_library", None, True)
    for bad in ("eli.yaml", "@town_square", "eli.yaml@", "eli.yaml@town_square,often", "eli.yaml@town_square,home="):
        with pytest.raises(InputError, match="--add"):
            parse_addition(bad)
    fixed = parse_corrections(["party = It is at the pub."], ["party.place=rose_and_crown", "party.time=18:00"])
    assert fixed == [Intervention("correction", "It is at the pub.", fact="party",
                                  details=(("place", "rose_and_crown"), ("time", "18:00")))]
    for corrections, details, option in [(["party"], [], "--correct"), (["party.place=x"], [], "--correct"),
                                         (["party=a", "party=b"], [], "--correct"), (["party=a"], ["party=x"], "--detail"),
                                         ([], ["market.day=2023-02-14"], "--detail")]:
        with pytest.raises(InputError, match=option):
            parse_corrections(corrections, details)


# ---------------------------------------------------------------------- in a scenario's timeline

ARRIVAL = """  - at: "2023-02-13 07:30"
    kind: arrival
    place: town_square
    text: Eli gets off the early bus with a rucksack.
    person: {file: ../personas/townsfolk/eli_novak.yaml, home: town_square, workplace: oak_hill_college}
"""
DEPARTURE = """  - at: "2023-02-13 07:40"
    kind: departure
    to: walter_hughes
    text: Walter drives to the coast for the week.
"""
CORRECTION = """  - at: "2023-02-13 07:50"
    kind: correction
    fact: party
    text: "%s"
    details:
      - {name: place, kind: place, value: rose_and_crown, aliases: [the pub]}
      - {name: day, kind: date, value: "2023-02-14"}
""" % MOVED


def _scenario(tmp_path: Path, events: str) -> Path:
    (tmp_path / "personas").symlink_to(SMALL.parent.parent / "personas")
    (tmp_path / "scenarios").mkdir()
    path = tmp_path / "scenarios" / "changed.yaml"
    path.write_text(SMALL.read_text(encoding="utf-8").replace("events:\n", "events:\n" + events, 1), encoding="utf-8")
    return path


def test_a_scenario_schedules_an_arrival_a_departure_and_a_correction(tmp_path, embedder):
    from simulation import scenario

    loaded = scenario.load(_scenario(tmp_path, ARRIVAL + DEPARTURE + CORRECTION))
    assert [p.persona.id for p in loaded.arrivals.values()] == ["eli_novak"]
    assert loaded.arrivals[0].start_place == "town_square" and "eli_novak" not in {p.persona.id for p in loaded.people}
    here, density = [], []
    with Simulation.from_scenario(loaded, backend=ScriptedBackend(), out=tmp_path / "runs", ticks=8) as sim:
        for tick in range(8):
            sim.step()
            here.append({a.agent_id for a in sim.model.order} == loaded.in_town(tick))
            density.append(sim.model.social.density())
    run = sim.run_dir
    assert all(here), "the model's town and LoadedScenario.in_town disagree"
    con = sqlite3.connect(run / "run.db")
    try:  # the live graph counts whom run.db's readers count: Walter is out of it once he has left
        assert density == pytest.approx([d for _, _, d in density_by_tick(con, sim.run_id)])
    finally:
        con.close()
    assert _rows(run, "select tick, kind, agent_id from events where kind in ('arrival', 'departure', 'correction') "
                      "order by id") == [(3, "arrival", "eli_novak"), (4, "departure", "walter_hughes"),
                                         (5, "correction", None)]
    assert [t for t, in _rows(run, "select tick from agent_states where agent_id = 'eli_novak'")] == list(range(3, 8))
    assert [t for t, in _rows(run, "select tick from agent_states where agent_id = 'walter_hughes'")] == list(range(4))
    assert json.loads(_rows(run, "select data from events where kind = 'correction'")[0][0])["details"][1] == {
        "name": "day", "kind": "date", "value": "2023-02-14", "aliases": []}


WHISPER_TO_WALTER = """  - at: "2023-02-13 09:00"
    kind: whisper
    to: walter_hughes
    text: The mill is for sale.
"""


@pytest.mark.parametrize(("events", "says"), [
    (DEPARTURE.replace("walter_hughes", "nobody"), r"events\[0\]\.to: unknown persona 'nobody'"),
    (CORRECTION.replace("fact: party", "fact: rumour"), r"events\[0\]\.fact: unknown fact 'rumour'"),
    (CORRECTION.replace("value: rose_and_crown", "value: the_moon"), r"events\[0\]\.details\[0\]\.value: unknown place"),
    (CORRECTION.replace("value: rose_and_crown", "value: hobbs_cafe"),
     r"events\[0\]\.text: the corrected text of fact 'party' does not name its place Hobbs Cafe \(hobbs_cafe\)"),
    (CORRECTION.replace("    details:\n      - {name: place, kind: place, value: rose_and_crown, aliases: [the pub]}\n"
                        "      - {name: day, kind: date, value: \"2023-02-14\"}\n", ""),
     r"events\[0\]\.text: .* does not name its place Hobbs Cafe .*give the new one in this event's details"),
    (DEPARTURE + WHISPER_TO_WALTER, r"events\[1\]\.to: 'walter_hughes' is not in the town at 2023-02-13 09:00: "
                                    r"they left at 2023-02-13 07:40 \(events\[0\]\)"),
    (DEPARTURE + DEPARTURE, r"events\[1\]\.to: 'walter_hughes' is not in the town"),
    (ARRIVAL.replace("townsfolk/eli_novak", "walter_hughes"), r"events\[0\]\.person: persona id 'walter_hughes' is "
                                                              r"already"),
    (ARRIVAL.replace("townsfolk/eli_novak", "townsfolk/nobody"), r"events\[0\]\.person\.file: persona file not found"),
    (ARRIVAL.replace("home: town_square", "home: the_moon"), r"events\[0\]\.person\.home: unknown place 'the_moon'"),
    (ARRIVAL.replace("    place: town_square\n", ""), r"events\[0\]: an arrival needs 'person'"),
    (ARRIVAL + WHISPER_TO_WALTER.replace("walter_hughes", "eli_novak").replace("09:00", "07:00"),
     r"'eli_novak' is not in the town at 2023-02-13 07:00: they arrive at 2023-02-13 07:30"),
])
def test_a_bad_arrival_departure_or_correction_in_a_scenario_is_located(tmp_path, events, says):
    from simulation import scenario

    with pytest.raises(InputError, match=says) as err:
        scenario.load(_scenario(tmp_path, events))
    assert "changed.yaml:" in str(err.value)


# ---------------------------------------------------------------------- in an experiment

def test_an_experiment_fork_condition_takes_the_new_interventions_and_is_checked_before_any_run(tmp_path):
    from simulation.experiment.runner import interventions
    from simulation.experiment.spec import load_spec

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(
        f"name: t\nscenario: {SMALL}\nseeds: [1, 2]\nticks: 6\nconditions:\n  - name: as_is\n  - name: changed\n"
        "    fork: {of: as_is, at: 3, remove: [walter_hughes], add: ['eli.yaml@town_square,crowd'],\n"
        f"           correct: [{json.dumps('party=' + MOVED)}], detail: [party.place=rose_and_crown]}}\n",
        encoding="utf-8")
    spec, _ = load_spec(spec_path)
    made = interventions(spec.conditions[1], "here", spec_path.parent)
    assert [(iv.kind, iv.to, iv.persona) for iv in made] == [
        ("correction", None, None), ("arrival", None, str(tmp_path / "eli.yaml")), ("departure", "walter_hughes", None)]
    for fix, says in [(None, "--add: persona file not found"), ("walter_hughes", "unknown person 'nobody'")]:
        if fix is not None:  # the persona file is there now; the person removed is not
            shutil.copy(ELI, tmp_path / "eli.yaml")
            spec_path.write_text(spec_path.read_text(encoding="utf-8").replace(fix, "nobody"), encoding="utf-8")
        refused = agora("experiment", spec_path, "--out", tmp_path / "out", "--backend", "control", "--quiet")
        said = " ".join(refused.output.split())
        assert refused.exit_code == 2 and "conditions[1] (changed): fork:" in said and says in said, said
        assert "Traceback" not in refused.output
        assert not list((tmp_path / "out").rglob("run.db")), "nothing ran"


# ---------------------------------------------------------------------- the viewer

def test_the_viewer_shows_a_fork_where_someone_left_and_someone_arrived(monkeypatch, parent, tmp_path):
    from ui_support import app, open_page, text_of

    changes = [parse_addition(f"{ELI}@town_square,crowd"), parse_removal("walter_hughes")]
    fork = _fork(parent, tmp_path / "runs", interventions=changes)
    for page in ("town", "conversations", "metrics", "runs"):
        open_page(app(monkeypatch, fork.run_dir), page)
    at = open_page(app(monkeypatch, fork.run_dir), "people")
    at.selectbox(key="people_agent").set_value("walter_hughes").run()
    assert not at.exception and "Left the town at tick 12" in text_of(at)
    at.selectbox(key="people_agent").set_value("eli_novak").run()
    at.slider(key="people_tick").set_value(AT - 1).run()
    assert not at.exception and "Not in the town yet: arrives at tick 12" in text_of(at)
