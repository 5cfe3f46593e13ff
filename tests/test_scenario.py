"""Scenario and persona loading: the flagship scenario, a minimal valid one, and bad input.

Every bad input must end in ``InputError`` (never another exception) whose text names the
file, the line (``file:LINE:COL: field: message``), the field path and what is wrong.
Bad files live in tests/data/bad/; files named ``*.persona.yaml`` are persona files (loaded
with ``load_persona``), every other file is a scenario (loaded with ``load``). Binary and
generated inputs are written to tmp_path by the tests themselves.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from simulation.errors import InputError, Problem
from simulation.scenario import LoadedScenario, Persona, json_schema, load, load_persona

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
BAD = DATA / "bad"
GOOD = DATA / "good"
FLAGSHIP = ROOT / "scenarios" / "valentines.yaml"
PERSONA_FILES = sorted((ROOT / "personas").glob("*.yaml"))
TOWNSFOLK_FILES = sorted((ROOT / "personas" / "townsfolk").glob("*.yaml"))

# --------------------------------------------------------------------------- helpers


def _load_any(path: Path) -> object:
    return load_persona(path) if path.name.endswith(".persona.yaml") else load(path)


def _raise_input_error(path: Path, loader=None) -> InputError:
    """Load ``path``; it must raise InputError and nothing else (any other exception fails the test)."""
    loader = loader or _load_any
    try:
        loader(path)
    except InputError as exc:
        assert exc.problems, "InputError without problems"
        assert all(isinstance(p, Problem) for p in exc.problems)
        return exc
    pytest.fail(f"{path.name} loaded without error")


def _check(exc: InputError, file_name: str, fragments, line: int | None, field: str | None) -> None:
    """One problem must name ``file_name``, ``line``, ``field`` and contain every fragment; so must str(exc)."""
    fragments = (fragments,) if isinstance(fragments, str) else tuple(fragments)
    text = str(exc)
    matching = [
        p
        for p in exc.problems
        if Path(p.file).name == file_name
        and all(f in p.message for f in fragments)
        and (line is None or p.line == line)
        and (field is None or field in p.field)
    ]
    assert matching, f"no problem in {file_name} at line {line}, field {field!r} with {fragments}; got:\n{text}"
    # The rendered text: file:LINE:COL: field: message
    where = re.escape(file_name) + (rf":{line}:\d+" if line is not None else r"(:\d+:\d+)?")
    what = rf"[^\n]*{re.escape(field)}[^\n]*: " if field else ""
    for fragment in fragments:
        pattern = rf"{where}: {what}[^\n]*{re.escape(fragment)}"
        assert re.search(pattern, text), f"{pattern!r} not in:\n{text}"


# --------------------------------------------------------------------------- valid files


@pytest.fixture(scope="module")
def flagship() -> LoadedScenario:
    return load(FLAGSHIP)


def test_flagship_people_and_places(flagship: LoadedScenario) -> None:
    sc = flagship.scenario
    assert len(flagship.people) == 25
    assert len(sc.personas) == 25
    assert len(sc.town.places) >= 30
    ids = [p.persona.id for p in flagship.people]
    assert len(set(ids)) == 25
    place_ids = {p.id for p in sc.town.places}
    for person in flagship.people:
        assert isinstance(person.persona, Persona)
        assert person.home in place_ids
        assert person.start_place in place_ids
        assert Path(person.source).is_file()
        assert flagship.persona(person.persona.id) is person.persona


def test_flagship_every_persona_resolves(flagship: LoadedScenario) -> None:
    ids = {p.persona.id for p in flagship.people}
    expected = {path.stem for path in PERSONA_FILES + TOWNSFOLK_FILES}
    assert ids == expected
    # start_place defaults to home; explicit ones are kept
    by_id = {p.persona.id: p for p in flagship.people}
    assert by_id["daniel_okafor"].start_place == by_id["daniel_okafor"].home == "okafor_house"
    assert by_id["walter_hughes"].start_place == "harvey_oak_supply"
    assert by_id["margaret_ashby"].start_place == "johnson_park"


def test_flagship_clock_and_whisper(flagship: LoadedScenario) -> None:
    sc = flagship.scenario
    assert sc.clock.total_ticks == 240, "two game days"
    assert sc.clock.start == datetime(2023, 2, 13, 7, 0)
    assert sc.clock.time_at(sc.clock.total_ticks) == datetime(2023, 2, 14, 23, 0)
    whispers = [e for e in sc.events if e.kind == "whisper"]
    assert whispers
    first = whispers[0]
    assert first.to == "isabella_rodriguez"
    assert first.at == sc.clock.start
    assert sc.clock.tick_at(first.at) == 0
    assert "party" in first.text.lower()


def test_flagship_probes_and_source(flagship: LoadedScenario) -> None:
    sc = flagship.scenario
    assert len(sc.probes) >= 1
    assert all(p.question for p in sc.probes)
    assert {f.id for f in sc.facts} == {"party", "market"}
    party = next(f for f in sc.facts if f.id == "party")
    assert [(d.name, d.kind, d.value) for d in party.details] == [
        ("place", "place", "hobbs_cafe"), ("day", "date", "2023-02-14"), ("time", "time", "17:00-19:00")]
    assert [e.fact for e in sc.events] == ["party", "market", None]
    assert sc.probes[0].fact == "party" and sc.topics == []
    assert flagship.source_text == FLAGSHIP.read_text("utf-8")
    assert Path(flagship.path).name == "valentines.yaml"


@pytest.mark.parametrize("path", PERSONA_FILES, ids=lambda p: p.stem)
def test_every_persona_file_loads_alone(path: Path) -> None:
    persona = load_persona(path)
    assert isinstance(persona, Persona)
    assert persona.id == path.stem
    assert 0.0 <= persona.big_five.openness <= 1.0
    assert persona.routine.wake != persona.routine.sleep


def test_there_are_eight_persona_files() -> None:
    assert len(PERSONA_FILES) == 8


def test_minimal_valid_scenario_loads() -> None:
    loaded = load(GOOD / "minimal.yaml")
    sc = loaded.scenario
    assert [p.id for p in sc.town.places] == ["home_a", "cafe"]
    assert len(sc.town.paths) == 1
    assert [p.persona.id for p in loaded.people] == ["ann", "bob"]
    assert loaded.people[0].start_place == "home_a"
    assert loaded.people[1].start_place == "cafe"
    assert all(p.source.endswith("(inline)") for p in loaded.people)
    assert sc.clock.total_ticks == 12
    assert sc.llm.backend == "llamacpp" and sc.llm.model is None  # defaults
    assert loaded.persona("bob").routine.wake.strftime("%H:%M") == "05:45"


# --------------------------------------------------------------------------- bad files

# file name -> (expected message fragment(s), line or None, field path substring or None)
BAD_CASES: dict[str, tuple[str | tuple[str, ...], int | None, str | None]] = {
    "empty.yaml": ("scenario file is empty", None, None),
    "syntax_error.yaml": (("invalid YAML", "mapping values are not allowed"), 4, None),
    "top_level_list.yaml": ("must be a mapping of fields, found a list", 1, None),
    "persona_top_level_list.persona.yaml": ("a persona file must be a mapping of fields, found a list", 1, None),
    "clock_list.yaml": ("valid dictionary", 2, "clock"),
    "unknown_key_top.yaml": ("unknown key 'colour'", 15, "colour"),
    "unknown_key_place.yaml": ("unknown key 'size'", 9, "town.places[1].size"),
    "path_unknown_place.yaml": ("unknown place 'moon'", 11, "town.paths[0].between[1]"),
    "path_self_loop.yaml": ("a path from 'cafe' to itself", 12, "town.paths[1].between"),
    "disconnected.yaml": ("place 'island' cannot be reached", 10, "town.places[2].id"),
    "duplicate_place.yaml": ("duplicate place id 'cafe'", 10, "town.places[2].id"),
    "duplicate_persona_file.yaml": ("duplicate persona id 'isabella_rodriguez'", 15, "personas[1]"),
    "duplicate_persona_inline.yaml": ("duplicate persona id 'ann'", 23, "personas[1]"),
    "negative_tick.yaml": ("greater than or equal to 1", 4, "clock.tick_minutes"),
    "persona_file_missing.yaml": (("persona file not found", "nobody_here.yaml"), 13, "personas[0].file"),
    "persona_both.yaml": ("give exactly one of 'file' or 'persona'", 13, "personas[0]"),
    "persona_neither.yaml": ("give exactly one of 'file' or 'persona'", 13, "personas[0]"),
    "unquoted_wake.persona.yaml": ("quoted 'HH:MM'", 12, "routine.wake"),
    "inline_unquoted_time.yaml": ("quoted 'HH:MM'", 20, "personas[0].persona.routine.wake"),
    "big_five_out_of_range.persona.yaml": ("less than or equal to 1", 6, "big_five.openness"),
    # the problem is in the referenced persona file, so it names that file and its line
    "refs_bad_persona.yaml": ("less than or equal to 1", 6, "big_five.openness"),
    "duplicate_key.yaml": ("duplicate key 'name' (first defined on line 1)", 15, "name"),
    "python_tag.yaml": (("YAML tag not allowed", "python/object/apply:os.system"), 15, None),
    "whisper_unknown.yaml": ("unknown persona 'nobody'", 16, "events[0].to"),
    "whisper_without_to.yaml": ("a whisper needs 'to'", 16, "events[0]"),
    "event_outside.yaml": ("2023-02-14 07:00 is outside the run", 16, "events[0].at"),
    "place_event_unknown_place.yaml": ("unknown place 'moon'", 16, "events[0].place"),
    "probe_unknown.yaml": ("unknown persona 'nobody'", 16, "probes[0].agents[1]"),
    "llm_backend.yaml": ("'llamacpp', 'vllm', 'openai' or 'control'", 16, "llm.backend"),
    "llm_model_missing.yaml": (("model file not found", "no_such_model.gguf"), 16, "llm.model"),
    "home_unknown_place.yaml": ("unknown place 'castle'", 14, "personas[0].home"),
    "missing_name.yaml": ("required field is missing", None, "name"),
    "bad_place_id.yaml": ("should match pattern", 9, "town.places[1].id"),
    "duplicate_topic.yaml": ("duplicate topic id 'party'", 17, "topics[1].id"),
    "fact_unknown.yaml": ("unknown fact 'rumour'", 16, "events[0].fact"),
    "fact_bad_date.yaml": ("a date detail's value is 'YYYY-MM-DD', not 'Feb 14'", 19, "facts[0].details[0]"),
    "fact_unknown_place.yaml": ("unknown place 'moon'", 19, "facts[0].details[0].value"),
    "probe_unknown_fact.yaml": ("unknown fact 'parti'", 18, "probes[0].fact"),
    "beat_unknown_fact.yaml": ("unknown fact 'rumour'", 19, "story.beats[0].fact"),
    "prop_unknown_object.yaml": ("'harp' is not one of the objects at 'cafe' (counter, piano)", 16,
                                 "events[0].object"),
    "beat_fact_and_place.yaml": ("names exactly one of them", 19, "story.beats[0]"),
    "beat_count_over_all.yaml": ("3 is more than the 1 named people who are ever in the town", 19,
                                 "story.beats[0].count"),
    "routine_unknown_place.yaml": ("unknown place 'pub' (home, work or a place of the town)", 25,
                                   "personas[0].persona.routine.day[2].place"),
    "routine_not_on_the_hour.persona.yaml": ("habits start on the hour ('12:00')", 11, "routine.day[1].at"),
    # impossible clocks
    "clock_zero_duration.yaml": ("greater than 0", 6, "clock.duration_hours"),
    "clock_feb30.yaml": ("day value is outside expected range", 4, "clock.start"),
    "clock_feb30_unquoted.yaml": ("'2023-02-30' is not a valid date (day is out of range for month)", 4, "clock.start"),
    "clock_tick_longer_than_run.yaml": ("tick_minutes (240) is longer than the whole run", 3, "clock"),
    "clock_past_year_9999.yaml": ("would end after the year 9999", 3, "clock"),
    "clock_timezone.yaml": ("should not have timezone info", 4, "clock.start"),
    "clock_fractional_tick.yaml": ("valid integer, got a number with a fractional part", 5, "clock.tick_minutes"),
    # enormous values
    "huge_int.yaml": ("number too large (5,000 digits)", 16, "seed"),
    "huge_float.yaml": ("finite number", 6, "clock.duration_hours"),
    "huge_name.yaml": ("at most 200 characters", 2, "name"),
    "huge_backstory.persona.yaml": ("at most 4000 characters", 13, "backstory"),
    "huge_age.persona.yaml": ("less than or equal to 120", 4, "age"),
    "nan_position.yaml": ("finite number", 10, "town.places[1].position[0]"),
    "billion_laughs.yaml": ("expands to more than 200,000 values", 1, None),
    # nesting, binary and encodings, nothing in the file
    "deep_nesting.yaml": ("nesting deeper than 64 levels", 3, None),
    "binary.yaml": ("not a text file", 3, None),
    "latin1.persona.yaml": ("not a UTF-8 text file", 3, None),
    "utf16.yaml": ("UTF-16 text; save it as UTF-8", None, None),
    "control_char.yaml": ("character U+0007 is not allowed", 2, None),
    "comments_only.persona.yaml": ("persona file has no YAML content", None, None),
    "null.persona.yaml": ("must be a mapping of fields, found nothing (null)", 1, None),
    "scalar_top_level.yaml": ("must be a mapping of fields, found a string", 1, None),
    # syntax
    "syntax_tab_indent.yaml": (("invalid YAML", "found character '\\t'"), 5, None),
    "syntax_unclosed_quote.persona.yaml": (("invalid YAML", "found unexpected end of stream"), 19, None),
    "syntax_unclosed_bracket.yaml": (("invalid YAML", "expected ',' or ']'"), 12, None),
    "two_documents.yaml": (("invalid YAML", "expected a single document"), 16, None),
    "merge_not_mapping.yaml": (("invalid YAML", "mapping or list of mappings for merging"), 17, None),
    "unhashable_key.yaml": (("invalid YAML", "found unhashable key"), 16, None),
    # tags
    "include_tag.yaml": ("YAML tag not allowed: '!include'", 13, None),
    "python_name_tag.persona.yaml": (("YAML tag not allowed", "python/name:os.system"), 3, None),
    "python_object_new.persona.yaml": (("YAML tag not allowed", "python/object/new:subprocess.Popen"), 13, None),
    # wrong types
    "wrong_type_age.persona.yaml": ("valid integer", 4, "age"),
    "wrong_type_traits.persona.yaml": ("valid list", 6, "traits"),
    "wrong_type_big_five.persona.yaml": ("valid dictionary", 7, "big_five"),
    "wrong_type_personas.yaml": ("valid list", 13, "personas"),
    "wrong_type_minutes.yaml": ("valid integer", 12, "town.paths[0].minutes"),
    "name_newline.persona.yaml": ("must be one line of text", 3, "name"),
    # unknown keys and references, duplicates
    "unknown_key.persona.yaml": ("unknown key 'hobbies'", 19, "hobbies"),
    "duplicate_key.persona.yaml": ("duplicate key 'age' (first defined on line 4)", 19, "age"),
    "relationship_self.persona.yaml": ("'pat' is this person's own id", 17, "relationships"),
    "relationship_bad_id.persona.yaml": ("key 'Ann Archer' is not a lower_snake_case id", 18,
                                         "relationships.Ann Archer"),
    "relationship_unknown_inline.yaml": ("unknown persona 'zed'", 31, "personas[1].persona.relationships.zed"),
    "event_kind_unknown.yaml": ("'arrival', 'departure', 'correction' or 'prop'", 17, "events[0].kind"),
    "embedding_model_missing.yaml": (("no sentence-transformers model folder", "no_such_model_folder"), 17,
                                     "memory.embedding_model"),
    "persona_file_name_too_long.yaml": ("persona file cannot be opened", 14, "personas[0].file"),
    "name_path_traversal.yaml": ("must not contain '/'", 2, "name"),
}

# The kinds of bad input issue 8 asks the corpus to cover, each with files that show it.
KINDS: dict[str, tuple[str, ...]] = {
    "syntax error": ("syntax_error.yaml", "syntax_tab_indent.yaml", "syntax_unclosed_quote.persona.yaml",
                     "syntax_unclosed_bracket.yaml", "two_documents.yaml"),
    "wrong type": ("clock_list.yaml", "wrong_type_age.persona.yaml", "wrong_type_traits.persona.yaml",
                   "wrong_type_big_five.persona.yaml", "wrong_type_personas.yaml", "inline_unquoted_time.yaml"),
    "unknown key": ("unknown_key_top.yaml", "unknown_key_place.yaml", "unknown_key.persona.yaml"),
    "unknown reference": ("path_unknown_place.yaml", "whisper_unknown.yaml", "probe_unknown.yaml",
                          "relationship_unknown_inline.yaml", "persona_file_missing.yaml", "beat_unknown_fact.yaml"),
    "duplicate": ("duplicate_key.yaml", "duplicate_key.persona.yaml", "duplicate_place.yaml",
                  "duplicate_persona_file.yaml", "duplicate_topic.yaml"),
    "impossible clock": ("negative_tick.yaml", "clock_zero_duration.yaml", "clock_feb30.yaml",
                         "clock_feb30_unquoted.yaml", "clock_tick_longer_than_run.yaml", "clock_past_year_9999.yaml"),
    "empty file": ("empty.yaml", "comments_only.persona.yaml", "null.persona.yaml"),
    "binary file": ("binary.yaml", "latin1.persona.yaml", "utf16.yaml", "control_char.yaml"),
    "enormous value": ("huge_int.yaml", "huge_float.yaml", "huge_name.yaml", "huge_backstory.persona.yaml",
                       "huge_age.persona.yaml"),
    "deep nesting or aliases": ("deep_nesting.yaml", "billion_laughs.yaml"),
    "YAML tag": ("python_tag.yaml", "python_name_tag.persona.yaml", "python_object_new.persona.yaml",
                 "include_tag.yaml"),
}

# cases whose problem is reported against another file than the one loaded
NAMED_FILE = {"refs_bad_persona.yaml": "big_five_out_of_range.persona.yaml"}


def test_bad_table_matches_bad_directory() -> None:
    on_disk = {p.name for p in BAD.iterdir() if p.is_file()}
    assert on_disk == set(BAD_CASES)
    assert len(BAD_CASES) >= 30


def test_corpus_covers_every_kind_of_bad_input() -> None:
    for kind, names in KINDS.items():
        assert names and set(names) <= set(BAD_CASES), kind


def test_binary_corpus_files_are_really_binary() -> None:
    assert b"\x00" in (BAD / "binary.yaml").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        (BAD / "latin1.persona.yaml").read_bytes().decode("utf-8")
    assert (BAD / "utf16.yaml").read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_file_gives_one_problem_per_mistake(name: str) -> None:
    """Each corpus file holds one mistake, so it must produce exactly one message (no cascades)."""
    several = {"bad_place_id.yaml": 2,  # one bad id, used in two places
               "fact_unknown_place.yaml": 2,  # an unknown place and an unknown persona
               "routine_unknown_place.yaml": 2}  # 'work' without a workplace, and an unknown place
    exc = _raise_input_error(BAD / name)
    assert len(exc.problems) == several.get(name, 1), str(exc)
    assert "Traceback" not in str(exc)


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_file_gives_located_input_error(name: str) -> None:
    fragments, line, field = BAD_CASES[name]
    exc = _raise_input_error(BAD / name)
    _check(exc, NAMED_FILE.get(name, name), fragments, line, field)


def test_bad_persona_in_referenced_file_names_the_persona_file() -> None:
    exc = _raise_input_error(BAD / "refs_bad_persona.yaml")
    assert all(Path(p.file).name == "big_five_out_of_range.persona.yaml" for p in exc.problems)
    assert "refs_bad_persona.yaml" not in str(exc)
    assert "big_five_out_of_range.persona.yaml:6:" in str(exc)


def test_inline_bad_persona_names_the_scenario() -> None:
    exc = _raise_input_error(BAD / "inline_unquoted_time.yaml")
    assert all(Path(p.file).name == "inline_unquoted_time.yaml" for p in exc.problems)


def test_persona_file_is_not_a_scenario() -> None:
    # a persona file given where a scenario belongs: its keys are unknown to a scenario
    with pytest.raises(InputError, match="unknown key"):
        load(BAD / "unquoted_wake.persona.yaml")


# --------------------------------------------------------------------------- generated bad input


def test_missing_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "no_such_scenario.yaml"
    exc = _raise_input_error(path, load)
    _check(exc, "no_such_scenario.yaml", "scenario file not found", None, None)


def test_missing_persona_file(tmp_path: Path) -> None:
    path = tmp_path / "no_such_persona.yaml"
    exc = _raise_input_error(path, load_persona)
    _check(exc, "no_such_persona.yaml", "persona file not found", None, None)


def test_directory_instead_of_scenario(tmp_path: Path) -> None:
    exc = _raise_input_error(tmp_path, load)
    assert "found a directory" in str(exc)


def test_comment_only_file(tmp_path: Path) -> None:
    path = tmp_path / "comments.yaml"
    path.write_text("# nothing here\n# at all\n")
    exc = _raise_input_error(path, load)
    _check(exc, "comments.yaml", "no YAML content", None, None)


def test_whitespace_only_file_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "blank.yaml"
    path.write_text("   \n\n\t\n")
    exc = _raise_input_error(path, load)
    _check(exc, "blank.yaml", "is empty", None, None)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"name: mini\x00\nclock: {}\n", "not a text file"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "not a text file"),
        (b"name: caf\xe9\n", "not a UTF-8 text file"),
        (b"\xff\xfe\xfa", "not a UTF-8 text file"),
    ],
    ids=["nul", "png", "latin1", "garbage"],
)
def test_binary_file_is_refused(tmp_path: Path, content: bytes, fragment: str) -> None:
    for loader in (load, load_persona):
        path = tmp_path / "binary.yaml"
        path.write_bytes(content)
        exc = _raise_input_error(path, loader)
        _check(exc, "binary.yaml", fragment, None, None)


def test_binary_persona_referenced_from_scenario(tmp_path: Path) -> None:
    (tmp_path / "pat.yaml").write_bytes(b"id: pat\x00\x01\x02")
    scenario = tmp_path / "scenario.yaml"
    text = textwrap.dedent(
        """\
        name: mini
        clock: {start: "2023-02-13 07:00"}
        town:
          places: [{id: home_a, name: Home A, kind: home}]
        personas:
          - {file: pat.yaml, home: home_a}
        """
    )
    scenario.write_text(text)
    exc = _raise_input_error(scenario, load)
    _check(exc, "pat.yaml", "not a text file", None, None)


@pytest.mark.parametrize("levels", [200, 600])
def test_deeply_nested_lists(tmp_path: Path, levels: int) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("name: deep\nx: " + "[" * levels + "]" * levels + "\n")
    exc = _raise_input_error(path, load)  # a RecursionError would fail the test here
    assert "deep.yaml" in str(exc)
    assert "nest" in str(exc)


def test_deeply_nested_block_mappings(tmp_path: Path) -> None:
    path = tmp_path / "deep_block.yaml"
    path.write_text("".join("  " * i + "a:\n" for i in range(200)) + "  " * 200 + "b: 1\n")
    exc = _raise_input_error(path, load_persona)
    _check(exc, "deep_block.yaml", "nesting deeper than", 66, None)


def test_self_referencing_alias(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("name: loop\nx: &a [*a]\n")
    exc = _raise_input_error(path, load)
    assert "loop.yaml:2:" in str(exc)


def test_multiple_documents_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text((GOOD / "minimal.yaml").read_text() + "---\nname: second\n")
    exc = _raise_input_error(path, load)
    assert "invalid YAML" in str(exc) and "two.yaml:" in str(exc)


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system",
        "!!python/object/apply:subprocess.call",
        "!!python/object/new:os.system",
    ],
)
def test_python_tags_never_execute(tmp_path: Path, tag: str, capfd: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    arg = f'["touch {marker}"]' if "os.system" in tag else f'[["touch", "{marker}"]]'
    path.write_text(f"name: evil\ndescription: {tag} {arg}\n")
    exc = _raise_input_error(path, load)
    _check(exc, "evil.yaml", "YAML tag not allowed", 2, None)
    assert not marker.exists()
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_python_name_tag_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "name_tag.yaml"
    path.write_text("name: !!python/name:os.system ''\n")
    exc = _raise_input_error(path, load)
    _check(exc, "name_tag.yaml", "YAML tag not allowed", 1, None)


def test_committed_python_tag_file_does_not_run_echo(capfd: pytest.CaptureFixture[str]) -> None:
    _raise_input_error(BAD / "python_tag.yaml", load)
    out, err = capfd.readouterr()
    assert "hi" not in out and "hi" not in err


def test_unquoted_time_in_persona_tells_to_quote(tmp_path: Path) -> None:
    exc = _raise_input_error(BAD / "unquoted_wake.persona.yaml", load_persona)
    assert "'HH:MM'" in str(exc)
    assert "routine.wake" in str(exc)


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    # two independent reference errors in one file: both are reported
    text = (GOOD / "minimal.yaml").read_text()
    text = text.replace("to: ann", "to: nobody").replace("agents: [ann, bob]", "agents: [ann, zed]")
    path = tmp_path / "two_problems.yaml"
    path.write_text(text)
    exc = _raise_input_error(path, load)
    assert len(exc.problems) == 2
    _check(exc, "two_problems.yaml", "unknown persona 'nobody'", None, "events[0].to")
    _check(exc, "two_problems.yaml", "unknown persona 'zed'", None, "probes[0].agents[1]")


# --------------------------------------------------------------------------- bugs found in review (regression tests)


def test_timezone_aware_start_with_naive_event_is_input_error(tmp_path: Path) -> None:
    text = (GOOD / "minimal.yaml").read_text().replace('start: "2023-02-13 07:00"', 'start: "2023-02-13 07:00+01:00"')
    path = tmp_path / "tz.yaml"
    path.write_text(text)
    with pytest.raises(InputError):
        load(path)


def test_llm_model_with_unknown_user_home_is_input_error(tmp_path: Path) -> None:
    text = (GOOD / "minimal.yaml").read_text() + 'llm:\n  model: "~agora_no_such_user_zz/model.gguf"\n'
    path = tmp_path / "tilde.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match="llm.model"):
        load(path)


def test_refused_tag_is_named_in_full() -> None:
    exc = _raise_input_error(BAD / "python_tag.yaml", load)
    text = str(exc)
    assert "'tag:yaml.org,2002:python/object/apply:os.system'" in text or "!!python/object/apply:os.system" in text


def test_alias_bomb_is_handled_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size < 600
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from simulation.errors import InputError\n"
        "from simulation.scenario import load\n"
        "try:\n"
        "    load(sys.argv[1])\n"
        "except InputError as exc:\n"
        "    print('INPUT-ERROR', exc)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        finished = False
    else:
        finished = True
    # Expanded, the bomb is 10**9 items: past the 2 GiB address-space limit at once, so a loader that
    # expands it fails with MemoryError long before the deadline, which only guards against a hang
    # (it is no speed assertion: a busy machine takes its time importing).
    assert finished, "loading a 450-byte alias bomb did not finish within 120 s"
    assert proc.returncode == 0 and "INPUT-ERROR" in proc.stdout, proc.stderr[-2000:]


# --------------------------------------------------------------------------- JSON schema


def test_json_schema_scenario() -> None:
    schema = json_schema("scenario")
    assert isinstance(schema, dict)
    assert {"clock", "town", "personas"} <= set(schema["properties"])
    assert schema["title"] == "Agora scenario"
    assert "$schema" in schema
    assert "additionalProperties" in schema and schema["additionalProperties"] is False


def test_json_schema_persona() -> None:
    schema = json_schema("persona")
    assert isinstance(schema, dict)
    assert "big_five" in schema["properties"]
    assert {"id", "routine"} <= set(schema["properties"])
    assert schema["title"] == "Agora persona"


def test_json_schema_default_is_scenario() -> None:
    assert json_schema() == json_schema("scenario")


def test_union_field_errors_name_the_users_field_once(tmp_path: Path) -> None:
    import yaml as _yaml

    data = _yaml.safe_load((GOOD / "minimal.yaml").read_text())
    data["probes"] = [{"question": "Hi?", "agents": ["ann", "Bob"]}]  # 'Bob' is not an id
    path = tmp_path / "union.yaml"
    path.write_text(_yaml.safe_dump(data))
    exc = _raise_input_error(path, load)
    fields = [p.field for p in exc.problems]
    assert fields == ["probes[0].agents[1]"], fields


def test_event_in_the_last_partial_tick_is_refused(tmp_path: Path) -> None:
    import yaml as _yaml

    data = _yaml.safe_load((GOOD / "minimal.yaml").read_text())
    assert data["clock"]["start"] == "2023-02-13 07:00"
    data["clock"].update({"tick_minutes": 60, "duration_hours": 2.5})  # ticks at 07:00 and 08:00 only
    persona_id = data["personas"][0]["persona"]["id"]
    # Before the end of the run (09:30), but due at tick 2, which a 2-tick run never reaches.
    data["events"] = [{"at": "2023-02-13 08:30", "kind": "whisper", "to": persona_id, "text": "x"}]
    path = tmp_path / "late.yaml"
    path.write_text(_yaml.safe_dump(data))
    exc = _raise_input_error(path, load)
    assert any(p.field == "events[0].at" and "outside the run" in p.message for p in exc.problems), str(exc)


def test_the_flagship_is_a_town_where_people_meet(flagship: LoadedScenario) -> None:
    """Every one of the 25 has a usual day of habits, all at places of the town, and the habits
    overlap: at breakfast, lunch and in the evening several people share a place."""
    from collections import Counter

    from simulation.formats.persona import HOME, WORK

    places = {p.id for p in flagship.scenario.town.places}
    at: Counter[tuple[int, str]] = Counter()  # (hour, place) -> people whose habit has them there
    for rp in flagship.people:
        day = rp.persona.routine.day
        assert 5 <= len(day) <= 12 and not rp.habits_left_out, rp.persona.id
        for habit in day:
            assert habit.place in places | {HOME, WORK}, (rp.persona.id, habit.place)
            assert habit.place != WORK or rp.workplace, rp.persona.id
        for hour in range(day[0].at.hour, rp.persona.routine.sleep.hour):
            habit = [h for h in day if h.at.hour <= hour][-1]
            if habit.place != HOME:
                at[(hour, {WORK: rp.workplace}.get(habit.place, habit.place))] += 1
    assert at[(7, "hobbs_cafe")] >= 3, "breakfast at the cafe"
    assert max(n for (h, _), n in at.items() if 12 <= h <= 13) >= 3, "lunch together"
    assert max(n for (h, _), n in at.items() if h >= 19) >= 4, "an evening crowd"


def test_the_small_flagship_keeps_the_eight_and_the_baseline_clock() -> None:
    small = load(ROOT / "scenarios" / "valentines-small.yaml")
    assert len(small.people) == 8 and small.scenario.clock.total_ticks == 216
    assert not any(rp.habits_left_out for rp in small.people), "the eight's habits are at places of both towns"


def test_a_fixed_recognition_threshold_and_a_margin_are_not_both_set(tmp_path: Path) -> None:
    text = (GOOD / "minimal.yaml").read_text() + "cognition:\n  recognition: 0.46\n  recognition_margin: 0.2\n"
    path = tmp_path / "both.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match="choose one"):
        load(path)
    path.write_text((GOOD / "minimal.yaml").read_text() + "cognition:\n  recognition_margin: 0.2\n")
    assert load(path).scenario.cognition.recognition_margin == 0.2
