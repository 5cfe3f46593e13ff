"""The wheel ships the viewer: built offline from this checkout, installed into a fresh virtual
environment, `agora ui` serves a run from there, with the ``ui`` package of that environment
(not this checkout's ui/, which a development install finds by accident).

No network: the wheel is built without build isolation (setuptools and wheel of the running
environment) and installed with ``--no-deps --no-index``; the new environment sees the
dependencies already installed here through a ``.pth`` file naming this environment's
site-packages, written after the install so pip never takes them for its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from rundb_support import make_traced_run_db

pytestmark = pytest.mark.heavy  # builds a wheel, installs it into a fresh environment, starts the viewer

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simulation", "ui")
IGNORED = shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.pyc", "*.egg-info", "build", "dist", "runs",
                                 ".pytest_cache", ".hypothesis", ".cache", ".whl", ".gl")


def _sources(target: Path) -> Path:
    """A copy of the checkout's sources (what git would commit, plus new files not ignored), so
    building never writes build/ or egg-info into the checkout others are working in."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    except (OSError, subprocess.SubprocessError):
        shutil.copytree(ROOT, target, ignore=IGNORED)
        return target
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is skipped
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _quiet_env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
                                                             "PYTHONSTARTUP", "PIP_REQUIRE_VIRTUALENV")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_NO_INDEX": "1", **more}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the copy of the sources it was built from)."""
    work = tmp_path_factory.mktemp("packaging")
    src = _sources(work / "src")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(work / "dist"), str(src)], capture_output=True, text=True, timeout=300,
                          env=_quiet_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    wheels = list((work / "dist").glob("agora-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], src


def test_the_wheel_holds_every_file_of_the_engine_and_the_viewer(built):
    """Modules, templates, data files and the viewer's pages: whatever the packages hold in the
    sources is in the wheel (a new kind of file needs its package-data line in pyproject.toml)."""
    wheel, src = built
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {p.relative_to(src).as_posix() for package in PACKAGES for p in (src / package).rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert {"ui/app.py", "ui/views/town.py", "simulation/rundb/metrics.py"} <= wanted
    assert not wanted - names, f"left out of the wheel: {sorted(wanted - names)}"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "agora = simulation.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _session_commands(session: int) -> Iterator[list[str]]:
    """Command lines of the processes in ``session`` (Linux /proc; nothing elsewhere)."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if os.getsid(int(entry.name)) == session:
                yield (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, ValueError):
            continue


WHERE = """
import json, sys
import simulation, simulation.rundb, ui, ui.db, ui.queries
with ui.db.RunDB(sys.argv[1]) as db:
    outcomes = ui.queries.summary(db)["outcomes"]
print(json.dumps({"files": [ui.__file__, simulation.__file__], "outcomes": outcomes}))
"""
"""Which ``ui`` and ``simulation`` the new environment imports, and the installed viewer's
summary of a run."""

PAGES = """
import json
from pathlib import Path
import ui
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(str(Path(ui.__file__).with_name("app.py")), default_timeout=60)
shown = {}
for page in ("town", "metrics"):
    if page != "town":
        at.switch_page(f"views/{page}.py")
    at.run()
    shown[page] = {"errors": [e.value for e in at.exception], "header": [h.value for h in at.header]}
print(json.dumps(shown))
"""
"""The installed app's pages, rendered by Streamlit's AppTest (no browser)."""


def _run_in(python: Path, script: str, cwd: Path, env: dict[str, str], *args: str) -> dict:
    """Run ``script`` with the new environment's python (from ``cwd``, not the checkout, so the
    checkout is not on its path); returns the JSON it prints last."""
    done = subprocess.run([str(python), "-c", script, *args], cwd=cwd, capture_output=True, text=True, timeout=180,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def installed(built, tmp_path: Path) -> Path:
    """A fresh virtual environment with the wheel installed and this environment's packages
    visible (read-only) for the dependencies; returns its python."""
    wheel, _ = built
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120,
                   env=_quiet_env())
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           str(wheel)], capture_output=True, text=True, timeout=300, env=_quiet_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60,
                          env=_quiet_env()).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "_agora_test_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    return python


def test_agora_ui_runs_from_a_fresh_install(installed, tmp_path):
    python, venv = installed, installed.parents[1].resolve()
    run_dir = make_traced_run_db(tmp_path / "runs" / "tiny")
    env = _quiet_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    where = _run_in(python, WHERE, tmp_path, env, str(run_dir))
    assert all(Path(f).resolve().is_relative_to(venv) for f in where["files"]), where["files"]
    assert where["outcomes"] == "party: 4/4 aware, 3 told; cider: 0/4 aware, 0 told", "the installed viewer reads a run"
    pages = _run_in(python, PAGES, tmp_path, {**env, "AGORA_UI_RUNS": str(run_dir),
                                                "AGORA_UI_RUNS_DIR": str(run_dir.parent)})
    assert pages == {"town": {"errors": [], "header": ["Town"]}, "metrics": {"errors": [], "header": ["Metrics"]}}

    port = _free_port()
    log = tmp_path / "agora-ui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(venv / "bin" / "agora"), "ui", str(run_dir), "--port", str(port)], cwd=tmp_path,
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"agora ui exited with {proc.returncode}: {log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                    if reply.read().strip() == b"ok":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no answer on {url}: {log.read_text()[-3000:]}"
            time.sleep(0.25)
        with urllib.request.urlopen(url, timeout=10) as page:
            assert b'<div id="root">' in page.read()
        if Path("/proc").is_dir():  # the server runs the installed app, not this checkout's
            served = [arg for cmd in _session_commands(proc.pid) if "streamlit" in cmd
                      for arg in cmd if arg.endswith("app.py")]
            assert served and all(Path(a).resolve().is_relative_to(venv) for a in served), served
    finally:
        _stop_session(proc)


def _stop_session(proc: subprocess.Popen) -> None:
    """End the session we started (agora and its streamlit child): SIGTERM, then SIGKILL after 20 s."""
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()  # reaps agora, so an exited one no longer counts as a member
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
    proc.wait(timeout=10)
