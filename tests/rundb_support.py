"""A tiny run.db written by hand (no engine): four people, four ticks, known relationships,
memories, conversations and LLM calls, so the metrics have numbers worked out on paper.

    people   ann, bob, cat, dan (n = 4: 6 possible pairs)
    ticks    0-3 at 07:00, 07:10, 07:20, 07:30 (10-minute ticks)
    relationships (directed rows, by tick)
             0: ann -> bob (seeded one-sided), ann -> zed (no such person), ann -> ann (self)
             2: bob -> ann (the same pair again), cat -> dan, dan -> cat, ann -> bob (updated)
             3: ann -> cat (one-sided)
             known pairs: 1, 1, 2, 3  -> density 1/6, 1/6, 1/3, 1/2
             (directed edges / n(n-1) would give 1/12, 1/12, 1/3, 5/12)
    conversations (the fallback graph): ann+bob from tick 1, cat+dan from tick 3, a
             three-person row and a broken row (both ignored) -> pairs 0, 1, 1, 2
    topics   (older files' keyword topics: still in the scenario, no longer measured)
    llm_calls ann: 10+5 tokens, 0.5 s; ann: 20+10, parse failure and fallback, 1.0 s;
             bob: 30+7, a cache hit, 0.01 s

``make_traced_run_db`` adds what run.db schema 4 records, provenance, for a fact ``party``
(details place, day, time) and a fact ``cider`` nobody learns:

    fact_memories  0 ann whispered (declared)            kept 3
                   1 bob heard from ann (utterance 1)    kept 2, lost 1
                   1 ann said                            (ann aware already: not invented)
                   2 cat heard from bob                  kept 1, lost 1, changed 1 (distorted)
                   2 dan planned                         (dan not aware yet: invented)
                   3 dan heard from cat                  lost 3
                   3 dan recapped from cat               (a recap: never awareness itself)
                   3 zed heard from dan                  (not a person of the run)
    -> aware 1, 2, 3, 4 by tick; cascade ann(0) -> bob(1) -> cat(2) -> dan(3); told 3, distorted
       1 of 3, details kept 3 of 9; invented 1; probes: bob right, dan invented... (see PROBES)
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

RUN_ID = "tiny-20260101-070000-abcd"
PEOPLE = {"ann": "Ann Archer", "bob": "Bob Baker", "cat": "Cat Cooper", "dan": "Dan Dyer"}
TIMES = ["2023-02-13 07:00", "2023-02-13 07:10", "2023-02-13 07:20", "2023-02-13 07:30"]
TOPICS = [{"id": "party", "keywords": ["party", "celebration"]}, {"id": "cider", "keywords": ["cider"]}]
SCENARIO_YAML = """\
name: tiny
topics:
  - id: party
    keywords: [party, celebration]
  - id: cider
    keywords: [cider]
"""

SCHEMA = """
create table runs (run_id text primary key, scenario text, scenario_path text, scenario_yaml text, description text,
    seed integer, backend text, model text, tick_minutes integer, start_time text, ticks_planned integer,
    ticks_done integer, status text, message text, started_at text, finished_at text, agora_version text,
    schema_version integer);
create table agents (run_id text, agent_id text, name text, age integer, occupation text, home text,
    start_place text, source text, persona text);
create table places (run_id text, place_id text, name text, kind text, description text, objects text, x real,
    y real);
create table ticks (run_id text, tick integer, sim_time text, wall_s real, llm_calls integer, llm_s real,
    prompt_tokens integer, completion_tokens integer, parse_failures integer, fallbacks integer, cache_hits integer,
    batches integer, deciding_agents integer);
create table agent_states (run_id text, tick integer, sim_time text, agent_id text, place text, status text,
    action text, destination text, conversation_id integer);
create table events (id integer primary key, run_id text, tick integer, sim_time text, agent_id text, place text,
    kind text, text text, data text);
create table memories (id integer primary key, run_id text, tick integer, sim_time text, agent_id text, kind text,
    text text, importance real, evidence text, last_accessed text, depth integer);
create table conversations (id integer primary key, run_id text, place text, participants text,
    started_tick integer, started_at text, ended_tick integer, ended_at text, turns integer, end_reason text);
create table utterances (id integer primary key, run_id text, conversation_id integer, tick integer,
    sim_time text, turn integer, speaker_id text, listener_id text, text text, llm_call_id integer);
