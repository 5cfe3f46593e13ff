"""The code the docs show runs as shown: docs/cognition.md's phases of one's own, in a real run, and
README's Python example."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, MINIMAL

from simulation.testing import ScriptedBackend


def _blocks(doc: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)


@pytest.fixture
def mytown(tmp_path, monkeypatch):
    """The docs' ``mytown`` package, written from the docs' own code blocks."""
    package = tmp_path / "mytown"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for block in _blocks(ROOT / "docs" / "cognition.md", "python"):
        first = block.splitlines()[0]
        if first.startswith("# mytown/"):
            (tmp_path / first[2:].strip()).write_text(block, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m == "mytown" or m.startswith("mytown.")]:
        del sys.modules[name]


def test_the_docs_phases_run_in_a_scenario_that_lists_them(mytown, tmp_path, embedder):
    import yaml

    from simulation import Simulation

    assert (mytown / "gossip.py").exists() and (mytown / "lookaround.py").exists()
    listed = next(b for b in _blocks(ROOT / "docs" / "cognition.md", "yaml") if "mytown." in b)
    data = yaml.safe_load(MINIMAL.read_text())
    data["cognition"] = yaml.safe_load(listed)["cognition"]
    data["events"].append({"at": "2023-02-13 07:30", "kind": "place_event", "place": "home_a", "duration_minutes": 120,
                           "text": "A juggler performs outside Home A."})
    path = tmp_path / "docs-town.yaml"
    path.write_text(yaml.safe_dump(data))
    with Simulation.from_yaml(path, backend=ScriptedBackend(), out=tmp_path / "runs", ticks=12) as sim:
        assert [p.name for p in sim.model.phases][3:5] == ["lookaround", "gossip"]
        sim.run()
        rows = sim.db.execute("select agent_id, kind, source, text from memories where source in ('perceived', "
                              "'reflected') and tick > 0").fetchall()
        asked = sim.db.execute("select count(*) from llm_calls where purpose = 'gossip' and parse_ok = 1").fetchone()[0]
    seen = [r for r in rows if r[1] == "observation" and " sees " in r[3]]
    gossip = [r for r in rows if r[1] == "thought" and r[2] == "reflected"]
    assert seen, "LookAround noted who else is there"
    assert asked > 0 and gossip, "Gossip asked where the juggler performs and remembered the answer"


def test_the_readmes_python_example_runs_as_shown(tmp_path, embedder, monkeypatch, capsys):
    """README's "From Python" block, with only the model swapped for the no-LLM control, the runs
    written under tmp_path and the resumed run's folder the one the block made: every attribute
    and call it shows exists and does what its comments say."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in _blocks(ROOT / "README.md", "python") if "Simulation.from_yaml" in b
                 and readme.index(b) > readme.index("## From Python"))
    made = 'Simulation.from_yaml("scenarios/valentines.yaml", seed=7, ticks=12)'
    resumed = re.search(r'Simulation\.resume\("(runs/[^"]+)"', block)
    assert made in block and resumed, "the README's example changed: update this test with it"
    code = block.replace(made, made[:-1] + ', backend="control", out=OUT)')
    code = code.replace(f'"{resumed.group(1)}"', "first_run")
    code = code.replace("# a stopped run", "first_run = sim.run_dir\n# a stopped run")
    monkeypatch.chdir(ROOT)
    namespace: dict = {"OUT": tmp_path / "runs"}
    exec(compile(code, "README.md (From Python)", "exec"), namespace)
    out = capsys.readouterr().out
    assert "1 2023-02-13 07:10:00" in out, "sim.tick and sim.now after one step, as the comment says"
    assert "Isabella Rodriguez" in out, "the party's aware people, the whispered Isabella first"
    assert namespace["rows"], "the utterances query returned the run's lines"
    assert namespace["sim"].tick == 18, "the resumed run went on for 6 more ticks"
