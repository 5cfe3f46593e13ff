"""The tick phases, driven by the scripted backend, checked through what lands in run.db."""

from __future__ import annotations

import json
import sqlite3

import pytest

from simulation.core import Status
from simulation.testing import ScriptedBackend


def run_ticks(run, n=None):
    for _ in range(n if n is not None else run.ticks):
        run.model.step()
    return run


def rows(run, sql, params=()):
    return [dict(r) for r in run.store.db.query(sql, params)]


@pytest.fixture(scope="module")
def morning(tmp_path_factory, flagship, embedder):
    """Six game hours of the flagship on the default scripted backend, made once: the tests that
    only read a run (its rows, its backend's batches) share it. Returns (run, backend)."""
    from simulation import Simulation

    backend = ScriptedBackend()
    run = Simulation.from_scenario(flagship, backend=backend, out=tmp_path_factory.mktemp("runs"), ticks=36)
    return run_ticks(run), backend


@pytest.fixture(scope="module")
def endless_talk(tmp_path_factory, flagship, embedder):
    """Six game hours in which nobody says goodbye, made once. After every tick, each conversation
    row is read with its utterance count: (tick, id, turns, utterances, ended_tick). Returns (run, seen)."""
    from simulation import Simulation

    run = Simulation.from_scenario(flagship, backend=ScriptedBackend(end_after=99),
                                   out=tmp_path_factory.mktemp("runs"), ticks=36)
    seen = []
    for _ in range(run.ticks):
        run.model.step()
        for conv in rows(run, "select * from conversations"):
            said = rows(run, "select count(*) n from utterances where conversation_id = ?", (conv["id"],))[0]["n"]
            seen.append((run.model.tick, conv["id"], conv["turns"], said, conv["ended_tick"]))
    return run, seen


def test_every_agent_has_events_memories_and_states(morning):
    run, _ = morning
    db = run.store.db
    agents = {r["agent_id"] for r in db["agents"].rows}
    assert len(agents) == 8
    assert {r["agent_id"] for r in db.query("select distinct agent_id from events where agent_id is not null")} == agents
    assert {r["agent_id"] for r in db.query("select distinct agent_id from memories")} == agents
    assert db["ticks"].count == run.ticks == 36
    assert db["agent_states"].count == 36 * 8
    for table in ("events", "memories", "llm_calls", "agent_states", "ticks"):
        assert all(r["run_id"] == run.run_id for r in db[table].rows)


def test_whisper_becomes_a_thought_at_its_tick(make_run, scripted):
    run = run_ticks(make_run(scripted, ticks=1))
    thoughts = rows(run, "select * from memories where kind = 'thought'")
    assert len(thoughts) == 1
    assert thoughts[0]["agent_id"] == "isabella_rodriguez" and thoughts[0]["tick"] == 0
    assert "party" in thoughts[0]["text"].lower()


def test_llm_calls_account_every_call(morning):
    run, scripted = morning
    db = run.store.db
    sent = sum(len(b) for b in scripted.batches)
    assert db["llm_calls"].count == sent == run.model.llm.stats.calls
    per_tick = sum(r["llm_calls"] for r in db["ticks"].rows)
    assert per_tick == sent
    row = next(db["llm_calls"].rows)
    assert json.loads(row["messages"])[0]["role"] == "system"
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["parse_ok"] == 1


def test_agents_deciding_in_one_phase_share_one_batch(make_run, scripted):
    run = make_run(scripted, ticks=1)
    awake = [a for a in run.model.order if a.state.awake_at(run.model.now)]
    assert len(awake) >= 3
    run.model.step()
    plan_batches = [b for b in scripted.batches if any(r.purpose == "plan" for r in b)]
    assert len(plan_batches) == 1, "all waking agents plan in one batch"
    assert {r.agent_id for r in plan_batches[0]} == {a.agent_id for a in awake}


