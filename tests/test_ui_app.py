"""The viewer's pages (Streamlit AppTest) against real runs of the flagship on the scripted
backend, its read-only access to run.db, its one write (whispers), and `agora ui`."""

from __future__ import annotations

import json
import socket
import sqlite3
import urllib.request

import pytest
from conftest import agora
from ui_support import app, array, build_run, figures, open_page, text_of
from ui_support import (  # noqa: F401  (registers them)
    cascade_run_fixture,
    finished_run_fixture,
    newer_run_fixture,
    older_run_fixture,
)

from ui import queries as q
from ui.db import RunDB, RunUnreadable


def rows(run_dir, sql, params=()):
    con = sqlite3.connect(run_dir / "run.db")
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql, params)]
    finally:
        con.close()


# ---------------------------------------------------------------------- Town

def test_town_shows_everyone_at_the_latest_tick(monkeypatch, finished_run):
    at = open_page(app(monkeypatch, finished_run), "town")
    shown = text_of(at)
    assert "Tick 11 " in shown and "Mon 13 Feb 08:50" in shown
    states = rows(finished_run, "select s.*, a.name from agent_states s join agents a using (agent_id) where tick = 11")
    table = at.dataframe[0].value
    assert sorted(table["person"]) == sorted(s["name"] for s in states)
    assert dict(zip(table["person"], table["action"], strict=True)) == {s["name"]: s["action"] for s in states}
    town = figures(at)[0]
    places = next(t for t in town["data"] if t.get("name") == "places")
    assert "<b>Hobbs Cafe</b>" in places["text"]
    labels = [label for t in town["data"] if t.get("name") in ("acting", "idle", "walking", "talking", "sleeping")
              for label in t["text"]]
    assert len(labels) == 8 and any(label.startswith("Isabella · ") for label in labels)
    assert not at.toggle(key="town_live").value, "a finished run opens in replay mode"


def test_town_and_people_show_a_mood_where_the_run_recorded_one(monkeypatch, tmp_path, finished_run):
    """``cognition.moods``: the map's label and the People page say how a person feels."""
    from ui_support import copy_run

    run_dir = copy_run(finished_run, tmp_path / "moody")
    con = sqlite3.connect(run_dir / "run.db")
    with con:
        con.execute("update agent_states set mood = 'excited', valence = 0.6, arousal = 0.9 "
                    "where agent_id = 'isabella_rodriguez' and tick = 11")
    con.close()
    town = figures(open_page(app(monkeypatch, run_dir), "town"))[0]
    labels = [label for t in town["data"] if t.get("name") in ("acting", "idle", "walking", "talking", "sleeping")
              for label in t["text"]]
    assert any(label.startswith("Isabella (excited) · ") for label in labels)
    assert not any("(" in label.split(" · ")[0] for label in labels if not label.startswith("Isabella"))
    at = app(monkeypatch, run_dir)
    at.query_params["agent"] = "isabella_rodriguez"
    assert "Feels excited (valence +0.60, arousal +0.90" in text_of(open_page(at, "people")).replace("*", "")


def test_town_slider_replays_a_moment_with_its_conversation_link(monkeypatch, finished_run):
    talking = rows(finished_run, "select tick, conversation_id from utterances order by id limit 1")
    assert talking, "the scripted run has conversations"
    tick = talking[0]["tick"]
    at = open_page(app(monkeypatch, finished_run), "town")
    at.slider(key="town_tick").set_value(tick).run()
    shown = text_of(at)
    assert f"Tick {tick} " in shown
    town = figures(at)[0]
    link = f"conversation {talking[0]['conversation_id']}"
    assert any(t.get("name") == link for t in town["data"]), "partners in a conversation are linked"
    assert any(s.get("type") == "path" for s in town["layout"].get("shapes", []))
    said = rows(finished_run, "select text from utterances where tick = ?", (tick,))
    assert said and said[0]["text"].split(":")[0] in shown


def test_town_rings_a_happening_while_it_goes_on(monkeypatch, tmp_path, finished_run):
    """The party moved to 08:10-08:50 of the scripted run: the map rings Hobbs Cafe at 08:20, beside
    the market (08:00-12:00 in Johnson Park), and neither at 07:20."""
    from ui_support import copy_run

    target = copy_run(finished_run, tmp_path / "runs" / finished_run.name)
    con = sqlite3.connect(target / "run.db")
    with con:
        scenario = json.loads(con.execute("select scenario from resume_state").fetchone()[0])
        for fact in scenario["scenario"]["facts"]:
            if fact["id"] == "party":
                for d in fact["details"]:
                    d["value"] = {"date": "2023-02-13", "time": "08:10-08:50"}.get(d["kind"], d["value"])
        con.execute("update resume_state set scenario = ?", (json.dumps(scenario),))
    con.close()
    at = open_page(app(monkeypatch, target), "town")
    at.slider(key="town_tick").set_value(8).run()  # 08:20
    ring = next(t for t in figures(at)[0]["data"] if t.get("name") == "happening now")
    assert sorted(ring["text"]) == ["<b>market</b> 08:00-12:00", "<b>party</b> 08:10-08:50"]
    assert "party at Hobbs Cafe, 08:10-08:50" in text_of(at)
    at.slider(key="town_tick").set_value(2).run()  # 07:20: not yet
    assert not [t for t in figures(at)[0]["data"] if t.get("name") == "happening now"]


