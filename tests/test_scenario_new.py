"""`agora scenario new`: a scenario drafted piece by piece, every piece under a schema, the whole loaded
as `agora validate` loads it, and each problem sent back to the piece that made it (issue 37)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import networkx as nx
import pytest
from typer.testing import CliRunner

from simulation import authoring
from simulation.authoring.layout import lay_out
from simulation.cli.entry import app
from simulation.errors import Problem
from simulation.llm.client import LLMClient
from simulation.llm.types import LLMRequest
from simulation.scenario import load
from simulation.testing.scripted import AnsweringBackend

TOPIC = "a rumour that the cannery will close, in a fishing village"


def _enum(schema: dict[str, Any], model: str, field: str) -> list[Any]:
    prop = schema["$defs"][model]["properties"][field] if model else schema["properties"][field]
    prop = prop.get("items", prop)
    return [prop["const"]] if "const" in prop else prop["enum"]


class Writer(AnsweringBackend):
    """A test double that writes every piece the way a careful model would, choosing among what each
    schema offers; ``bad`` answers (piece -> JSON) are given first, once each."""

    def __init__(self, bad: dict[str, list[Any]] | None = None):
        self.bad = {k: list(v) for k, v in (bad or {}).items()}
        self.asked: list[LLMRequest] = []

    def answer(self, req: LLMRequest) -> str:
        self.asked.append(req)
        piece = req.agent_id or ""
        s = req.json_schema or {}
        if self.bad.get(piece):
            bad = self.bad[piece].pop(0)
            return bad(s) if callable(bad) else bad
        if piece == "premise":
            return json.dumps({"title": "The Cannery Rumour", "setting": "A small fishing village where the "
                               "cannery employs half the people and everyone meets at the harbour.",
                               "news": "The owners will announce at a meeting in the cannery that it closes."})
        if piece == "town":
            letters = [ref["$ref"][-1] for ref in s["properties"]["places"]["prefixItems"]]
            return json.dumps({"places": [{"name": f"The {x}ast Quay", "kind": "workplace", "description":
                                           "A place of the village, by the water.", "objects": ["bench", "door",
                                                                                             "window"]}
                                          for x in letters]})
        if piece == "cast":
            letters = [ref["$ref"][-1] for ref in s["properties"]["people"]["prefixItems"]]
            works = _enum(s, f"Cast{letters[0]}", "workplace")
            return json.dumps({"people": [{"name": f"{x}ora {['Pascoe', 'Hale', 'Vaughan'][i % 3]}",
                                           "age": 30 + i, "occupation": "fish packer",
                                           "workplace": works[i % len(works)]} for i, x in enumerate(letters)]})
        if piece.startswith("person:"):
            others = _enum(s, "Relation", "person")
            places = _enum(s, "Habit", "place")
            return json.dumps({
                "traits": ["kind", "busy", "careful"],
                "big_five": {f: "high" for f in ("openness", "conscientiousness", "extraversion", "agreeableness",
                                                 "neuroticism")},
                "social_identity": "A packer at the cannery and a chapel regular.",
                "personal_identity": "Cheerful, thrifty and fond of a long chat.",
                "life_context": "Worried about money since the winter was poor.",
                "backstory": "Born in the village and never left it for long.",
                "speaking_style": "Talks fast and laughs a lot.", "aspiration": "To see the children settled.",
                "skills": ["knitting", "filleting fish"], "wake": "06:00", "sleep": "22:00",
                "day": [{"at": "12:00", "activity": "lunch", "place": places[-1]},
                        {"at": "08:00", "activity": "working", "place": places[0]},
                        {"at": "18:00", "activity": "supper", "place": "home"}],
                "relationships": [{"person": others[0], "view": "An old friend from school days."}],
                "memories": ["Remembered the storm last week.", "Mended a net on Sunday."],
                "home": {"description": "A small cottage with a blue door.", "objects": ["table", "stove", "bed"]}})
        if piece == "news":
            return json.dumps({"name": "cannery meeting", "text": "The owners hold a meeting at the cannery at "
                               "six tonight to say whether it closes.", "place": _enum(s, "", "place")[0],
                               "day": _enum(s, "", "day")[0], "starts": "18:00", "hours": 2,
                               "first_to_know": _enum(s, "", "first_to_know")[0],
                               "thought": "I have just heard the owners will talk about closing the cannery.",
                               "question": "Have you heard any news about the cannery? What exactly?"})
        if piece == "beats":
            people = _enum(s, "", "reach_people")
            return json.dumps({"reach_what": "Most of the village hears of the meeting.",
                               "reach_people": people[:3], "gather_what": "People come to the meeting.",
                               "gather_count": 3})
        raise AssertionError(f"unexpected piece {piece}")


def _draft(backend: Writer, check=None, **options: Any) -> authoring.Draft:
    opts = authoring.DraftOptions(**{"people": 4, "places": 4, **options})
    client = LLMClient(backend, run_seed=opts.seed, max_tokens=1024)
    return authoring.draft(TOPIC, client, opts, "writer", check or authoring.loader_problems("/tmp/drafted.yaml"))


def test_a_draft_is_a_valid_scenario_with_the_story_pieces(tmp_path) -> None:
    drafted = _draft(Writer(), people=5, places=3, director=True)
    path = tmp_path / "drafted.yaml"
    path.write_text(drafted.text)
    loaded = load(path)
    s = loaded.scenario
    assert len(loaded.people) == 5 and drafted.rounds == 1 and not drafted.asked_again
    assert {p.kind for p in s.town.places} == {"workplace", "home"} and len(s.town.places) == 3 + 3  # 3 households
    assert all(p.position is not None for p in s.town.places)
    assert [f.id for f in s.facts] == ["cannery_meeting"]
    assert {d.kind for d in s.facts[0].details} == {"place", "date", "time"}
    assert s.events[0].kind == "whisper" and s.events[0].fact == "cannery_meeting"
    assert [b.kind for b in s.story.beats] == ["reach", "gather"] and s.story.director
    assert s.probes[0].fact == "cannery_meeting"
    first = loaded.people[0].persona
    assert [h.at.hour for h in first.routine.day] == [8, 12, 18]  # sorted by hour
    assert first.aspiration and first.skills and first.big_five.openness == 0.7
    fourth = loaded.people[3].persona.name.split()[0]
    assert "Lives at The Pascoe House" in first.household and fourth in first.household  # one home per last name
    assert len({p.persona.name.split()[0][0] for p in loaded.people}) == 5  # first names start with distinct letters


def test_the_cli_writes_a_file_that_validates(tmp_path, monkeypatch) -> None:
    from simulation.llm import factory

    monkeypatch.setattr(factory, "build_backend", lambda settings, base: Writer())
    out = tmp_path / "cove.yaml"
    result = CliRunner().invoke(app, ["scenario", "new", TOPIC, "--out", str(out), "--people", "3", "--places", "3",
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(out)
    assert CliRunner().invoke(app, ["validate", str(out)]).exit_code == 0
    again = CliRunner().invoke(app, ["scenario", "new", TOPIC, "--out", str(out), "--quiet"])
    assert again.exit_code == 2 and "already exists" in again.output


def test_an_unusable_piece_is_asked_again_with_the_reason() -> None:
    def homes(s: dict[str, Any]) -> str:
        letters = [ref["$ref"][-1] for ref in s["properties"]["places"]["prefixItems"]]
        return json.dumps({"places": [{"name": f"{x}ell House", "kind": "home", "description": "A house.",
                                       "objects": ["bench", "boat", "rope"]} for x in letters]})

    backend = Writer(bad={"town": [homes]})
    drafted = _draft(backend)
    assert drafted.asked_again == {} and drafted.rounds == 1  # the client's own retry took it
    retry = [r for r in backend.asked if r.agent_id == "town"][1]
    assert "is a home; the places asked for are public places" in retry.messages[-1]["content"]


def test_a_loader_problem_goes_back_to_its_piece_only() -> None:
    calls = {"n": 0}

    def check(text: str) -> list[Problem]:
        calls["n"] += 1
        return [Problem("x.yaml", "is too early", 3, None, "story.beats[0].by")] if calls["n"] == 1 else []

    backend = Writer()
    drafted = _draft(backend, check=check)
    assert drafted.rounds == 2
    asked = [r.agent_id for r in backend.asked]
    assert asked.count("beats") == 2 and asked.count("premise") == 1 and asked.count("news") == 1
    assert "story.beats[0].by: is too early" in [r for r in backend.asked if r.agent_id == "beats"][1].messages[-1][
        "content"]


def test_a_topic_that_cannot_be_made_valid_fails_with_the_problems() -> None:
    problem = Problem("x.yaml", "nobody can reach it", 9, None, "town.paths[0]")
    with pytest.raises(authoring.DraftFailed) as failed:
        _draft(Writer(), check=lambda text: [problem], tries=2)
    assert "town.paths[0]: nobody can reach it" in failed.value.problems[0]
    assert failed.value.text and "places:" in failed.value.text


def test_the_cli_fails_with_exit_1_and_writes_no_file(tmp_path, monkeypatch) -> None:
    from simulation.llm import factory

    never = json.dumps({"title": "x"})  # never a premise
    monkeypatch.setattr(factory, "build_backend", lambda settings, base: Writer(bad={"premise": [never] * 99}))
    out = tmp_path / "cove.yaml"
    result = CliRunner().invoke(app, ["scenario", "new", TOPIC, "--out", str(out), "--quiet", "--tries", "2"])
    assert result.exit_code == 1 and "could not draft a valid scenario" in result.output
    assert "premise: no usable answer in 2 tries" in result.output
    assert not out.exists() and not list(tmp_path.iterdir())


def test_news_that_starts_before_it_can_spread_is_refused() -> None:
    def early(s: dict[str, Any]) -> str:
        return json.dumps({"name": "cannery meeting", "text": "The owners hold a meeting at the cannery at eight "
                           "this morning.", "place": _enum(s, "", "place")[0], "day": "2024-03-04", "starts": "08:00", "hours": 1,
                           "first_to_know": _enum(s, "", "first_to_know")[0],
                           "thought": "I have just heard about a meeting this morning.",
                           "question": "Have you heard any news about the cannery? What exactly?"})
    backend = Writer(bad={"news": [early]})
    _draft(backend)
    retry = [r for r in backend.asked if r.agent_id == "news"][1]
    assert "too early" in retry.messages[-1]["content"]


def test_the_same_seed_drafts_the_same_file() -> None:
    assert _draft(Writer()).text == _draft(Writer()).text


def test_bad_options_are_located(tmp_path) -> None:
    out = tmp_path / "x.yaml"
    result = CliRunner().invoke(app, ["scenario", "new", TOPIC, "--out", str(out), "--start", "2024-03-04 07:30"])
    assert result.exit_code == 2 and "--start" in result.output
    result = CliRunner().invoke(app, ["scenario", "new", "  ", "--out", str(out)])
    assert result.exit_code == 2 and "TOPIC" in result.output


@pytest.mark.parametrize("public,homes", [(2, 1), (3, 4), (6, 9), (12, 25)])
def test_the_map_is_connected(public: int, homes: int) -> None:
    ids = [f"p{i}" for i in range(public)]
    home_work = {f"h{j}": (ids[j % public] if j % 3 else None) for j in range(homes)}
    positions, paths = lay_out(ids, home_work)
    graph = nx.Graph([(a, b) for a, b, _ in paths])
    assert set(graph.nodes) == set(positions) == set(ids) | set(home_work)
    assert nx.is_connected(graph) and all(m >= 1 for _, _, m in paths)
    assert all(0 <= x <= 100 and 0 <= y <= 100 for x, y in positions.values())


def test_the_start_fixes_the_clock() -> None:
    fixed = authoring.DraftOptions(days=2, start=datetime(2024, 3, 4, 8, 0)).fixed
    assert fixed.hours == 24 + 15 and fixed.end == datetime(2024, 3, 5, 23, 0)


def test_names_start_with_letters_of_their_own(tmp_path) -> None:
    """Places and first names differ by construction: each starts with a seeded letter of its own."""
    path = tmp_path / "d.yaml"
    path.write_text(_draft(Writer(), people=6, places=5, seed=7).text)
    s = load(path).scenario
    public = [p.name.removeprefix("The ")[0] for p in s.town.places if p.kind != "home"]
    firsts = [e.persona.name[0] for e in s.personas]
    assert len(set(public)) == 5 and len(set(firsts)) == 6
    assert public != [p.name.removeprefix("The ")[0] for p in load_text(_draft(Writer(), places=5).text, tmp_path)
                      .town.places if p.kind != "home"]  # another seed, other letters


def load_text(text: str, folder) -> Any:
    path = folder / "other.yaml"
    path.write_text(text)
    return load(path).scenario
