"""simulation.rundb: run.db opened read-only and the shared metrics, on a tiny run.db written by
hand (tests/rundb_support.py has the numbers worked out), plus the rule that the package loads
nothing but the standard library."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rundb_support import PEOPLE, RUN_ID, TIMES, make_run_db, make_traced_run_db

from simulation.rundb import RunDB, RunUnreadable, connect_ro, db_path, facts, metrics, table_names

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run_db(tmp_path_factory.mktemp("rundb") / "tiny")


@pytest.fixture
def con(tiny: Path):
    con = connect_ro(db_path(tiny))
    yield con
    con.close()


def without(tiny: Path, target: Path, *tables: str) -> Path:
    """A copy of the tiny run without ``tables`` (an older layout)."""
    target.mkdir()
    (target / "run.db").write_bytes((tiny / "run.db").read_bytes())
    raw = sqlite3.connect(target / "run.db")
    with raw:
        for table in tables:
            raw.execute(f"drop table [{table}]")
    raw.close()
    return target


# ---------------------------------------------------------------------- opening

def test_connect_ro_refuses_writes_and_never_creates_a_file(tiny, tmp_path):
    con = connect_ro(tiny / "run.db")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        con.execute("delete from agents")
    assert con.execute("select count(*) from agents").fetchone()[0] == 4
    assert con.execute("select name from agents order by agent_id").fetchone()["name"] == "Ann Archer"
    con.close()
    with pytest.raises(sqlite3.OperationalError):
        connect_ro(tmp_path / "nothing" / "run.db")
    assert not (tmp_path / "nothing").exists()


def test_run_db_checks_before_reading(tiny, tmp_path):
    with RunDB(tiny) as db:
        assert db.run_id == RUN_ID and db.run["scenario"] == "tiny" and db.has("memories", "depth")
        assert not db.has("rewards") and db.one("select count(*) from ticks") == 4
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "run.db").write_bytes(b"")
    with pytest.raises(RunUnreadable, match="is empty"):
        RunDB(tmp_path / "empty")
    with pytest.raises(RunUnreadable, match="No run.db in"):
        RunDB(tmp_path)
    with pytest.raises(RunUnreadable, match="lacks the table"):
        RunDB(without(tiny, tmp_path / "old", "llm_calls"))


def test_db_path_takes_a_run_directory_or_the_file():
    assert db_path(Path("runs/x")) == Path("runs/x/run.db") and db_path("runs/x/run.db") == Path("runs/x/run.db")


# ---------------------------------------------------------------------- counts and the LLM

def test_people_and_counts(con, tiny, tmp_path):
    assert metrics.people(con, RUN_ID) == PEOPLE
    assert metrics.count(con, RUN_ID, "conversations") == 4 and metrics.count(con, RUN_ID, "utterances") == 2
    assert metrics.count(con, RUN_ID, "rewards") == 0, "a table the run does not have counts nothing"


def test_llm_totals(con):
    t = metrics.llm_totals(con, RUN_ID)
    assert (t.calls, t.prompt_tokens, t.completion_tokens, t.tokens) == (3, 60, 22, 82)
    assert t.generated_tokens == 15, "the cache hit's 7 completion tokens were not generated"
    assert (t.cache_hits, t.parse_failures, t.fallbacks) == (1, 1, 1)
    assert t.latency_s == pytest.approx(1.51) and t.mean_latency_s == pytest.approx(1.51 / 3)
    assert metrics.llm_by_agent(con, RUN_ID) == {"ann": metrics.AgentLLM(2, 45), "bob": metrics.AgentLLM(1, 37)}


def test_llm_totals_of_an_empty_run_and_a_run_before_cache_hits(tmp_path):
    path = tmp_path / "run.db"
    raw = sqlite3.connect(path)
    raw.execute("create table llm_calls (run_id text, parse_ok integer, fallback integer, prompt_tokens integer, "
                "completion_tokens integer, latency_s real)")
    raw.close()
    con = connect_ro(path)
    t = metrics.llm_totals(con, "r")
    assert t == metrics.LLMTotals(0, 0, 0, 0, 0, 0, 0, 0.0) and t.mean_latency_s is None
    con.close()


# ---------------------------------------------------------------------- facts (provenance)

@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return make_traced_run_db(tmp_path_factory.mktemp("traced") / "run")


def test_facts_come_from_the_scenario_as_run(traced, tiny):
    con = connect_ro(traced / "run.db")
    assert list(facts.facts(con, RUN_ID)) == ["party", "cider"] and facts.traced(con)
    con.close()
    con = connect_ro(tiny / "run.db")  # recorded before provenance: no facts, nobody aware
    assert facts.facts(con, RUN_ID) == {} and not facts.traced(con) and facts.first_aware(con, RUN_ID) == {}
    con.close()


def test_awareness_follows_provenance_not_keywords(traced):
    con = connect_ro(traced / "run.db")
    learned = facts.first_aware(con, RUN_ID)
    assert learned["cider"] == []
    party = {i.agent_id: i for i in learned["party"]}
    assert list(party) == ["ann", "bob", "cat", "dan"]  # zed is no person of the run; ann's "said" is not news
    assert [(party[a].source, party[a].parent, party[a].depth) for a in party] == [
        ("whispered", None, 0), ("heard", "ann", 1), ("heard", "bob", 2), ("heard", "cat", 3)]
    assert party["bob"].utterance_id == 1 and all(i.teller_aware for i in party.values())
    assert [c[2] for c in facts.awareness_curve(con, RUN_ID)["party"]] == [1, 2, 3, 4]
    s = facts.spread(con, RUN_ID)["party"]
    assert (s.aware, s.told, s.roots, s.depth, s.distorted, s.invented) == (4, 3, 1, 3, 1, 1)
    assert s.distortion == pytest.approx(1 / 3) and s.retention == pytest.approx(3 / 9)
    assert facts.probe_verdicts(con, RUN_ID) == {"party": {"right": 1, "wrong": 1, "missed": 1}}
    con.close()


def test_behaviour_of_the_tiny_run(traced):
    from simulation.rundb.behaviour import behaviour

    con = connect_ro(traced / "run.db")
    b = behaviour(con, RUN_ID)
    con.close()
    assert b["facts.party.aware_share"] == 1.0 and b["facts.party.cascade_depth"] == 3.0
    assert b["facts.party.first_told_hour"] == pytest.approx(10 / 60)
    assert b["probes.party.right_share"] == pytest.approx(1 / 3) and b["probes.party.hallucination"] is None
    # everyone idle at the cafe every tick: the 6 pairs meet once, at tick 0
    assert b["talk.encounters_per_agent_hour"] == pytest.approx(2 * 6 / 4 / (40 / 60))
    assert b["talk.conversations_per_encounter"] == pytest.approx(4 / 6)
    assert b["relationships.density_start"] == pytest.approx(1 / 6) and b["relationships.density_end"] == 0.5
    assert b["llm.fallback_share.plan"] == pytest.approx(1 / 3)
    # importance 3 each: bob 2 memories, cat 1, dan 1 (ann's seed and zed, no person of the run, left out)
    assert b["memory.importance_per_agent_hour"] == pytest.approx(4 * 3 / 4 / (40 / 60))
    assert b["memory.insights"] == 0 and b["memory.reflected_share"] == 0


def test_insights_and_who_reflected_count_people_of_the_run(traced, tmp_path):
    from simulation.rundb.behaviour import behaviour

    copy = tmp_path / "run.db"
    copy.write_bytes((traced / "run.db").read_bytes())
    raw = sqlite3.connect(copy)
    with raw:
        raw.executemany("insert into memories (run_id, tick, sim_time, agent_id, kind, text, importance) "
                        "values (?, 3, ?, ?, 'reflection', ?, 8)",
                        [(RUN_ID, TIMES[3], a, t) for a, t in [("bob", "Ann likes parties."), ("bob", "I like Ann."),
                                                               ("cat", "Bob talks a lot."), ("zed", "Nobody.")]])
    raw.close()
    con = connect_ro(copy)
    b = behaviour(con, RUN_ID)
    con.close()
    assert b["memory.insights"] == 3 and b["memory.reflected_share"] == 0.5
    assert b["memory.importance_per_agent_hour"] == pytest.approx(4 * 3 / 4 / (40 / 60))  # insights do not count


def test_a_line_with_a_raw_control_character_is_measured_as_it_was_answered(tmp_path):
    """A small model wrote a real tab inside its line; the client took it (json's strict=False), so
    the behaviour metrics read it the same way instead of failing the run after its probes (a
    25-person benchmark seed ended "failed" on exactly this)."""
    from simulation.rundb.behaviour import behaviour

    run = make_traced_run_db(tmp_path / "run")
    con = sqlite3.connect(run / "run.db")
    with con:
        con.execute("insert into llm_calls (id, run_id, tick, agent_id, purpose, completion, parse_ok, fallback) "
                    "values (99, ?, 1, 'ann', 'utterance', ?, 1, 0)", (RUN_ID, '{"say": "Hello\tBob, come by."}'))
        con.execute("update utterances set llm_call_id = 99 where id = 1")
    con.close()
    with pytest.raises(json.JSONDecodeError):
        json.loads('{"say": "Hello\tBob, come by."}')  # what failed: strict JSON refuses the raw tab
    con = connect_ro(run / "run.db")
    b = behaviour(con, RUN_ID)
    con.close()
    assert b["talk.echo_share"] == 1.0, "the stored line (Hello Bob.) is not the answer's words: counted as repaired"


# ---------------------------------------------------------------------- who knows whom

def test_density_counts_pairs_who_know_each_other(con):
    series = metrics.knows_by_tick(con, RUN_ID)
    assert [(k.tick, k.sim_time, k.people, k.pairs) for k in series] == [
        (0, TIMES[0], 4, 1), (1, TIMES[1], 4, 1), (2, TIMES[2], 4, 2), (3, TIMES[3], 4, 3)]
    assert [k.density for k in series] == pytest.approx([1 / 6, 1 / 6, 1 / 3, 1 / 2])
    assert metrics.density_by_tick(con, RUN_ID) == [(k.tick, k.sim_time, k.density) for k in series]
    assert metrics.graph_source(con) == "relationships"


def test_density_falls_back_to_who_has_talked(tiny, tmp_path):
    con = connect_ro(without(tiny, tmp_path / "older", "relationships") / "run.db")
    assert metrics.graph_source(con) == "conversations"
    assert [k.pairs for k in metrics.knows_by_tick(con, RUN_ID)] == [0, 1, 1, 2]
    assert metrics.conversation_pairs(con, RUN_ID, until_tick=2) == [("ann", "bob", 1)]
    con.close()


def test_density_formula_matches_the_live_social_graph():
    from simulation.world.relationships import SocialGraph

    assert metrics.pair_density(4, 3) == 0.5 and metrics.pair_density(1, 0) == 0.0 and metrics.pair_density(0, 0) == 0
    assert metrics.knows_pairs([("a", "b"), ("b", "a"), ("a", "a"), ("a", "x")], ["a", "b"]) == {frozenset("ab")}
    g = SocialGraph(list(PEOPLE))
    g.seed("ann", "bob", "")
    g.after_conversation("bob", "ann", 0.1, "")
    g.after_conversation("cat", "dan", 0.1, "")
    assert g.density() == pytest.approx(2 / 6)


# ---------------------------------------------------------------------- the readers agree

def test_cli_summary_reads_the_shared_metrics(tiny):
    from simulation.rundb.summary import summarize

    s = summarize(tiny / "run.db")
    assert s.density == pytest.approx((1 / 6, 1 / 2))
    assert s.facts == {}  # recorded before provenance
    assert (s.llm_calls, s.prompt_tokens, s.completion_tokens, s.generated_tokens) == (3, 60, 22, 15)
    assert (s.cache_hits, s.parse_failures, s.fallbacks, s.llm_seconds) == (1, 1, 1, pytest.approx(1.51))
    assert (s.conversations, s.utterances, s.retrievals, s.ticks_done) == (4, 2, 1, 4)
    assert s.game_hours == pytest.approx(40 / 60)
    assert s.probes == [("Bob Baker", "Any plans tonight?", "The party!")]
    ann = next(a for a in s.agents if a.agent_id == "ann")
    assert (ann.llm_calls, ann.tokens, ann.place, ann.doing, ann.conversations) == (2, 45, "The Cafe", "sipping tea", 2)
    assert s.memory_kinds == {"observation": 3, "thought": 1, "utterance": 1}


def test_viewer_and_cli_summary_agree(tiny):
    if str(ROOT) not in sys.path:  # the viewer lives in ui/, beside the engine
        sys.path.insert(0, str(ROOT))
    from simulation.rundb.summary import summarize
    from ui import queries as q
    from ui.db import RunDB as ViewerDB

    s = summarize(tiny / "run.db")
    with ViewerDB(tiny) as db:
        density = q.density(db)
        assert (density["density"].iloc[0], density["density"].iloc[-1]) == pytest.approx(s.density)
        assert list(density["edges"]) == [1, 1, 2, 3]
        totals = q.llm_totals(db)
        assert (totals["calls"], totals["tokens"], totals["cache_hits"]) == (s.llm_calls, 82, s.cache_hits)
        row = q.summary(db)
        assert row["aware"] == {} and row["outcomes"] == "-"
        assert (row["conversations"], row["utterances"], row["probe answers"]) == (4, 2, 1)


# ---------------------------------------------------------------------- standard library only

def test_rundb_loads_only_the_standard_library():
    """``import simulation.rundb`` (and its metrics) must not load the engine or any third-party
    package: the viewer imports it, and it is what reading a run costs. The package's own
    ``__init__`` may load small modules of its own, but no third-party one either."""
    code = (
        "import json, sys\n"
        "start = set(sys.modules)\n"
        "import simulation\n"
        "bare = set(sys.modules)\n"
        "import simulation.rundb, simulation.rundb.metrics, simulation.rundb.connect\n"
        "def third_party(ms): return sorted(m for m in ms if m.split('.')[0] not in sys.stdlib_module_names\n"
        "                                   and m.split('.')[0] != 'simulation')\n"
        "print(json.dumps({'init': third_party(bare - start), 'rundb': third_party(set(sys.modules) - bare),\n"
        "                  'engine': sorted(m for m in set(sys.modules) - bare if m.split('.')[0] == 'simulation'\n"
        "                                   and not m.startswith('simulation.rundb'))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"init": [], "rundb": [], "engine": []}


def test_rundb_imports_nothing_of_the_engine():
    """Statically too: every import in simulation/rundb/ is the standard library or rundb itself."""
    import ast

    for path in sorted((ROOT / "simulation" / "rundb").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "__future__" or name.startswith("simulation.rundb") \
                    or name == "simulation.provenance.rules", f"{path.name} imports {name}"
    assert table_names  # re-exported for the readers