def test_town_follows_a_run_being_written(monkeypatch, tmp_path, flagship):
    run = build_run(flagship, tmp_path / "runs", ticks=6, finish=False)
    run.model.step()
    at = open_page(app(monkeypatch, run.run_dir), "town")
    assert at.toggle(key="town_live").value, "a running run opens live"
    assert "Tick 0 " in text_of(at)
    run.model.step()
    run.model.step()
    at.run()
    assert "Tick 2 " in text_of(at) and "3 of 6 ticks done" in text_of(at)


# ---------------------------------------------------------------------- People

def test_people_shows_persona_plan_doing_and_searchable_memories(monkeypatch, finished_run):
    at = app(monkeypatch, finished_run)
    at.query_params["agent"] = "isabella_rodriguez"
    open_page(at, "people")
    shown = text_of(at)
    assert "Isabella Rodriguez" in [s.value for s in at.subheader]
    assert "owner of Hobbs Cafe" in shown and "Plan for 2023-02-13" in shown
    state = rows(finished_run, "select action from agent_states where agent_id = 'isabella_rodriguez' and tick = 11")[0]
    assert state["action"] in shown
    memories = at.dataframe[0].value
    count = rows(finished_run, "select count(*) n from memories where agent_id = 'isabella_rodriguez'")[0]["n"]
    assert len(memories) == count

    at.text_input(key="people_search").input("party").run()
    found = at.dataframe[0].value
    assert 0 < len(found) < count and all("party" in t.lower() for t in found["text"])


def test_people_leaves_out_sections_the_run_has_no_tables_for(monkeypatch, older_run):
    at = open_page(app(monkeypatch, older_run), "people")
    assert [t.label for t in at.tabs] == ["Memory stream"]
    assert "importance" in at.dataframe[0].value.columns and "depth" not in at.dataframe[0].value.columns


def test_people_shows_retrieval_reflections_and_relationships_when_recorded(monkeypatch, newer_run):
    at = app(monkeypatch, newer_run)
    at.query_params["agent"] = "isabella_rodriguez"
    open_page(at, "people")
    assert [t.label for t in at.tabs] == ["Memory stream", "Last retrieval", "Reflections", "Relationships"]
    shown = text_of(at)
    assert "who should hear about the party" in shown
    assert "Isabella reflects that a party could bring the town together" in shown
    evidence = json.loads(rows(newer_run, "select evidence from memories where kind = 'reflection'")[0]["evidence"])
    links = {e.value.split(" ")[0] for e in at.get("page_link")}
    assert {f"#{i}" for i in evidence} <= links, "each cited memory is linked"
    assert "Walter likes the party idea" in shown and "Walter seems busy" not in shown, "the latest view by then"
    scores = figures(at)[-2]
    assert {t["name"] for t in scores["data"]} >= {"recency", "importance", "relevance", "score"}

    at.slider(key="people_tick").set_value(5).run()
    shown = text_of(at)
    assert "Walter seems busy" in shown and "Walter likes the party idea" not in shown

    at.query_params["memory"] = str(evidence[0])  # following an evidence link
    at.run()
    assert list(at.dataframe[0].value["id"]) == [evidence[0]]


# ---------------------------------------------------------------------- Conversations

def test_conversations_shows_transcripts_and_filters(monkeypatch, finished_run):
    convs = rows(finished_run, "select * from conversations order by id")
    first = rows(finished_run, "select * from utterances where conversation_id = ? order by turn",
                 (convs[0]["id"],))
    at = open_page(app(monkeypatch, finished_run), "conversations")
    shown = text_of(at)
    assert f"{len(convs)} conversation(s) match" in shown
    assert first[-1]["text"] in shown
    assert f", {first[1]['aim']}): " in shown, "each line says what move it made"
    speakers = {json.loads(c["participants"])[0] for c in convs}

    nobody = next(a["agent_id"] for a in rows(finished_run, "select agent_id from agents")
                  if not any(a["agent_id"] in json.loads(c["participants"]) for c in convs))
    at.multiselect(key="conv_people").set_value([nobody]).run()
    assert "0 conversation(s) match" in text_of(at)

    at.multiselect(key="conv_people").set_value([sorted(speakers)[0]]).run()
    expected = [c for c in convs if sorted(speakers)[0] in json.loads(c["participants"])]
    assert f"{len(expected)} conversation(s) match" in text_of(at)

    at.multiselect(key="conv_people").set_value([]).run()
    at.multiselect(key="conv_places").set_value([convs[0]["place"]]).run()
    assert f"{sum(c['place'] == convs[0]['place'] for c in convs)} conversation(s) match" in text_of(at)

    at.select_slider(key="conv_time").set_value((0, max(0, convs[0]["started_tick"] - 1))).run()
    assert "0 conversation(s) match" in text_of(at)


