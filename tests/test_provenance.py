"""Provenance through scripted conversations: a fact whispered to Ann, Ann tells Bob, Bob tells Cat
(changing the time). Every memory records its source; the fact's cascade is Ann -> Bob -> Cat,
depth 2; Cat's version is distorted; probe answers are scored against the fact's details. A recap
is the listener's own summary: one that carries a fact no line did makes nobody aware."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulation.llm.scoring import ScoredOptions
from simulation.llm.types import LLMRequest
from simulation.testing.scripted import ScriptedBackend, decision_of, enum_values, option_labels

TELLING = Path(__file__).parent / "data" / "good" / "telling.yaml"

LINES = {
    "ann": "I'm throwing a party at the Corner Cafe tomorrow at 5pm, please come!",
    "bob": "Have you heard? Ann is having a party at the Corner Cafe tomorrow at 6pm.",
    "cat": "Good morning, Bob! Lovely to see you.",
}
PROBE_ANSWERS = {
    "ann": "Yes, my party is at the Corner Cafe tomorrow at 5pm.",
    "bob": "Ann's party is at the Corner Cafe at 5pm tomorrow.",
    "cat": "Yes, at the Corner Cafe at 6pm tomorrow.",
}


class Telling(ScriptedBackend):
    """Everyone stays at the cafe; Ann and Cat open conversations, Bob only answers; each person
    always says their own line, and every conversation ends after two lines (the scenario offers
    goodbye from the second line; ``end_after=2`` takes it)."""

    def answer(self, req: LLMRequest) -> str:
        who = req.agent_id or ""
        if req.purpose == "plan":
            hours = enum_values(req.json_schema, "hour")
            return json.dumps({"plan": [{"hour": hours[0], "choice": 1}]})  # the usual day (their habits)
        if req.purpose == "react" and req.options is not None:
            wanted = "talk" if who != "bob" else "continue"
            labels = {decision_of(label): o for o, label in option_labels(req).items()}
            picked = labels.get(wanted, labels.get("continue"))
            return ScoredOptions([0.0 if o == picked else None for o in req.options], exact=True).to_text()
        if req.purpose == "utterance":
            return json.dumps({"say": LINES[who]})
        if req.purpose == "recap":
            return json.dumps({"summary": "We said hello.", "view": "Someone I see at the cafe.", "feeling": 2,
                               "importance": 4})
        if req.purpose.startswith("probe"):
            return json.dumps({"answer": PROBE_ANSWERS[who]})
        return super().answer(req)


@pytest.fixture(scope="module")
def telling(tmp_path_factory, embedder):
    from simulation import Simulation
    from simulation import scenario as sc

    with Simulation.from_scenario(sc.load(TELLING), backend=Telling(end_after=2),
                                  out=tmp_path_factory.mktemp("runs")) as sim:
        sim.run()
        yield sim


def test_the_scenario_runs_as_scripted(telling):
    talks = telling.db.execute(
        "select participants, started_tick from conversations order by id").fetchall()
    assert [json.loads(p) for p, _ in talks][:2] == [["ann", "bob"], ["cat", "bob"]]


def test_every_memory_records_where_it_came_from(telling):
    db = telling.db
    assert db.execute("select count(*) from memories where source is null").fetchone()[0] == 0
    whisper = db.execute("select source, event_id from memories where agent_id = 'ann' and kind = 'thought'").fetchone()
    assert whisper[0] == "whispered" and whisper[1] is not None
    heard = db.execute(
        "select m.from_agent, m.utterance_id, u.speaker_id, u.text from memories m join utterances u "
        "on u.id = m.utterance_id where m.agent_id = 'bob' and m.source = 'heard' order by m.id").fetchone()
    assert heard[0] == heard[2] == "ann" and heard[3] == LINES["ann"]
    said = db.execute("select count(*) from memories where agent_id = 'ann' and source = 'said'").fetchone()[0]
    assert said >= 1
    recapped = db.execute("select from_agent, conversation_id from memories where agent_id = 'cat' and "
                          "source = 'recapped'").fetchone()
    assert recapped[0] == "bob" and recapped[1] is not None


def test_the_cascade_is_ann_then_bob_then_cat(telling):
    from simulation.rundb.facts import first_aware, spread

    learned = {i.agent_id: i for i in first_aware(telling.db, telling.run_id)["party"]}
    assert set(learned) == {"ann", "bob", "cat"}
    assert (learned["ann"].source, learned["ann"].parent, learned["ann"].depth) == ("whispered", None, 0)
    assert (learned["bob"].source, learned["bob"].parent, learned["bob"].depth) == ("heard", "ann", 1)
    assert (learned["cat"].source, learned["cat"].parent, learned["cat"].depth) == ("heard", "bob", 2)
    assert learned["ann"].tick <= learned["bob"].tick < learned["cat"].tick
    # both told memories carry their source: the utterance that told them, and its speaker
    for who, teller in (("bob", "ann"), ("cat", "bob")):
        row = telling.db.execute("select speaker_id, listener_id from utterances where id = ?",
                                 [learned[who].utterance_id]).fetchone()
        assert row == (teller, who)
    s = spread(telling.db, telling.run_id)["party"]
    assert (s.aware, s.told, s.roots, s.depth) == (3, 2, 1, 2)
    # Bob kept every detail; Cat was told 6pm instead of 5pm: one of the two told is distorted
    assert learned["bob"].details == {"place": "kept", "day": "kept", "time": "kept"}
    assert learned["cat"].details["time"] == "changed" and learned["cat"].details["place"] == "kept"
    assert s.distorted == 1 and s.distortion == 0.5


def test_probe_answers_are_scored_against_the_details(telling):
    verdicts = dict(telling.db.execute(
        "select agent_id, verdict from probes where fact_id = 'party'").fetchall())
    assert verdicts == {"ann": "right", "bob": "right", "cat": "wrong"}


def test_the_behaviour_table_holds_the_fact_numbers(telling):
    from simulation.rundb.behaviour import stored

    metrics = stored(telling.db, telling.run_id)
    assert metrics["facts.party.aware_share"] == 1.0
    assert metrics["facts.party.cascade_depth"] == 2.0
    assert metrics["facts.party.distortion"] == 0.5
    assert metrics["probes.party.right_share"] == pytest.approx(2 / 3)
    assert metrics["talk.conversations"] >= 2


def test_resume_reads_back_who_is_aware(tmp_path, embedder):
    """Probe scoring after a resume knows who was aware before the stop (read from run.db)."""
    from simulation import Simulation
    from simulation import scenario as sc

    with Simulation.from_scenario(sc.load(TELLING), backend=Telling(), out=tmp_path, ticks=3) as sim:
        sim.run()
        run_dir = sim.run_dir
    with Simulation.resume(run_dir, ticks=1, backend=Telling()) as sim:
        assert "ann" in sim.model.facts.aware["party"] and "bob" in sim.model.facts.aware["party"]


RECAP_LINES = {**LINES, "bob": "Good morning! The coffee is fresh today."}
CAT_RECAP = "Bob told me Ann is throwing a party at the Corner Cafe tomorrow at 5pm."


class Recapping(Telling):
    """As ``Telling``, but Bob never passes the party on (his line is about coffee), and Cat's own
    summary of her talk with him carries it all the same: an invention of hers, not a telling."""

    def answer(self, req: LLMRequest) -> str:
        who = req.agent_id or ""
        if req.purpose == "utterance":
            return json.dumps({"say": RECAP_LINES[who]})
        if req.purpose == "recap" and who == "cat":
            return json.dumps({"summary": CAT_RECAP, "view": "Bob knows everything.", "feeling": 2, "importance": 6})
        return super().answer(req)


def test_a_recap_carrying_a_fact_no_line_did_is_invented_not_awareness(tmp_path, embedder):
    from simulation import Simulation
    from simulation import scenario as sc
    from simulation.provenance.rules import AWARE_SOURCES, TOLD_SOURCES
    from simulation.rundb.facts import first_aware, spread

    assert "recapped" not in AWARE_SOURCES and TOLD_SOURCES == ("heard",)
    with Simulation.from_scenario(sc.load(TELLING), backend=Recapping(end_after=2), out=tmp_path) as sim:
        sim.run()
        db, run_id, aware = sim.db, sim.run_id, sim.model.facts.aware["party"]
        # Cat's summary of her talk with Bob carries the party; no line Cat heard does
        rows = db.execute("select source, from_agent from fact_memories where fact_id = 'party' "
                          "and agent_id = 'cat'").fetchall()
        assert ("recapped", "bob") in rows and not any(source == "heard" for source, _ in rows)
        heard = db.execute("select count(*) from memories where agent_id = 'cat' and source = 'heard'").fetchone()[0]
        assert heard >= 1, "Bob did speak to Cat"
        # ... so Cat is not aware: not in the tracker, not in the cascade, and her recap counts as invented
        assert aware == {"ann", "bob"}
        learned = {i.agent_id: i for i in first_aware(db, run_id)["party"]}
        assert set(learned) == {"ann", "bob"} and learned["bob"].source == "heard"
        s = spread(db, run_id)["party"]
        assert (s.aware, s.told, s.depth) == (2, 1, 1) and s.invented >= 1
        # her probe answer names the details she was never told: invented
        probe = db.execute("select aware, verdict from probes where fact_id = 'party' and agent_id = 'cat'")
        assert probe.fetchone() == (0, "invented")