create table llm_calls (id integer primary key, run_id text, tick integer, sim_time text, agent_id text,
    purpose text, backend text, model text, attempt integer, seed integer, temperature real, max_tokens integer,
    messages text, json_schema text, completion text, finish_reason text, parse_ok integer, parse_error text,
    fallback integer, cache_hit integer, prompt_tokens integer, completion_tokens integer, latency_s real);
create table relationships (run_id text, tick integer, sim_time text, agent_id text, other_id text,
    conversations integer, sentiment real, view text);
create table probes (id integer primary key, run_id text, tick integer, sim_time text, agent_id text,
    question text, answer text, ok integer, llm_call_id integer);
create table retrievals (id integer primary key, run_id text, tick integer, sim_time text, agent_id text,
    purpose text, query text, results text);
create table inbox (id integer primary key, run_id text, agent_id text, text text, created_at text, sender text,
    delivered_tick integer, delivered_at text);
create table resume_state (run_id text primary key, tick integer, scenario text, state text, resumes integer,
    updated_at text);
"""


def make_run_db(run_dir: Path) -> Path:
    """Write the tiny run into ``run_dir/run.db`` (created) and return the run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(run_dir / "run.db")
    with con:
        con.executescript(SCHEMA)
        con.execute("insert into runs values (?, 'tiny', 'tiny.yaml', ?, '', 7, 'scripted', 'scripted-v1', 10, "
                    "'2023-02-13 07:00', 4, 4, 'finished', null, '2026-01-01T07:00:00', '2026-01-01T07:01:00', "
                    "'0.1.0', 3)", (RUN_ID, SCENARIO_YAML))
        scenario = {"path": "tiny.yaml", "scenario": {"name": "tiny", "topics": TOPICS, "personas": []},
                    "people": [], "source_text": SCENARIO_YAML}
        con.execute("insert into resume_state values (?, 3, ?, null, 0, '')", (RUN_ID, json.dumps(scenario)))
        con.executemany("insert into agents values (?, ?, ?, 30, 'tester', 'home', 'cafe', 'tiny.yaml', '{}')",
                        [(RUN_ID, a, name) for a, name in PEOPLE.items()])
        con.execute("insert into places values (?, 'cafe', 'The Cafe', 'cafe', '', '[]', 0, 0)", (RUN_ID,))
        con.executemany("insert into ticks values (?, ?, ?, 2.0, 1, 0.5, 10, 5, 0, 0, 0, 1, 1)",
                        [(RUN_ID, t, when) for t, when in enumerate(TIMES)])
        con.executemany("insert into agent_states values (?, ?, ?, ?, 'cafe', 'idle', 'sipping tea', null, null)",
                        [(RUN_ID, t, when, a) for t, when in enumerate(TIMES) for a in PEOPLE])
        rel = [(0, "ann", "bob"), (0, "ann", "zed"), (0, "ann", "ann"),
               (2, "bob", "ann"), (2, "cat", "dan"), (2, "dan", "cat"), (2, "ann", "bob"),
               (3, "ann", "cat")]
        con.executemany("insert into relationships values (?, ?, ?, ?, ?, 0, 0.0, 'a view')",
                        [(RUN_ID, t, TIMES[t], a, b) for t, a, b in rel])
        convs = [(1, '["ann", "bob"]', 1), (2, '["cat", "dan"]', 3), (3, '["ann", "bob", "cat"]', 0),
                 (4, "not json", 0)]
        con.executemany("insert into conversations values (?, ?, 'cafe', ?, ?, ?, null, null, 2, null)",
                        [(cid, RUN_ID, who, t, TIMES[t]) for cid, who, t in convs])
        con.executemany("insert into utterances values (?, ?, 1, 1, ?, ?, ?, ?, ?, null)", [
            (1, RUN_ID, TIMES[1], 0, "ann", "bob", "Hello Bob."), (2, RUN_ID, TIMES[1], 1, "bob", "ann", "Hi Ann.")])
        memories = [
            (0, "ann", "seed", "Ann is planning a party at the cafe."),  # a seed memory: not awareness
            (1, "bob", "utterance", "Ann said there is a PARTY tonight."),
            (2, "bob", "thought", "A celebration! I should bring apples."),  # later: bob stays aware from tick 1
            (2, "cat", "observation", "Cat sees a celebration poster."),
            (3, "zed", "observation", "Zed heard about the party."),  # not a person of the run
            (3, "dan", "observation", "Dan drinks coffee."),
        ]
        con.executemany("insert into memories (run_id, tick, sim_time, agent_id, kind, text, importance) "
                        "values (?, ?, ?, ?, ?, ?, 3)", [(RUN_ID, t, TIMES[t], a, k, x) for t, a, k, x in memories])
        calls = [(0, "ann", 1, 0, 0, 10, 5, 0.5), (1, "ann", 0, 1, 0, 20, 10, 1.0), (1, "bob", 1, 0, 1, 30, 7, 0.01)]
        con.executemany("insert into llm_calls (run_id, tick, sim_time, agent_id, purpose, parse_ok, fallback, "
                        "cache_hit, prompt_tokens, completion_tokens, latency_s) values (?, ?, ?, ?, 'plan', ?, ?, ?, "
                        "?, ?, ?)", [(RUN_ID, t, TIMES[t], a, *rest) for t, a, *rest in calls])
        con.execute("insert into probes values (1, ?, 3, ?, 'bob', 'Any plans tonight?', 'The party!', 1, null)",
                    (RUN_ID, TIMES[3]))
        con.execute("insert into retrievals values (1, ?, 1, ?, 'bob', 'plan', 'the party', '[]')",
                    (RUN_ID, TIMES[1]))
    con.close()
    return run_dir