# ---------------------------------------------------------------------- Metrics

def test_metrics_shows_llm_cost_graph_and_probes_of_a_run_without_provenance(monkeypatch, older_run):
    finished_run = older_run  # the foundation's layout: the graph falls back to who talked with whom
    at = open_page(app(monkeypatch, finished_run), "metrics")
    metric = {m.label: m.value for m in at.metric}
    calls = rows(finished_run, "select count(*) n, sum(prompt_tokens + completion_tokens) t from llm_calls")[0]
    assert metric["LLM calls"] == f"{calls['n']:,}" and metric["tokens"] == f"{calls['t']:,}"
    assert metric["parse failures"] == "0" and metric["cache hits"] == "0"
    shown = text_of(at)
    assert "records no provenance" in shown, "an old run gets a note instead of the spread of facts"
    titles = [f["layout"].get("title", {}).get("text", "") for f in figures(at)]
    assert not any(t.startswith("Fact ") for t in titles) and "Probe answers about each fact, by verdict" not in titles
    assert any("density" in t for t in titles) and any("talked with whom" in t for t in titles)
    assert "I heard there is a party at Hobbs Cafe." in shown
    assert "verdict" not in at.dataframe[-1].value.columns, "no verdicts before probes were scored"
    subheaders = [s.value for s in at.subheader]
    assert "Behaviour" in subheaders and "Computed now from run.db" in shown, "no behaviour table: computed live"
    assert "Rewards" not in subheaders, "no rewards section without a rewards table"


def _titled(at):
    return {f["layout"].get("title", {}).get("text", ""): f for f in figures(at)}


def _trace(fig, name):
    return next(t for t in fig["data"] if t.get("name") == name)


def test_metrics_shows_the_spread_of_each_fact_and_the_behaviour(monkeypatch, finished_run):
    from simulation.rundb import behaviour, facts
    from simulation.rundb.connect import connect_ro

    con = connect_ro(finished_run / "run.db")
    run_id = con.execute("select run_id from runs").fetchone()[0]
    declared, spread, learned = facts.facts(con, run_id), facts.spread(con, run_id), facts.first_aware(con, run_id)
    stored, verdicts = behaviour.stored(con, run_id), facts.probe_verdicts(con, run_id)
    con.close()
    assert list(declared) == ["party", "market"] and learned["party"], "the flagship traces its facts"
    assert stored and verdicts["party"], "a finished run stores its behaviour and scores its probe answers"

    at = open_page(app(monkeypatch, finished_run), "metrics")
    shown = text_of(at)
    subheaders = [s.value for s in at.subheader]
    assert subheaders.index("Spread of the scenario's facts") < subheaders.index("Behaviour")
    assert "Awareness of the scenario's topics" not in subheaders and "keywords" not in shown
    assert [m.value for m in at.metric if m.label == "aware"] == [f"{spread[f].aware}/8" for f in declared]
    assert [m.value for m in at.metric if m.label == "told"] == [str(spread[f].told) for f in declared]
    by_title = _titled(at)
    for fact_id in declared:
        assert f"**{fact_id}**: " in shown and declared[fact_id].text.split(",")[0] in shown
        curve = by_title[f"Fact “{fact_id}”: people aware over time"]
        assert array(curve["data"][0]["y"])[-1] == len(learned[fact_id]), "the curve ends at everyone aware"
        cascade = by_title[f"Fact “{fact_id}”: who told whom (each person at their home)"]
        drawn = {a for t in cascade["data"] if t.get("name") in ("first to know (a root)", "told by someone",
                                                                  "not aware") for a in t["customdata"]}
        assert len(drawn) == 8, "everyone is on the cascade's map"
        assert "Hobbs Cafe" in _trace(cascade, "places")["text"], "the town is drawn behind it"
    party = next(d.value for d in at.dataframe if "via" in d.value.columns)
    first = learned["party"][0]
    assert list(party.columns) == ["person", "when", "tick", "via", "from", "depth", "teller aware", "kept", "lost",
                                   "changed", "memory"]
    assert list(party["person"]) == [i.name for i in learned["party"]]
    assert (party.iloc[0]["person"], party.iloc[0]["via"]) == ("Isabella Rodriguez", "whispered") == (first.name,
                                                                                                      first.source)
    assert party.iloc[0]["kept"] == "place, day, time", "the details in the fact's order"

    assert "Stored when the run finished" in shown
    for title in ("Talk", "Plans", "LLM", "Facts", "Probes", "Relationships"):
        assert f"**{title}**" in shown
    tables = [d.value for d in at.dataframe]
    talk = next(t for t in tables if list(t.columns) == ["metric", "value"] and "echo_share" in set(t["metric"]))
    value = stored["talk.conversations"]
    assert talk.set_index("metric").loc["conversations", "value"] == f"{value:.3f}".rstrip("0").rstrip(".")
    fact_rows = next(t for t in tables if "cascade_depth" in t.columns)
    assert list(fact_rows["fact"]) == sorted({k.split(".")[1] for k in stored if k.startswith("facts.")})
    verdict_chart = by_title["Probe answers about each fact, by verdict"]
    assert {t["name"]: sum(array(t["x"])) for t in verdict_chart["data"]} == dict(verdicts["party"])
    answers = next(d.value for d in at.dataframe if "verdict" in d.value.columns)
    assert set(answers["verdict"].dropna()) == set(verdicts["party"])