def test_a_tick_sends_one_batch_per_step_not_per_agent(make_run, scripted):
    run = make_run(scripted, ticks=1)
    awake = [a for a in run.model.order if a.state.awake_at(run.model.now)]
    run.model.step()
    plans = [r for b in scripted.batches for r in b if r.purpose == "plan"]
    assert len(plans) >= len(awake), "a plan for everyone awake"
    # the chain is importance -> plan -> (react) -> (talk): batches follow the chain, not the number
    # of agents
    assert len(scripted.batches) <= 6
    assert len([b for b in scripted.batches if any(r.purpose == "plan" for r in b)]) == 1, "the plans share one batch"
    assert run.model.memory.stats.batches <= len(scripted.batches), "retrievals are batched the same way"


def test_cognition_is_event_driven_few_calls_per_agent_per_game_hour(morning):
    """Everyone always wants to talk here, and still: well under the reference code's ~54."""
    run, _ = morning
    assert run.ticks == 36
    calls = run.store.db.execute("select count(*) from llm_calls").fetchone()[0]
    per_agent_hour = calls / len(run.model.people) / 6
    assert per_agent_hour < 6


def test_sleeping_and_walking_agents_make_no_calls(make_run, scripted):
    run = make_run(scripted, ticks=24)
    m = run.model
    checked = 0
    for _ in range(24):
        now = m.clock.time_at(m.tick)
        quiet = {a.agent_id for a in m.order
                 if a.state.status == Status.WALKING or (a.state.status == Status.SLEEPING and not a.state.awake_at(now))}
        before = len(scripted.batches)
        m.step()
        asked = {r.agent_id for b in scripted.batches[before:] for r in b}
        assert not asked & quiet
        checked += len(quiet)
    assert checked > 0


def test_conversations_alternate_and_end(make_run):
    backend = ScriptedBackend(end_after=3)
    run = run_ticks(make_run(backend, ticks=36))
    convs = rows(run, "select * from conversations")
    assert convs, "agents who meet and choose to talk hold conversations"
    ended = [c for c in convs if c["ended_tick"] is not None]
    assert ended
    for conv in ended:
        lines = rows(run, "select * from utterances where conversation_id = ? order by turn", (conv["id"],))
        assert len(lines) == conv["turns"] >= 2
        speakers = [line["speaker_id"] for line in lines]
        assert all(a != b for a, b in zip(speakers, speakers[1:])), "turns alternate"
        assert set(speakers) == set(json.loads(conv["participants"]))
        assert conv["turns"] <= run.model.scenario.cognition.max_conversation_turns
        for agent_id in json.loads(conv["participants"]):
            memories = rows(run, "select * from memories where agent_id = ? and kind = 'conversation'", (agent_id,))
            assert memories, "both sides remember the conversation"
        for line in lines:
            assert line["llm_call_id"] is not None


def test_turn_cap_ends_conversations(endless_talk):
    run, _ = endless_talk
    ended = rows(run, "select * from conversations where ended_tick is not null")
    assert ended and all(c["end_reason"] in ("turn limit", "bedtime") for c in ended)
    assert any(c["turns"] == run.model.scenario.cognition.max_conversation_turns for c in ended)


def test_no_conversation_when_nobody_wants_to_talk(make_run):
    backend = ScriptedBackend(talk=False)
    run = run_ticks(make_run(backend, ticks=24))
    assert run.store.db["conversations"].count == 0
    assert rows(run, "select count(*) n from llm_calls where purpose = 'react'")[0]["n"] > 0


def test_garbage_answers_are_retried_once_then_defaulted(make_run):
    backend = ScriptedBackend(garbage={"plan"})
    run = run_ticks(make_run(backend, ticks=6))
    calls = rows(run, "select * from llm_calls where purpose = 'plan' order by id")
    assert calls
    assert all(c["parse_ok"] == 0 for c in calls)
    assert {c["attempt"] for c in calls} == {0, 1}
    assert sum(c["fallback"] for c in calls) == len(calls) // 2
    assert all("not JSON" in c["parse_error"] for c in calls)
    actions = rows(run, "select * from events where kind in ('action', 'move')")
    assert actions, "agents still act on the safe default"


