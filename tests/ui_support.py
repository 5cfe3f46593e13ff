"""Fixtures and helpers for the viewer's tests: real runs (scripted backend) and AppTest pages.

Import the ``*_fixture`` functions into a test module; pytest then finds the fixtures
there under their names (``finished_run``, ``older_run``, ``newer_run``, ``cascade_run``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the viewer lives in ui/, beside the engine
    sys.path.insert(0, str(ROOT))

APP = ROOT / "ui" / "app.py"
TICKS = 12


def build_run(loaded: Any, out: Path, ticks: int = TICKS, finish: bool = True, probes: bool = True) -> Any:
    """A real run of ``loaded`` on the scripted backend; returns the runner's Run."""
    from simulation.testing import ScriptedBackend

    from simulation import Simulation

    run = Simulation.from_scenario(loaded, backend=ScriptedBackend(), out=out, ticks=ticks)
    for _ in range(run.ticks if finish else 0):
        run.model.step()
    if finish:
        if probes:
            run.model.ask_probes()
        run.store.replace_behaviour(run.behaviour())  # as a finished run keeps them (Simulation.run)
        run.close("finished")
    return run


@pytest.fixture(scope="session", name="finished_run")
def finished_run_fixture(tmp_path_factory: pytest.TempPathFactory, flagship: Any) -> Path:
    """The run directory of a finished 12-tick flagship run (with probe answers)."""
    run = build_run(flagship, tmp_path_factory.mktemp("ui") / "runs")
    run.store.close()
    return run.run_dir