def test_metrics_draws_a_cascade_over_the_town(monkeypatch, cascade_run):
    from ui_support import CASCADE

    at = open_page(app(monkeypatch, cascade_run), "metrics")
    cascade = _titled(at)["Fact “party”: who told whom (each person at their home)"]
    assert set(_trace(cascade, "first to know (a root)")["customdata"]) == {"isabella_rodriguez", "samira_haddad"}
    assert set(_trace(cascade, "told by someone")["customdata"]) == {"walter_hughes", "grace_okafor", "daniel_okafor"}
    assert set(_trace(cascade, "not aware")["customdata"]) == {"theo_lindqvist", "fiona_brennan", "margaret_ashby"}
    assert list(_trace(cascade, "told it before knowing it")["customdata"]) == ["theo_lindqvist"]

    homes = {r["agent_id"]: (r["x"], r["y"]) for r in rows(
        cascade_run, "select a.agent_id, p.x, p.y from agents a join places p on p.place_id = a.home")}
    at_home = {}
    for t in cascade["data"]:
        if t.get("name") in ("first to know (a root)", "told by someone", "not aware"):
            at_home.update({a: (x, y) for a, x, y in zip(t["customdata"], array(t["x"]), array(t["y"]), strict=True)})
    for agent, (x, y) in homes.items():
        assert abs(at_home[agent][0] - x) <= 5 and abs(at_home[agent][1] - y) <= 5, f"{agent} is drawn at home"
    assert at_home["grace_okafor"] != at_home["daniel_okafor"], "people of one home side by side"

    def segments(name):
        t = _trace(cascade, name)
        xs, ys = array(t["x"]), array(t["y"])
        return {(xs[i], ys[i], xs[i + 1], ys[i + 1]) for i in range(0, len(xs), 3)}

    def edge(a, b):
        return (*at_home[a], *at_home[b])

    assert segments("told") == {edge("isabella_rodriguez", "walter_hughes"), edge("walter_hughes", "grace_okafor")}
    assert _trace(cascade, "told, teller not aware")["line"]["dash"] == "dash"
    assert segments("told, teller not aware") == {edge("theo_lindqvist", "daniel_okafor")}
    arrows = [(a["ax"], a["ay"], a["x"], a["y"]) for a in cascade["layout"]["annotations"] if a.get("showarrow")]
    assert set(arrows) == {edge("isabella_rodriguez", "walter_hughes"), edge("walter_hughes", "grace_okafor"),
                           edge("theo_lindqvist", "daniel_okafor")}, "an arrow from each teller to their listener"
    assert sorted(_trace(cascade, "told: when")["text"]) == ["Mon 07:30", "Mon 08:00"]
    assert list(_trace(cascade, "told, teller not aware: when")["text"]) == ["Mon 08:20"]
    market = _titled(at)["Fact “market”: who told whom (each person at their home)"]
    assert len(_trace(market, "not aware")["customdata"]) == 8 and "Nobody is aware of it yet." in text_of(at)

    table = next(d.value for d in at.dataframe if "via" in d.value.columns).set_index("person")
    aware = [a for a, _, source, _, _ in CASCADE if source != "planned"]
    assert len(table) == len(aware)
    grace = table.loc["Grace Okafor"]
    assert (grace["via"], grace["from"], grace["depth"]) == ("heard", "Walter Hughes", 2)
    assert grace["teller aware"] == "yes"
    assert (grace["kept"], grace["lost"], grace["changed"]) == ("day", "time", "place")
    assert (table.loc["Daniel Okafor", "teller aware"], table.loc["Daniel Okafor", "depth"]) == ("no", 1)
    assert table.loc["Samira Haddad", "via"] == "perceived" and table.loc["Samira Haddad", "teller aware"] == ""
    metric = [(m.label, m.value) for m in at.metric][6:14]  # after the LLM totals: the party's spread
    assert dict(metric) == {"aware": "5/8", "told": "3", "roots": "2", "depth": "2", "distortion": "33%",
                            "retention": "44%", "invented": "1", "from unaware": "1"}
    curve = _titled(at)["Fact “party”: people aware over time"]
    assert array(curve["data"][0]["y"])[-1] == 5
    assert "Computed now from run.db" in text_of(at), "no stored behaviour rows: computed from the provenance"
    facts_table = next(d.value for d in at.dataframe if "cascade_depth" in d.value.columns).set_index("fact")
    assert facts_table.loc["party", "told"] == "3" and facts_table.loc["party", "cascade_depth"] == "2"