def test_walking_follows_paths_and_takes_time(make_run, scripted):
    run = make_run(scripted, ticks=1)
    m = run.model
    agent = m.people["isabella_rodriguez"]
    from simulation.core import Action, Status

    agent.state.status = Status.IDLE
    goal = "oak_hill_college"
    minutes = m.town.walking_minutes(agent.state.place, goal)
    agent.start_action(Action("teaching", goal, 30))
    assert agent.state.status == Status.WALKING
    walked = 0  # game minutes
    seen = [agent.state.place]
    while agent.state.status == Status.WALKING:
        agent.advance(m.clock.tick_minutes)
        walked += m.clock.tick_minutes
        seen.append(agent.state.place)
    assert agent.state.place == goal and agent.state.status == Status.ACTING
    assert minutes <= walked < minutes + m.clock.tick_minutes
    route = m.town.route("rodriguez_flat", goal)
    assert all(p in route for p in seen)
    assert agent.cell is m.space[goal]


def test_each_tick_is_one_transaction_readable_while_running(make_run, scripted, tmp_path):
    run = make_run(scripted, ticks=4)
    reader = sqlite3.connect(f"file:{run.store.path}?mode=ro", uri=True)
    for tick in range(4):
        run.model.step()
        n_ticks = reader.execute("select count(*) from ticks").fetchone()[0]
        n_states = reader.execute("select count(*) from agent_states").fetchone()[0]
        assert n_ticks == tick + 1
        assert n_states == (tick + 1) * 8
    assert reader.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_same_seed_same_run_different_seed_different_run(make_run, tmp_path):
    def events(seed, out):
        run = run_ticks(make_run(ScriptedBackend(), ticks=24, seed=seed, out=out))
        return [(r["tick"], r["agent_id"], r["kind"], r["text"]) for r in run.store.db.query(
            "select * from events order by id")]

    a = events(3, tmp_path / "a")
    b = events(3, tmp_path / "b")
    c = events(4, tmp_path / "c")
    assert a == b
    assert a != c


def test_probes_are_answered_and_recorded(make_run, scripted):
    run = run_ticks(make_run(scripted, ticks=2))
    run.model.ask_probes()
    probes = rows(run, "select * from probes")
    n_questions = len(run.model.scenario.probes)
    assert len(probes) == 8 * n_questions
    assert all(p["ok"] == 1 for p in probes)
    assert all(p["llm_call_id"] for p in probes if p["fact_id"] is None), "a question not about news is asked"
    assert any(p["llm_call_id"] for p in probes if p["fact_id"] is not None), "the host recognises her party"


def test_with_recognition_off_everyone_is_asked_whether_they_have_heard(make_run, scripted, flagship):
    from conftest import with_settings

    run = run_ticks(make_run(scripted, ticks=2, loaded=with_settings(flagship, cognition={"recognition_margin": None})))
    run.model.ask_probes()
    probes = rows(run, "select * from probes")
    assert all(p["ok"] == 1 and p["llm_call_id"] for p in probes), "each answer, or its yes-or-no, was the model's"
    asked = {r["purpose"] for r in rows(run, "select purpose from llm_calls where purpose like 'probe%'")}
    assert "probe0_choice" in asked, "the yes-or-no question about having heard"


@pytest.mark.parametrize("setting", [{"recognition": 0.46}, {"recognition_margin": 0.2}, {},
                                     {"recognition_unit": "memory"}])