def copy_run(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    shutil.copy(source / "run.db", target / "run.db")
    return target


LATER_TABLES = ("retrievals", "relationships", "schedules", "embeddings", "rewards", "evaluations", "fact_memories",
                "behaviour")
LATER_COLUMNS = {
    "memories": ("last_accessed", "depth", "source", "from_agent", "utterance_id", "event_id", "conversation_id"),
    "probes": ("fact_id", "aware", "verdict", "details"),
}


@pytest.fixture(scope="session", name="older_run")
def older_run_fixture(tmp_path_factory: pytest.TempPathFactory, finished_run: Path) -> Path:
    """A copy of ``finished_run`` as the foundation recorded it: without the tables and memory and
    probe columns later issues add, provenance included (the viewer must leave those sections
    out)."""
    target = copy_run(finished_run, tmp_path_factory.mktemp("ui-older") / "runs" / (finished_run.name + "-older"))
    con = sqlite3.connect(target / "run.db")
    with con:
        for table in LATER_TABLES:
            con.execute(f"drop table if exists [{table}]")
        for table, later in LATER_COLUMNS.items():
            for index, in con.execute("select name from sqlite_master where type = 'index' and tbl_name = ? "
                                      "and sql is not null", (table,)).fetchall():
                con.execute(f"drop index [{index}]")  # an index on a later column would block dropping it
            columns = {r[1] for r in con.execute(f"pragma table_info({table})")}
            for column in later:
                if column in columns:
                    con.execute(f"alter table {table} drop column [{column}]")
        con.execute("delete from memories where kind = 'reflection'")
    con.close()
    return target


@pytest.fixture(scope="session", name="newer_run")
def newer_run_fixture(tmp_path_factory: pytest.TempPathFactory, finished_run: Path) -> Path:
    """A copy of ``finished_run`` with the tables later issues add (reflections, retrievals,
    relationships, rewards, evaluations) holding known rows."""
    target = copy_run(finished_run, tmp_path_factory.mktemp("ui-newer") / "runs" / (finished_run.name + "-newer"))
    add_newer_tables(target / "run.db")
    return target


def add_newer_tables(path: Path) -> None:
    """Create what is missing of the later layout, and replace relationships, rewards and
    evaluations with known rows (a reflection and a retrieval are added as the newest)."""
    con = sqlite3.connect(path)
    with con:
        run_id = con.execute("select run_id from runs").fetchone()[0]
        last = con.execute("select max(tick), max(sim_time) from ticks").fetchone()
        columns = {r[1] for r in con.execute("pragma table_info(memories)")}
        for column, kind in (("last_accessed", "text"), ("depth", "integer")):
            if column not in columns:
                con.execute(f"alter table memories add column {column} {kind}")
        con.execute("create table if not exists retrievals (id integer primary key, run_id text not null, "
                    "tick integer, sim_time text, agent_id text, purpose text, query text, results text)")
        con.execute("create table if not exists relationships (run_id text not null, tick integer, sim_time text, "
                    "agent_id text, other_id text, conversations integer, sentiment real, view text)")
        con.execute("create table if not exists rewards (id integer primary key, run_id text not null, agent_id text, "
                    "tick integer, source_table text, source_id integer, scores text, reward real, advantage real, "
                    "judge_model text)")
        con.execute("create table if not exists evaluations (id integer primary key, run_id text not null, "
                    "agent_id text, suite text, metric text, value real, details text, created_at text)")
        for table in ("relationships", "rewards", "evaluations"):
            con.execute(f"delete from {table}")
        evidence = [r[0] for r in con.execute(
            "select id from memories where agent_id = 'isabella_rodriguez' and kind != 'seed' order by id limit 2")]
        new_id = con.execute("select max(id) from memories").fetchone()[0] + 1
        con.execute("insert into memories (id, run_id, tick, sim_time, agent_id, kind, text, importance, evidence, "
                    "depth) values (?, ?, ?, ?, 'isabella_rodriguez', 'reflection', ?, 8, ?, 1)",
                    (new_id, run_id, last[0], last[1], "Isabella reflects that a party could bring the town together",
                     json.dumps(evidence)))
        results = [{"memory_id": m, "score": 2.0 - i * 0.5, "recency": 0.9 - i * 0.2, "importance": 0.5,
                    "relevance": 0.6 - i * 0.3} for i, m in enumerate(evidence)]
        retrieval_id = (con.execute("select max(id) from retrievals").fetchone()[0] or 0) + 1
        con.execute("insert into retrievals (id, run_id, tick, sim_time, agent_id, purpose, query, results) "
                    "values (?, ?, ?, ?, 'isabella_rodriguez', 'react', 'who should hear about the party', ?)",
                    (retrieval_id, run_id, last[0], last[1], json.dumps(results)))
        con.executemany("insert into relationships (run_id, tick, sim_time, agent_id, other_id, conversations, "
                        "sentiment, view) values (?, ?, '', ?, ?, ?, ?, ?)", [
                            (run_id, 2, "isabella_rodriguez", "walter_hughes", 1, 0.2, "Walter seems busy"),
                            (run_id, 8, "isabella_rodriguez", "walter_hughes", 2, 0.6, "Walter likes the party idea"),
                            (run_id, 8, "walter_hughes", "isabella_rodriguez", 2, 0.4,
                             "Isabella is organising a party"),
                            (run_id, 9, "grace_okafor", "daniel_okafor", 1, -0.5, "Dad worries too much"),
                        ])
        con.executemany("insert into rewards (id, run_id, agent_id, tick, source_table, source_id, scores, reward, "
                        "advantage, judge_model) values (?, ?, ?, ?, 'utterances', 1, '{}', ?, 0, 'judge-v1')", [
                            (1, run_id, "isabella_rodriguez", 2, 0.25), (2, run_id, "isabella_rodriguez", 8, 0.75),
                            (3, run_id, "walter_hughes", 8, -0.5),
                        ])
        con.executemany("insert into evaluations (id, run_id, agent_id, suite, metric, value, details, created_at) "
                        "values (?, ?, ?, 'fidelity', ?, ?, '{}', ?)", [
                            (1, run_id, "isabella_rodriguez", "consistency", 0.5, "2026-01-01T00:00:00"),
                            (2, run_id, "isabella_rodriguez", "consistency", 0.875, "2026-01-02T00:00:00"),
                            (3, run_id, "walter_hughes", "consistency", 0.625, "2026-01-02T00:00:00"),
                        ])
    con.close()


CASCADE = [
    # (agent, tick, source, from_agent, details): how each learned "party" (see cascade_run)
    ("isabella_rodriguez", 0, "whispered", None, {"place": "kept", "day": "kept", "time": "kept"}),
    ("theo_lindqvist", 2, "planned", None, {"place": "kept", "day": "lost", "time": "lost"}),
    ("walter_hughes", 3, "heard", "isabella_rodriguez", {"place": "kept", "day": "kept", "time": "lost"}),
    ("grace_okafor", 6, "heard", "walter_hughes", {"place": "changed", "day": "kept", "time": "lost"}),
    ("daniel_okafor", 8, "heard", "theo_lindqvist", {"place": "kept", "day": "lost", "time": "lost"}),
    ("samira_haddad", 9, "perceived", "isabella_rodriguez", {"place": "kept", "day": "lost", "time": "lost"}),
]
"""Isabella is whispered the party (a root) and tells Walter, who tells Grace (depth 2, changing
the place); Theo makes a party up in his plan (invented; never aware) and tells Daniel (a teller
who was not aware); Samira sees Isabella (a root). Fiona and Margaret never hear of it."""


@pytest.fixture(scope="session", name="cascade_run")
def cascade_run_fixture(tmp_path_factory: pytest.TempPathFactory, finished_run: Path) -> Path:
    """A copy of ``finished_run`` whose ``fact_memories`` hold exactly ``CASCADE`` for the fact
    ``party`` (nothing for ``market``), and no stored behaviour (the page computes it)."""
    target = copy_run(finished_run, tmp_path_factory.mktemp("ui-cascade") / "runs" / (finished_run.name + "-cascade"))
    con = sqlite3.connect(target / "run.db")
    with con:
        run_id = con.execute("select run_id from runs").fetchone()[0]
        con.execute("delete from fact_memories")
        con.execute("delete from behaviour")
        times = dict(con.execute("select tick, sim_time from ticks"))
        for n, (agent, tick, source, teller, details) in enumerate(CASCADE, start=1):
            memory = con.execute("select min(id) from memories where agent_id = ?", (agent,)).fetchone()[0]
            statuses = list(details.values())
            con.execute("insert into fact_memories (id, run_id, tick, sim_time, memory_id, agent_id, fact_id, source, "
                        "from_agent, declared, similarity, details, kept, lost, changed) "
                        "values (?, ?, ?, ?, ?, ?, 'party', ?, ?, ?, 0.8, ?, ?, ?, ?)",
                        (n, run_id, tick, times[tick], memory, agent, source, teller, int(source == "whispered"),
                         json.dumps(details), statuses.count("kept"), statuses.count("lost"),
                         statuses.count("changed")))
    con.close()
    return target


def app(monkeypatch: pytest.MonkeyPatch, *named: Path, runs_dir: Path | None = None) -> Any:
    """An AppTest of the viewer on ``named`` runs (and a runs folder)."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("AGORA_UI_RUNS", os.pathsep.join(str(p) for p in named))
    monkeypatch.setenv("AGORA_UI_RUNS_DIR", str(runs_dir or (named[0].parent if named else ROOT / "no-runs-here")))
    return AppTest.from_file(APP, default_timeout=60)


def open_page(at: Any, name: str) -> Any:
    """Run the app on page ``name`` (town, people, ...) and fail on any exception shown."""
    if name != "town":
        at.switch_page(f"views/{name}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def text_of(at: Any) -> str:
    """All text a person would read on the page: markdown, captions, alerts, headings, metrics,
    expander labels, tables and plotly figures (as JSON)."""
    parts: list[str] = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "header", "subheader", "title"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label}: {m.value}" for m in at.metric]
    parts += [e.label for e in at.expander]
    parts += [d.value.to_csv(index=False) for d in at.dataframe]
    parts += [e.proto.spec for e in at.get("plotly_chart")]
    parts += [e.value for e in at.get("page_link")]
    return "\n".join(parts)


def figures(at: Any) -> list[dict[str, Any]]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def array(value: Any) -> list[Any]:
    """A plotly data array as a list (plotly sends numeric arrays as base64 typed arrays)."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"])).tolist()
    return list(value)