def test_metrics_of_a_run_without_facts_shows_a_note(monkeypatch, tmp_path, finished_run):
    from ui_support import copy_run

    run_dir = copy_run(finished_run, tmp_path / "runs" / finished_run.name)
    con = sqlite3.connect(run_dir / "run.db")
    with con:
        con.execute("update resume_state set scenario = json_remove(scenario, '$.scenario.facts')")
    con.close()
    at = open_page(app(monkeypatch, run_dir), "metrics")
    assert any("declares no facts" in i.value for i in at.info)
    assert not any(t.startswith("Fact ") for t in _titled(at))
    assert "Behaviour" in [s.value for s in at.subheader]


def test_metrics_shows_relationship_density_rewards_and_evaluations(monkeypatch, newer_run):
    at = open_page(app(monkeypatch, newer_run), "metrics")
    subheaders = [s.value for s in at.subheader]
    assert {"Relationships", "Rewards", "Evaluation scores"} <= set(subheaders)
    by_title = {f["layout"].get("title", {}).get("text", ""): f for f in figures(at)}
    density = next(f for t, f in by_title.items() if t.startswith("Graph density"))
    assert array(density["data"][0]["y"])[-1] == pytest.approx(2 / 28), "2 pairs know each other among 8 people"
    rewards = by_title["Reward per agent over time (mean per tick)"]
    assert {t["name"] for t in rewards["data"]} == {"Isabella Rodriguez", "Walter Hughes"}
    evaluation = by_title["Evaluation: fidelity"]
    assert sorted(array(evaluation["data"][0]["y"])) == [0.625, 0.875], "the latest score per agent and metric"