def test_with_recognition_on_a_person_whose_memories_are_unlike_a_news_question_has_not_heard(
        make_run, scripted, flagship, setting):
    from conftest import with_settings
    from simulation.cognition.probe import NOT_HEARD

    run = run_ticks(make_run(scripted, ticks=2, loaded=with_settings(flagship, cognition=setting)))
    run.model.ask_probes()
    probes = rows(run, "select * from probes")
    assert len(probes) == 8 * len(run.model.scenario.probes)
    assert all(p["ok"] == 1 for p in probes)
    memory = run.model.memory
    by_sentence = setting.get("recognition_unit", "sentence") == "sentence"
    for p in probes:
        threshold = setting.get("recognition") or memory.backstory_similarity(
            p["question"], by_sentence=by_sentence) + setting.get("recognition_margin", 0.2)
        familiar = memory.familiarity(p["agent_id"], p["question"], by_sentence=by_sentence)
        if p["fact_id"] is not None and familiar < threshold:
            assert (p["answer"], p["llm_call_id"]) == (NOT_HEARD, None), "not recognised: not heard, nothing asked"
        else:
            assert p["llm_call_id"], "recognised, or not a question about news: the model answers"
    party = {p["agent_id"]: p for p in probes if p["fact_id"] == "party"}
    assert party["isabella_rodriguez"]["llm_call_id"], "the host recognises a question about her own party"
    host = party["isabella_rodriguez"]
    recalled = json.loads(rows(run, "select results from retrievals where agent_id = ? and purpose = 'probe' "
                               "and query = ?", (host["agent_id"], host["question"]))[-1]["results"])
    assert recalled and all(r["similarity"] >= threshold for r in recalled), "only what made it familiar comes back"
    prompt = json.loads(rows(run, "select messages from llm_calls where id = ?", (host["llm_call_id"],))[0]["messages"])
    texts = {m["id"]: m["text"] for m in rows(run, "select id, text from memories where agent_id = ?",
                                              (host["agent_id"],))}
    shown = "\n".join(m["content"] for m in prompt[1:])
    assert all(texts[r["memory_id"]] in shown for r in recalled), "and the answer is asked from it"
    situation = prompt[1]["content"]
    assert "It is Monday 13 February.\n" in situation, "the probe's situation says the day"
    assert ":" not in situation.split("It is ", 1)[1].split("\n", 1)[0], "but not the hour"
    assert " is at " not in situation and "There: " not in situation, "nor the place she is at, whose name and " \
        "hour a model gave as the happening's"
    assert "how Isabella knows" in prompt[-1]["content"], "the host, whom nobody told, is asked how she knows"
    temps = {(r["purpose"].startswith("probe"), r["temperature"]) for r in rows(
        run, "select purpose, temperature from llm_calls where options is null")}  # words, not scored choices
    assert temps == {(True, 0.0), (False, 0.7)}, "a probe takes the most likely answer; the town's words are drawn"
    assert any(p["answer"] == NOT_HEARD for p in party.values()), "at 07:20 most of the town has not heard"
    talked = next(p for p in probes if p["fact_id"] is None and p["agent_id"] == host["agent_id"])
    open_prompt = json.loads(rows(run, "select messages from llm_calls where id = ?",
                                  (talked["llm_call_id"],))[0]["messages"])
    assert "where and when" not in open_prompt[-1]["content"], "a question that is not about news is not asked " \
        "where and when 'it' is"


@pytest.mark.parametrize("agent_id", ["isabella_rodriguez", "theo_lindqvist"])
def test_prompts_keep_persona_in_the_system_message(morning, agent_id):
    run, _ = morning
    calls = rows(run, "select messages from llm_calls where agent_id = ?", (agent_id,))
    systems = {json.loads(c["messages"])[0]["content"] for c in calls}
    assert len(systems) == 1, "the persona block is the same in every call (it is the cached prefix)"
    system = systems.pop()
    assert "<persona>" in system and "</persona>" in system
    assert run.model.people[agent_id].state.persona.name in system


def test_a_tick_that_fails_to_commit_leaves_nothing_behind(make_run, scripted):
    from simulation.errors import RunError

    run = make_run(scripted, ticks=3)
    run.model.step()
    db = run.store.db
    before = {t: db[t].count for t in ("ticks", "events", "memories", "agent_states", "llm_calls")}
    original = run.model._record_states

    def broken_states():
        original()
        run.model.buffer.add("ticks", {"tick": 0})  # tick 0 is committed: fails at insert, after other tables

    run.model._record_states = broken_states
    with pytest.raises(RunError, match="cannot write"):
        run.model.step()
    assert {t: db[t].count for t in before} == before, "a failed commit rolls the whole tick back"


def test_a_row_with_a_column_run_db_lacks_is_refused_where_it_is_made(make_run, scripted):
    """The store is run.db's one writer and its layout the one list of columns: a part that makes
    a row with a column the layout lacks is stopped there, not at the tick's commit."""
    from simulation.errors import RunError

    run = make_run(scripted, ticks=1)
    with pytest.raises(RunError, match="table 'ticks' has no column 'no_such_column'"):
        run.model.buffer.add("ticks", {"tick": 999, "no_such_column": 1})


