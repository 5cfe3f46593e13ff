"""The ``agora validate``, ``agora run`` and ``agora schema`` commands on good and bad input.

Exit codes: 0 valid, 2 bad input with a message naming file and line on stderr, never a traceback.
Real subprocesses are started together once per module (they are independent) to keep the tests
fast: one ``agora validate`` with the whole bad-input corpus, and ``agora run`` on a sample of it.
Every corpus file also goes through ``validate`` and ``run`` in-process (typer's CliRunner), which
exercises the same error-to-exit-code mapping without a process start per file. The tests of the
real processes are marked ``heavy`` (``make test-fast`` leaves them to ``make test``).
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import agora

from test_scenario import BAD_CASES, NAMED_FILE

ROOT = Path(__file__).resolve().parent.parent
BAD = "tests/data/bad"
GOOD = "tests/data/good"
AGORA = Path(sys.executable).parent / "agora"  # the console script installed next to this Python

# bad file -> (file named in the message, line, fragment of the message)
BAD_FILES = {
    "path_unknown_place.yaml": ("path_unknown_place.yaml", 11, "unknown place 'moon'"),
    "duplicate_key.yaml": ("duplicate_key.yaml", 15, "duplicate key 'name'"),
    "syntax_error.yaml": ("syntax_error.yaml", 4, "invalid YAML"),
    "python_tag.yaml": ("python_tag.yaml", 15, "YAML tag not allowed"),
    "inline_unquoted_time.yaml": ("inline_unquoted_time.yaml", 20, "quoted 'HH:MM'"),
    "refs_bad_persona.yaml": ("big_five_out_of_range.persona.yaml", 6, "big_five.openness"),
    "clock_feb30_unquoted.yaml": ("clock_feb30_unquoted.yaml", 4, "not a valid date"),
    "huge_int.yaml": ("huge_int.yaml", 16, "number too large"),
    "control_char.yaml": ("control_char.yaml", 2, "character U+0007 is not allowed"),
}

# `agora run` as a real process, on a sample of the corpus: binary, an alias bomb, a Python tag,
# values PyYAML itself cannot convert, an impossible clock and a bad referenced persona file.
RUN_SAMPLE = ("binary.yaml", "billion_laughs.yaml", "python_tag.yaml", "huge_int.yaml",
              "clock_feb30_unquoted.yaml", "clock_tick_longer_than_run.yaml", "refs_bad_persona.yaml")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AGORA_DEBUG", "FORCE_COLOR", "COLUMNS")}
    env["NO_COLOR"] = "1"
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "simulation.cli", *args]


@pytest.fixture(scope="module")
def tmp_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli")
    binary = d / "binary.yaml"
    binary.write_bytes(b"name: x\x00\xff\xfe")
    deep = d / "deep.yaml"
    deep.write_text("name: deep\nx: " + "[" * 200 + "]" * 200 + "\n")
    long_dir = d / ("a_directory_with_a_long_name_so_that_the_error_line_is_longer_than_eighty_columns")
    long_dir.mkdir()
    long_file = long_dir / "path_unknown_place.yaml"
    long_file.write_text((ROOT / BAD / "path_unknown_place.yaml").read_text())
    return {"binary": binary, "deep": deep, "long": long_file, "missing": d / "missing.yaml"}


@pytest.fixture(scope="module")
def runs(tmp_inputs: dict[str, Path]) -> dict[str, subprocess.CompletedProcess[str]]:
    calls: dict[str, list[str]] = {
        "valid": _cli("validate", "scenarios/valentines.yaml", f"{GOOD}/minimal.yaml"),
        # one call, several bad inputs next to a valid one: every problem is listed
        "mixed": _cli(
            "validate", f"{GOOD}/minimal.yaml", f"{BAD}/duplicate_place.yaml", f"{BAD}/empty.yaml",
            str(tmp_inputs["binary"]), str(tmp_inputs["deep"]),
        ),
        "missing": _cli("validate", str(tmp_inputs["missing"])),
        "long": _cli("validate", str(tmp_inputs["long"])),
        "schema": _cli("schema"),
        # the installed entry point, not python -m
        "schema_persona": [str(AGORA), "schema", "--kind", "persona"],
        "schema_nonsense": _cli("schema", "--kind", "nonsense"),
    }
    calls["corpus"] = _cli("validate", *(f"{BAD}/{name}" for name in sorted(BAD_CASES)))
    out = tmp_inputs["missing"].parent / "runs"
    for name in RUN_SAMPLE:
        calls[f"run:{name}"] = [str(AGORA), "run", f"{BAD}/{name}", "--out", str(out), "--quiet"]

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {key: pool.submit(run, args) for key, args in calls.items()}
        return {key: f.result() for key, f in futures.items()}


@pytest.fixture(scope="module")
def validated() -> dict[str, subprocess.CompletedProcess[str]]:
    """``agora validate`` of each of ``BAD_FILES``, one file at a time, in this process: the same
    command's messages without a process start each (``runs`` shows the real entry points and exit
    codes)."""
    return {name: _in_process("validate", f"{BAD}/{name}") for name in BAD_FILES}


def _in_process(*args: str) -> subprocess.CompletedProcess[str]:
    result = agora(*args)
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout
    assert "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr


def _flat(text: str) -> str:
    """Undo line wrapping of the terminal output for fragment checks."""
    return " ".join(text.split())


# --------------------------------------------------------------------------- validate


@pytest.mark.heavy
def test_valid_scenarios_exit_0(runs) -> None:
    proc = runs["valid"]
    assert proc.returncode == 0, proc.stderr
    _no_traceback(proc)
    assert proc.stdout.count("ok") >= 2
    assert "valentines.yaml" in proc.stdout and "minimal.yaml" in proc.stdout
    assert "25 people" in _flat(proc.stdout) and "240 ticks" in _flat(proc.stdout)
    assert proc.stderr.strip() == ""


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_exits_2_with_file_and_line(validated, name: str) -> None:
    proc = validated[name]
    named, line, fragment = BAD_FILES[name]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    _no_traceback(proc)
    assert f"{named}:{line}:" in proc.stderr, proc.stderr
    assert fragment in _flat(proc.stderr), proc.stderr
    assert "ok" not in proc.stdout


def test_bad_file_path_is_printed_as_given(validated) -> None:
    proc = validated["path_unknown_place.yaml"]
    assert f"{BAD}/path_unknown_place.yaml:11:" in proc.stderr


@pytest.mark.heavy
def test_several_files_every_problem_listed(runs, tmp_inputs) -> None:
    proc = runs["mixed"]
    assert proc.returncode == 2
    _no_traceback(proc)
    assert "RecursionError" not in proc.stderr
    assert "ok" in proc.stdout and "minimal.yaml" in proc.stdout  # the valid one is still checked
    err = _flat(proc.stderr)
    assert "4 problem(s)" in err
    assert "duplicate_place.yaml:10:" in proc.stderr and "duplicate place id 'cafe'" in err
    assert "empty.yaml" in proc.stderr and "is empty" in err
    assert "binary.yaml" in proc.stderr and "not a text file" in err
    assert "deep.yaml:2:" in proc.stderr and "nesting deeper" in err


@pytest.mark.heavy
def test_missing_file_exits_2(runs) -> None:
    proc = runs["missing"]
    assert proc.returncode == 2
    _no_traceback(proc)
    assert "missing.yaml" in proc.stderr
    assert "not found" in _flat(proc.stderr)
    assert proc.stdout.strip() == ""


@pytest.mark.heavy
def test_long_error_line_is_not_wrapped(runs, tmp_inputs) -> None:
    proc = runs["long"]
    assert proc.returncode == 2
    assert re.search(re.escape(str(tmp_inputs["long"])) + r":\d+:\d+: ", proc.stderr), proc.stderr


# --------------------------------------------------------------------------- schema


@pytest.mark.heavy
def test_schema_prints_json(runs) -> None:
    proc = runs["schema"]
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    assert {"clock", "town", "personas"} <= set(schema["properties"])


@pytest.mark.heavy
def test_schema_persona_prints_json(runs) -> None:
    proc = runs["schema_persona"]
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    assert "big_five" in schema["properties"]


@pytest.mark.heavy
def test_schema_unknown_kind_exits_2(runs) -> None:
    proc = runs["schema_nonsense"]
    assert proc.returncode == 2
    _no_traceback(proc)
    assert "nonsense" in proc.stderr
    assert proc.stdout.strip() == ""


# --------------------------------------------------------------------------- the whole bad-input corpus


def _named(name: str) -> str:
    return NAMED_FILE.get(name, name)


@pytest.mark.heavy
def test_validate_whole_corpus_in_one_process(runs) -> None:
    proc = runs["corpus"]
    assert proc.returncode == 2, proc.stderr[-2000:]
    _no_traceback(proc)
    assert proc.stdout.strip() == ""
    for name in BAD_CASES:
        assert _named(name) in proc.stderr, name


@pytest.mark.parametrize("name", RUN_SAMPLE)
@pytest.mark.heavy
def test_run_on_bad_input_exits_2_before_starting(runs, tmp_inputs, name: str) -> None:
    proc = runs[f"run:{name}"]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    _no_traceback(proc)
    assert _named(name) in proc.stderr
    assert proc.stdout.strip() == "", "no run directory is printed"
    assert not (tmp_inputs["missing"].parent / "runs").exists(), "nothing is created for bad input"


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_every_corpus_file_exits_2_in_process(tmp_path: Path, name: str, command: str) -> None:
    extra = ["--out", str(tmp_path / "runs"), "--quiet"] if command == "run" else []
    result = agora(command, str(ROOT / BAD / name), *extra)
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert not (tmp_path / "runs").exists()
    if name.endswith(".persona.yaml"):
        # The CLI reads its argument as a scenario; a persona file may fail as one for other reasons.
        assert name in result.stderr, result.stderr
        return
    fragments, line, _ = BAD_CASES[name]
    where = f"{_named(name)}:{line}:" if line is not None else _named(name)
    assert where in result.stderr, result.stderr
    for fragment in (fragments,) if isinstance(fragments, str) else fragments:
        assert fragment in _flat(result.stderr), result.stderr