def test_metrics_shows_reward_and_advantage_curves_of_agora_rewards(monkeypatch, tmp_path, finished_run):
    """A run labelled by the rewards engine itself (a judge double whose scores vary by request)."""
    from rewards_support import JudgeDouble

    from simulation.evaluation import targets
    from simulation.rewards import engine, rubric, store
    from ui_support import copy_run

    run_dir = copy_run(finished_run, tmp_path / "runs" / finished_run.name)
    personas = {t.agent_id: t.persona for t in targets.resolve([run_dir])}
    judge = JudgeDouble(scores=lambda req: dict(zip(rubric.KEYS, (1 + req.seed % 5, 4, 3, 1 + req.seed // 5 % 5))))
    result = engine.label(run_dir / "run.db", personas, judge, JudgeDouble(), engine.RewardOptions(peer_critique=True))
    store.write(run_dir / "run.db", result)

    at = open_page(app(monkeypatch, run_dir), "metrics")
    assert "Rewards" in [s.value for s in at.subheader]
    by_title = {f["layout"].get("title", {}).get("text", ""): f for f in figures(at)}
    curves = {t: by_title[t] for t in ("Reward per agent over time (mean per tick)",
                                       "Advantage per agent over time (mean per tick)",
                                       "Running total of reward per agent")}
    own = rows(run_dir, "select r.agent_id, a.name, r.tick, r.reward, r.advantage from rewards r "
                        "join agents a using (agent_id) where r.role = 'actor' order by r.tick, r.id")
    names = {r["name"] for r in own}
    for fig in curves.values():
        assert {t["name"] for t in fig["data"]} == names, "one curve per agent with rewards"
    person = own[0]["name"]
    mine = [r for r in own if r["name"] == person]
    ticks = sorted({r["tick"] for r in mine})
    mean = {k: [sum(r[k] for r in mine if r["tick"] == t) / sum(r["tick"] == t for r in mine) for t in ticks]
            for k in ("reward", "advantage")}
    total, running = 0.0, []
    for t in ticks:
        total += sum(r["reward"] for r in mine if r["tick"] == t)
        running.append(total)
    for title, expected in (("Reward per agent over time (mean per tick)", mean["reward"]),
                            ("Advantage per agent over time (mean per tick)", mean["advantage"]),
                            ("Running total of reward per agent", running)):
        trace = next(t for t in curves[title]["data"] if t["name"] == person)
        assert array(trace["x"]) == ticks and array(trace["y"]) == pytest.approx(expected), title
    summary = next(d.value for d in at.dataframe if "mean in_character" in d.value.columns)
    assert set(summary["person"]) == names | {r["name"] for r in rows(
        run_dir, "select distinct a.name from rewards r join agents a using (agent_id)")}
    assert {"as speaker", "as critic", "as scorer"} <= set(summary.columns)


# ---------------------------------------------------------------------- Runs

def test_runs_lists_runs_side_by_side_and_names_a_broken_one(monkeypatch, finished_run, newer_run, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "broken").mkdir()
    (runs / "broken" / "run.db").write_bytes(b"this is not sqlite" * 100)
    at = open_page(app(monkeypatch, finished_run, newer_run, runs_dir=runs), "runs")
    table = at.dataframe[0].value
    assert list(table["run"]) == [finished_run.name, newer_run.name, "broken"]
    ours = table.iloc[0]
    calls = rows(finished_run, "select count(*) n from llm_calls")[0]["n"]
    assert ours["LLM calls"] == calls and ours["ticks"] == "12/12" and ours["seed"] == 7
    from simulation.rundb.connect import connect_ro
    from simulation.rundb.facts import spread

    con = connect_ro(finished_run / "run.db")
    party = spread(con, con.execute("select run_id from runs").fetchone()[0])["party"]
    con.close()
    assert ours["outcomes"].startswith(f"party: {party.aware}/8 aware, {party.told} told; market: ")
    assert "not a readable SQLite database" in table.iloc[2]["problem"]


def test_runs_shows_a_fork_with_its_parent_and_the_tick_where_they_part(monkeypatch, finished_run, tmp_path):
    from simulation import Simulation
    from simulation.run.fork import Intervention
    from simulation.testing import ScriptedBackend

    runs = tmp_path / "runs"
    with Simulation.fork(finished_run, at=6, out=runs, backend=ScriptedBackend(),
                         interventions=[Intervention("whisper", "The mill is for sale.", to="walter_hughes")]) as fork:
        fork.run()
    at = open_page(app(monkeypatch, finished_run, runs_dir=runs), "runs")
    table = at.dataframe[0].value.set_index("run")
    parent_id = rows(finished_run, "select run_id from runs")[0]["run_id"]
    assert table.loc[fork.run_dir.name, "fork of"] == (f"{parent_id} from tick 6 "
                                                       "(whisper walter_hughes: The mill is for sale.)")
    assert table.loc[finished_run.name, "fork of"] == ""
    # the fork beside its parent: the same awareness before the tick where they part, a line there
    assert any(f"forked from `{finished_run.name}` at tick 6" in c.value for c in at.caption)
    chart = next(f for f in figures(at) if "the fork beside its parent" in f["layout"].get("title", {}).get("text", ""))
    traces = {t["name"]: t for t in chart["data"]}
    assert {"party: parent", "party: fork"} <= set(traces)
    parent, fork = (dict(zip(array(traces[f"party: {k}"]["customdata"]), array(traces[f"party: {k}"]["y"])))
                    for k in ("parent", "fork"))
    assert all(parent[tick] == fork[tick] for tick in parent if tick < 6), "one run before the fork"
    assert any("tick 6" in a["text"] for a in chart["layout"]["annotations"])


def test_runs_shows_the_rounds_of_a_co_evolution_loop(monkeypatch, finished_run, newer_run, tmp_path):
    """An `agora evolve` folder (evolve.db written by the loop's own writer): its held-out runs are
    offered, its lineage and per-round table are shown, and a prosocial measure that fell while
    the reward rose is called out."""
    from simulation.rundb import lineage

    folder = tmp_path / "evolve"
    folder.mkdir()
    con = sqlite3.connect(folder / "evolve.db")
    lineage.create(con)
    lineage.record(con, lineage.RoundResult(0, "bundled SmolLM2-135M", None, held_out_runs=[str(finished_run)],
                                            metrics={"reward.mean": [0.30, 0.34, 0.32],
                                                     "talk.invitations": [4.0, 5.0, 6.0],
                                                     "reward.tie": [0.01, -0.02, 0.0]}))
    lineage.record(con, lineage.RoundResult(1, str(folder / "round-1/model/model.gguf"), "bundled SmolLM2-135M",
                                            trained_on=[str(tmp_path / "gone")], held_out_runs=[str(newer_run)],
                                            metrics={"reward.mean": [0.50, 0.52, 0.51],
                                                     "talk.invitations": [1.0, 0.0, 1.0],
                                                     "reward.tie": [0.05, 0.04, 0.06]}))
    con.close()
    at = open_page(app(monkeypatch, runs_dir=folder), "runs")
    shown = text_of(at)
    assert "Co-evolution: `evolve`" in shown
    lineage_table, metric_table, runs_table = (d.value for d in at.dataframe)
    assert list(lineage_table["round"]) == [0, 1] and list(lineage_table["model"]) == ["bundled SmolLM2-135M",
                                                                                     "model.gguf"]
    assert list(lineage_table["trained on"]) == ["0 run(s)", "1 run(s)"]
    by_metric = metric_table.set_index("metric")
    assert by_metric.loc["reward.mean", "moved"] == "higher" and by_metric.loc["reward.mean", "round 0"].startswith("0.32 [")
    assert by_metric.loc["talk.invitations", "traded away"] and by_metric.loc["talk.invitations", "prosocial"]
    assert by_metric.loc["reward.tie", "round 0"].startswith("-0.00333 [-"), "a change keeps its sign and interval"
    assert "Prosocial measures that fell while the reward rose: `talk.invitations`" in shown
    titles = {a["text"] for f in figures(at) for a in f["layout"].get("annotations", [])}
    assert {"reward.mean", "talk.invitations", "reward.tie"} <= titles
    assert list(runs_table["run"]) == [newer_run.name, finished_run.name], "the loop's runs, latest round first"

    from simulation.cli.ui import check_inputs

    assert check_inputs([folder], tmp_path, "127.0.0.1", 0) == [], "`agora ui EVOLVE_DIR` opens a loop's folder"


def test_runs_summary_of_a_run_without_provenance_claims_no_awareness(older_run):
    with RunDB(older_run) as db:
        row = q.summary(db)
    assert row["outcomes"] == "-" and row["aware"] == {}, "no fact_memories: nobody is counted (not 0 aware)"


# ---------------------------------------------------------------------- unreadable runs

def _missing(run_dir):
    run_dir.mkdir()


def _empty(run_dir):
    run_dir.mkdir()
    (run_dir / "run.db").write_bytes(b"")


def _corrupt(run_dir):
    run_dir.mkdir()
    (run_dir / "run.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)


def _old(run_dir, source):
    run_dir.mkdir()
    (run_dir / "run.db").write_bytes((source / "run.db").read_bytes())
    con = sqlite3.connect(run_dir / "run.db")
    with con:
        con.execute("update runs set schema_version = 1")
    con.close()


@pytest.mark.parametrize(("make", "message"), [
    (_missing, "No run.db in"),
    (_empty, "is empty"),
    (_corrupt, "not a readable SQLite database"),
    (_old, "schema version 1, an older layout"),
])
@pytest.mark.parametrize("page", ["town", "people", "metrics"])
def test_unreadable_run_gives_a_message_not_a_crash(monkeypatch, tmp_path, finished_run, make, message, page):
    run_dir = tmp_path / "bad"
    make(run_dir, finished_run) if make is _old else make(run_dir)
    at = open_page(app(monkeypatch, run_dir, runs_dir=tmp_path / "none"), page)
    assert any(message in e.value for e in at.error), [e.value for e in at.error]


def test_no_runs_yet_says_how_to_start_one(monkeypatch, tmp_path):
    (tmp_path / "runs").mkdir()
    at = open_page(app(monkeypatch, runs_dir=tmp_path / "runs"), "town")
    assert any("agora run SCENARIO" in i.value for i in at.info)


def test_run_db_is_opened_read_only(finished_run):
    with RunDB(finished_run) as db:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.con.execute("delete from agents")
        assert q.latest_tick(db) == 11


def test_a_damaged_file_with_a_valid_header_is_a_message(tmp_path, finished_run):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    data = (finished_run / "run.db").read_bytes()
    (run_dir / "run.db").write_bytes(data[:100] + b"\x00" * (len(data) - 100))
    with pytest.raises(RunUnreadable, match="not a readable SQLite database"):
        RunDB(run_dir)


# ---------------------------------------------------------------------- Whisper

def test_whisper_lands_in_the_inbox_and_the_model_delivers_it(monkeypatch, tmp_path, flagship):
    run = build_run(flagship, tmp_path / "runs", ticks=6, finish=False)
    run.model.step()
    at = open_page(app(monkeypatch, run.run_dir), "whisper")
    assert not at.form_submit_button[0].disabled
    at.selectbox(key="whisper_to").select("walter_hughes")
    at.text_area(key="whisper_text").input("I should ask Isabella about the cider market.")
    at.form_submit_button[0].click().run()
    assert not at.exception
    assert any("Whisper #1 to Walter Hughes is in the inbox" in s.value for s in at.success)
    inbox = rows(run.run_dir, "select * from inbox")
    assert len(inbox) == 1 and inbox[0]["agent_id"] == "walter_hughes" and inbox[0]["delivered_tick"] is None
    assert inbox[0]["run_id"] == run.run_id and inbox[0]["sender"] == "viewer"
    assert "pending" in at.dataframe[0].value["status"].tolist()

    run.model.step()  # tick 1 starts by delivering it
    delivered = rows(run.run_dir, "select * from inbox")[0]
    assert delivered["delivered_tick"] == 1
    thought = rows(run.run_dir, "select * from memories where agent_id = 'walter_hughes' and kind = 'thought'")
    assert [m["text"] for m in thought] == ["I should ask Isabella about the cider market."]
    event = rows(run.run_dir, "select * from events where kind = 'whisper' and agent_id = 'walter_hughes'")
    assert json.loads(event[0]["data"]) == {"inbox_id": 1}

    at.run()
    assert at.dataframe[0].value["status"].tolist() == ["delivered at tick 1 (Mon 07:10)"]
    at.text_area(key="whisper_text").input("   ")
    at.form_submit_button[0].click().run()
    assert any("Write something" in e.value for e in at.error)
    assert len(rows(run.run_dir, "select * from inbox")) == 1


def test_whisper_is_disabled_for_a_finished_run(monkeypatch, finished_run):
    at = open_page(app(monkeypatch, finished_run), "whisper")
    assert at.form_submit_button[0].disabled
    assert any("finished" in i.value for i in at.info)


# ---------------------------------------------------------------------- agora ui

@pytest.mark.parametrize(("args", "message"), [
    (["{tmp}/nope"], "no such run directory"),
    (["{tmp}"], "not a run directory (it has no run.db)"),
    (["--runs-dir", "{tmp}/nowhere"], "no runs folder here"),
])
def test_ui_bad_input_is_one_message_and_exit_2(tmp_path, args, message):
    result = agora("ui", *[a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_ui_refuses_a_port_in_use(finished_run):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = agora("ui", finished_run, "--port", busy.getsockname()[1])
    assert result.exit_code == 2 and "cannot listen on 127.0.0.1" in result.output


def test_streamlit_is_local_headless_and_quiet():
    from simulation.cli.ui import APP, streamlit_command

    cmd = streamlit_command(APP, "127.0.0.1", 8600)
    flags = dict(zip(cmd[5::2], cmd[6::2], strict=True))
    assert cmd[2:5] == ["streamlit", "run", str(APP)] and APP.is_file()
    assert flags["--server.address"] == "127.0.0.1" and flags["--server.headless"] == "true"
    assert flags["--browser.gatherUsageStats"] == "false" and flags["--server.port"] == "8600"


def test_agora_ui_serves_the_app_on_loopback(finished_run):
    from ui.screenshots import viewer

    with viewer([str(finished_run)]) as url:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=10) as page:
            assert b"<div id=\"root\">" in page.read()


# ---------------------------------------------------------------------- the viewer reads run.db only

def _engine_imports(path):
    """The ``simulation`` modules a file of the viewer imports (statically, at any depth)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "simulation"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "simulation":
            found += [f"{node.module}.{a.name}" if node.module == "simulation" else node.module for a in node.names]
    return found


def test_the_viewer_imports_nothing_of_the_engine_but_simulation_rundb():
    """ui/ may import ``simulation.rundb`` (read-only run.db and the shared metrics) and nothing
    else of the engine: the viewer must start without loading the simulation, and must not
    come to depend on its internals."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    allowed = ("simulation.rundb",)
    bad = {str(f.relative_to(root)): names for f in sorted((root / "ui").rglob("*.py"))
           if (names := [n for n in _engine_imports(f) if not n.startswith(allowed)])}
    assert not bad, f"the viewer imports engine internals: {bad}"
    assert any(_engine_imports(root / "ui" / "queries.py")), "queries read the metrics from simulation.rundb"


def test_importing_the_viewer_loads_no_engine_module():
    import subprocess
    import sys
    from pathlib import Path

    code = ("import json, sys\n"
            "import simulation\n"  # the package's own (tiny) __init__ is allowed
            "bare = set(sys.modules)\n"
            "import ui.db, ui.queries, ui.catalog, ui.inbox, ui.charts, ui.common, ui.screenshots\n"
            "print(json.dumps(sorted(m for m in set(sys.modules) - bare if m.split('.')[0] == 'simulation')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    # rundb.facts reads the provenance rules (simulation/provenance/rules.py: constants, standard
    # library only, written to be shared with the readers of run.db; the package's __init__ is a docstring)
    shared = ("simulation.rundb", "simulation.provenance.rules")
    assert loaded and all(m.startswith(shared) or m == "simulation.provenance" for m in loaded), loaded


# ---------------------------------------------------------------------- helpers

def test_runs_folder_lists_named_runs_first_then_newest_first(tmp_path):
    from ui.catalog import Settings, discover

    runs = tmp_path / "runs"
    for name in ("b-20260101-090000-aaaa", "a-20260102-090000-bbbb", "empty-20260103-090000-cccc", "named"):
        (runs / name).mkdir(parents=True)
        if not name.startswith("empty"):
            (runs / name / "run.db").write_bytes(b"")
    found = discover(Settings(runs, (runs / "named",)))
    assert [(e.key, e.named) for e in found] == [
        ("named", True), ("a-20260102-090000-bbbb", False), ("b-20260101-090000-aaaa", False)]


def test_model_text_is_shown_literally_in_markdown():
    from ui.common import md

    assert md("see [this](http://x.example) *now* $5 <b>") == "see \\[this\\](http://x.example) \\*now\\* \\$5 \\<b\\>"
    assert md("# not a heading") == "\\# not a heading" and md("1. not a list") == "1\\. not a list"