def _two_day_scenario(flagship, **routine):
    sc = flagship.scenario.model_copy(deep=True)
    sc.clock.duration_hours = 48
    sc.events = []
    people = []
    for rp in flagship.people[:3]:
        persona = rp.persona.model_copy(deep=True)
        for k, v in routine.get(persona.id, {}).items():
            setattr(persona.routine, k, v)
        people.append(rp.model_copy(update={"persona": persona}))
    sc.personas = sc.personas[:3]
    return flagship.model_copy(update={"scenario": sc, "people": people})


def test_agents_plan_once_per_day_across_two_days(make_run, scripted, flagship):
    from datetime import time

    night_owl = flagship.people[1].persona.id
    loaded = _two_day_scenario(flagship, **{night_owl: {"wake": time(9, 0), "sleep": time(1, 30)}})
    run = run_ticks(make_run(scripted, ticks=44 * 6, loaded=loaded))  # until 03:00 on the 15th
    plans = rows(run, "select agent_id, day, count(*) n from plans group by agent_id, day")
    assert {(p["agent_id"], p["day"]) for p in plans} == {
        (rp.persona.id, day) for rp in loaded.people for day in ("2023-02-13", "2023-02-14")}
    assert all(p["n"] == 1 for p in plans), "one plan per agent per day, night owls included"
    wakes = rows(run, "select agent_id, count(*) n from events where kind = 'wake' group by agent_id")
    assert all(w["n"] >= 1 for w in wakes)
    sleeps = rows(run, "select agent_id, sim_time from events where kind = 'sleep' and agent_id = ?", (night_owl,))
    assert any(s["sim_time"].endswith(("01:30", "01:40", "01:50", "02:00")) for s in sleeps)


def test_without_planning_everyone_keeps_their_usual_day_and_is_asked_nothing(make_run, scripted, flagship):
    """``cognition.planning: false`` (the "no planning" ablation): a plan per person, recorded as
    the crowd's is, and no plan question asked."""
    from conftest import with_settings

    run = run_ticks(make_run(scripted, ticks=6, loaded=with_settings(flagship, cognition={"planning": False})))
    plans = rows(run, "select agent_id, items from plans")
    up = rows(run, "select distinct agent_id from agent_states where status != 'sleeping'")
    assert len(up) >= 4 and sorted(p["agent_id"] for p in plans) == sorted(u["agent_id"] for u in up)
    assert not rows(run, "select id from llm_calls where purpose = 'plan'")
    assert rows(run, "select id from llm_calls where purpose != 'plan'"), "the rest of cognition still asks"


def test_agents_awake_at_the_start_are_up_not_waking_up(make_run, scripted):
    run = make_run(scripted, ticks=1)
    m = run.model
    awake = {a.agent_id for a in m.order if a.state.awake_at(m.clock.start)}
    asleep = set(m.people) - awake
    assert awake and asleep
    m.step()
    starts = {r["agent_id"]: json.loads(r["data"])["state"] for r in rows(run, "select * from events where kind = 'start'")}
    assert {a for a, s in starts.items() if s == "up"} == awake
    assert not rows(run, "select * from events where kind = 'wake' and tick = 0")
    planned = {r["agent_id"] for r in rows(run, "select agent_id from plans where tick = 0")}
    assert planned == awake


def test_open_conversation_row_is_current_after_every_tick(endless_talk):
    _, seen = endless_talk
    assert any(ended is None for *_, ended in seen), "conversations were seen open"
    for tick, conv_id, turns, said, _ in seen:
        assert turns == said, f"conversation {conv_id} after tick {tick}"


def test_rerouting_mid_walk_keeps_the_minutes_walked(make_run, scripted):
    from simulation.core import Action, Status

    run = make_run(scripted, ticks=1)
    m = run.model
    agent = m.people["isabella_rodriguez"]
    agent.state.status = Status.IDLE
    start = agent.state.place
    route = m.town.route(start, "oak_hill_college")
    first_leg = m.town.leg_minutes(route[0], route[1])
    agent.start_action(Action("teaching", "oak_hill_college", 30))
    agent.advance(first_leg - 1)  # one minute short of the first stop
    assert agent.state.place == start and agent.state.status == Status.WALKING
    agent.start_action(Action("going home", start, 30))  # turn back
    assert agent.state.status == Status.WALKING and agent.state.leg_left == first_leg - 1
    agent.advance(first_leg - 1)
    assert agent.state.place == start and agent.state.status == Status.ACTING