FACTS = [{"id": "party", "text": "Ann is throwing a party at the cafe.",
          "details": [{"name": "place", "kind": "place", "value": "cafe", "aliases": []},
                      {"name": "day", "kind": "date", "value": "2023-02-14", "aliases": []},
                      {"name": "time", "kind": "time", "value": "17:00", "aliases": []}]},
         {"id": "cider", "text": "There is cider at the market.", "details": []}]
FACT_ROWS = [  # tick, agent, source, from, utterance, declared, kept, lost, changed
    (0, "ann", "whispered", None, None, 1, 3, 0, 0),
    (1, "bob", "heard", "ann", 1, 0, 2, 1, 0),
    (1, "ann", "said", None, 1, 0, 2, 1, 0),
    (2, "cat", "heard", "bob", None, 0, 1, 1, 1),
    (2, "dan", "planned", None, None, 0, 0, 3, 0),
    (3, "dan", "heard", "cat", None, 0, 0, 3, 0),
    (3, "dan", "recapped", "cat", None, 0, 0, 3, 0),
    (3, "zed", "heard", "dan", None, 0, 0, 3, 0),
]
PROBES = [("bob", "right", 1), ("cat", "wrong", 1), ("dan", "missed", 1)]


def make_traced_run_db(run_dir: Path) -> Path:
    """The tiny run as schema 4 records it: provenance for the facts above (see the module's docstring)."""
    make_run_db(run_dir)
    con = sqlite3.connect(run_dir / "run.db")
    with con:
        con.execute("update runs set schema_version = 4")
        scenario = {"path": "tiny.yaml", "scenario": {"name": "tiny", "topics": TOPICS, "facts": FACTS,
                                                      "personas": []}, "people": [], "source_text": SCENARIO_YAML}
        con.execute("update resume_state set scenario = ?", (json.dumps(scenario),))
        con.execute("create table fact_memories (id integer primary key, run_id text, tick integer, sim_time text, "
                    "memory_id integer, agent_id text, fact_id text, source text, from_agent text, "
                    "utterance_id integer, conversation_id integer, declared integer, similarity real, details text, "
                    "kept integer, lost integer, changed integer)")
        con.executemany(
            "insert into fact_memories (run_id, tick, sim_time, memory_id, agent_id, fact_id, source, from_agent, "
            "utterance_id, declared, kept, lost, changed) values (?, ?, ?, ?, ?, 'party', ?, ?, ?, ?, ?, ?, ?)",
            [(RUN_ID, t, TIMES[t], 100 + i, a, src, frm, utt, dec, k, lo, ch)
             for i, (t, a, src, frm, utt, dec, k, lo, ch) in enumerate(FACT_ROWS)])
        for column in ("fact_id text", "aware integer", "verdict text", "details text"):
            con.execute(f"alter table probes add column {column}")
        con.executemany("insert into probes (run_id, tick, sim_time, agent_id, question, answer, ok, fact_id, aware, "
                        "verdict) values (?, 3, ?, ?, 'Party?', 'An answer', 1, 'party', ?, ?)",
                        [(RUN_ID, TIMES[3], a, aware, v) for a, v, aware in PROBES])
    con.close()
    return run_dir
