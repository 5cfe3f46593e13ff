"""`agora ui`: start the Streamlit viewer (ui/app.py) on a run or a folder of runs.

The viewer runs in its own process (``python -m streamlit run``), bound to 127.0.0.1 unless
told otherwise, headless and with Streamlit's usage statistics off, so it never reaches
the internet. Its arguments travel in environment variables the app reads (see
ui/catalog.py). The engine is not imported here: the viewer reads run.db only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from simulation.cli import common
from simulation.cli.common import user_errors
from simulation.errors import InputError, Problem, RunError

__all__ = ["APP", "check_inputs", "serve", "streamlit_command", "ui"]

APP = Path(__file__).resolve().parents[2] / "ui" / "app.py"


def streamlit_command(app: Path, host: str, port: int) -> list[str]:
    """The Streamlit invocation: local, headless, no telemetry, no file watching."""
    return [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--browser.serverAddress", host,
        "--server.fileWatcherType", "none", "--server.runOnSave", "false",
        "--global.developmentMode", "false", "--client.toolbarMode", "viewer",
    ]


def _port_free(host: str, port: int) -> bool:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError:
            return False
    return True


def check_inputs(named: list[Path], runs_dir: Path, host: str, port: int) -> list[Problem]:
    """Everything wrong with the command line, as located problems (empty when all is well)."""
    problems = []
    for path in named:
        if not path.exists():
            problems.append(Problem(str(path), "no such run directory"))
        elif path.is_dir() and not (path / "run.db").is_file() and not (path / "evolve.db").is_file():
            problems.append(Problem(str(path), "not a run directory (it has no run.db) nor an `agora evolve` "
                                               "folder (no evolve.db)"))
        elif path.is_file() and path.name not in ("run.db", "evolve.db"):
            problems.append(Problem(str(path), "expected a run directory (or its run.db), or an evolve folder"))
    if not named and not runs_dir.is_dir():
        problems.append(Problem(str(runs_dir), "no runs folder here; name a RUN_DIR, pass --runs-dir, or "
                                               "start a run first with `agora run SCENARIO`"))
    if not problems and not _port_free(host, port):
        problems.append(Problem("--port", f"cannot listen on {host}:{port} (in use, or not an address of this "
                                          "machine); choose another with --port or --host"))
    return problems


def serve(command: list[str], env: dict[str, str]) -> int:
    """Run Streamlit until it exits, Ctrl-C (which reaches it too) or SIGTERM (passed on to it).
    Returns its exit status, 0 when stopped by the user."""
    child = subprocess.Popen(command, env=env)
    previous = signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    try:
        code = child.wait()
    except KeyboardInterrupt:
        try:
            child.wait(timeout=10)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            child.kill()
            child.wait()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0 if code in (-signal.SIGTERM, -signal.SIGINT) else code


@user_errors
def ui(
    run_dirs: Annotated[Optional[list[Path]], typer.Argument(
        metavar="RUN_DIR", help="run directories to open (default: the newest in --runs-dir), or `agora evolve` "
                                "folders (their rounds on the Runs page)",
        show_default=False)] = None,
    runs_dir: Annotated[Path, typer.Option(
        "--runs-dir", help="folder of runs listed by the viewer")] = Path("runs"),
    host: Annotated[str, typer.Option(
        help="address to bind; anyone who can reach it can send whispers")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port to serve on")] = 8501,
) -> None:
    """Open the live viewer (Streamlit) on a run: the town, its people, conversations and metrics."""
    named = list(run_dirs or [])
    problems = check_inputs(named, runs_dir, host, port)
    if problems:
        raise InputError(problems)
    if not APP.is_file():
        raise RunError(f"the viewer's files are missing ({APP}); reinstall agora")
    env = {**os.environ, "AGORA_UI_RUNS_DIR": str(runs_dir.resolve()),
           "AGORA_UI_RUNS": os.pathsep.join(str(p.resolve()) for p in named),
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    shown = f"[{host}]" if ":" in host else host
    common.err.print(f"Agora viewer on http://{shown}:{port} (Ctrl-C stops it)", markup=False, highlight=False)
    if host not in ("127.0.0.1", "localhost", "::1"):
        common.err.print("warning: the viewer is reachable from other machines; anyone who can reach it can read "
                         "the runs and send whispers", markup=False, highlight=False)
    code = serve(streamlit_command(APP, host, port), env)
    if code != 0:
        raise RunError(f"the viewer (streamlit) exited with status {code}")
