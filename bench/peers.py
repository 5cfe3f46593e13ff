"""Peer frameworks on Agora's machine and model: how fast mesa-llm and Concordia run a town when
they talk to the same local server as Agora (llama-cpp-python's own server on the bundled
SmolLM2-135M GGUF), so that their speed can be set beside Agora's on equal terms.

    .venv/bin/python bench/peers.py --setup                 # once: each peer's own venv under .venv-peers/
    .venv/bin/python bench/peers.py                          # 5, 10 and 20 agents, 2 steps, Agora and both peers
    .venv/bin/python bench/peers.py --agents 5 --steps 1 --peers mesa-llm
    .venv/bin/python bench/peers.py --max-tokens 0           # no ceiling on answer length (see below)

Why: published speeds of these frameworks come from hosted models (mesa-llm issue 200 reports
45.2 s per step at 5 agents, 180.5 s at 10 and 722 s at 20), which says little about the
frameworks themselves. Here the model, the server, its threads and the machine are the same for
every peer, and Agora runs through the same server too (its openai backend, in its own venv:
``bench/peers/agora_driver.py``, the flagship town sized to N people, a step being a ten-minute
tick).

How: each peer lives in its own virtual environment (``.venv-peers/mesa-llm``: mesa-llm 0.3.2,
``.venv-peers/concordia``: gdm-concordia 2.4.0; both need Python >= 3.12, and neither touches
Agora's ``.venv``) and runs its own example, sized to N agents, in a subprocess through a driver
(``bench/peers/mesa_llm_driver.py``: the negotiation example; ``bench/peers/concordia_driver.py``:
the tutorial simulation), which prints one JSON line. This script starts
``python -m llama_cpp.server`` (``--n_ctx 4096 --n_threads 2``), waits for ``/v1/models``, and puts
a small counting proxy (``http.server``) in front of it: every request a peer sends is counted
there, with its tokens and whether it hit the length limit, and adapted to what llama-cpp-python's
server reads, which both peers would otherwise trip on:

* ``max_completion_tokens`` (sent by Concordia's OpenAI class) becomes ``max_tokens``: the server
  reads only the latter, and would otherwise answer every call to the end of the context;
* ``response_format`` of type ``json_schema`` (sent by litellm for mesa-llm's pydantic formats)
  becomes the server's ``json_object`` with the same ``schema`` (grammar-constrained JSON, as
  Agora's own requests get): the server's request model allows only ``text`` and ``json_object``;
* ``--max-tokens`` (default 512) caps every answer, as Agora caps its own; answers cut there are
  counted as ``truncated``. ``--max-tokens 0`` leaves the peers' own limits.

A step is one step of every agent: for mesa-llm one model step; for Concordia, whose sequential
engine lets one player act per engine step, a round of N turns (see the drivers' docstrings).
Seconds exclude set-up (Concordia's initializer writes every player's backstory first; it is
timed and counted apart). Calls per agent-step are the peer's own HTTP requests in the steps (the
drivers count them in the framework's client); the proxy's count, set-up included, is a cross-check.
Results: a table, and ``bench-out/peers/peers.json``; each run's log in ``bench-out/peers/``.
"""

from __future__ import annotations

import argparse
import glob
import http.client
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VENVS = ROOT / ".venv-peers"
DRIVERS = Path(__file__).resolve().parent / "peers"
MODEL_NAME = "smollm2-135m"

# mesa-llm issue 200 (the table posted with its fix, PR 203): seconds per step on hosted models.
REFERENCE = {5: 45.2, 10: 180.5, 20: 722.0}


@dataclass(frozen=True)
class Peer:
    key: str
    requirement: str
    module: str
    driver: Path
    own_venv: Path | None = None
    """Where the venv is when it is not under .venv-peers (Agora's own)."""

    @property
    def venv(self) -> Path:
        return self.own_venv or VENVS / self.key

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


PEERS = {
    "agora": Peer("agora", "(this checkout: make install)", "simulation", DRIVERS / "agora_driver.py", ROOT / ".venv"),
    "mesa-llm": Peer("mesa-llm", "mesa-llm==0.3.2", "mesa_llm", DRIVERS / "mesa_llm_driver.py"),
    "concordia": Peer("concordia", "gdm-concordia[openai]==2.4.0", "concordia.contrib.language_models.openai.gpt_model",
                      DRIVERS / "concordia_driver.py"),
}


# ------------------------------------------------------------------ set-up of the peers' venvs


def find_python312(explicit: str | None) -> str:
    """A Python >= 3.12 interpreter: --python, python3.12/3.13 on PATH, or pyenv's versions."""
    candidates = [explicit] if explicit else []
    candidates += [shutil.which("python3.12"), shutil.which("python3.13")]
    for root in (os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv"), "/root/.pyenv"):
        if root:
            candidates += sorted(glob.glob(f"{root}/versions/3.1[23]*/bin/python3"))
    for c in candidates:
        if not c or not Path(c).exists():
            continue
        out = subprocess.run([c, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                             capture_output=True, text=True)
        if out.stdout.strip() == "True":
            return c
    raise SystemExit("no Python >= 3.12 found (mesa-llm 0.3.2 and gdm-concordia 2.4.0 need it): "
                     "pass --python /path/to/python3.12, e.g. `pyenv install 3.12` first")


def torch_pullers(python: Path, requirement: str) -> list[str]:
    """Which packages of the install would bring torch (pip's dry-run report), if any."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                        "--report", str(report), requirement], check=True)
        items = json.loads(report.read_text())["install"]
    names = {i["metadata"]["name"].lower() for i in items}
    if "torch" not in names:
        return []
    return [i["metadata"]["name"] for i in items
            if any(r.lower().replace(" ", "").startswith("torch") and "extra==" not in r.replace(" ", "")
                   for r in i["metadata"].get("requires_dist") or [])] or ["(unknown)"]


def setup(peers: list[Peer], python: str, console: Console) -> None:
    """Create each peer's venv and install its pinned release; refuse an install that pulls torch."""
    for peer in peers:
        if peer.own_venv is not None:  # Agora itself: `make install` made it
            continue
        if not peer.python.exists():
            console.print(f"creating {peer.venv.relative_to(ROOT)} with {python}")
            subprocess.run([python, "-m", "venv", str(peer.venv)], check=True)
            subprocess.run([str(peer.python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
        pullers = torch_pullers(peer.python, peer.requirement)
        if pullers:
            raise SystemExit(f"{peer.requirement} would install torch (required by {', '.join(pullers)}): "
                             "not installed; install a CPU torch into that venv first if you accept it")
        console.print(escape(f"installing {peer.requirement} into {peer.venv.relative_to(ROOT)}"))
        subprocess.run([str(peer.python), "-m", "pip", "install", "--quiet", peer.requirement], check=True)


def missing(peer: Peer) -> str | None:
    """Why the peer cannot run (with the command that fixes it), or None."""
    fix = ("run `make install`" if peer.own_venv is not None else
           f"create it with `.venv/bin/python bench/peers.py --setup --peers {peer.key}` (or: "
           f"python3.12 -m venv {peer.venv.relative_to(ROOT)} && "
           f"{peer.python.relative_to(ROOT)} -m pip install '{peer.requirement}')")
    if not peer.python.exists():
        return f"{peer.key}: no venv at {peer.venv.relative_to(ROOT)}; {fix}"
    probe = subprocess.run([str(peer.python), "-c", f"import {peer.module}"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"{peer.key}: `import {peer.module}` fails in {peer.venv.relative_to(ROOT)} ({last}); {fix}"
    return None


# ------------------------------------------------------------------ the server and the proxy


def rel(path: Path) -> str:
    """``path`` relative to the checkout where it lies inside it."""
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, port: int, args: argparse.Namespace, log: Path) -> subprocess.Popen[bytes]:
    """llama-cpp-python's server on loopback; returns once /v1/models answers."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(args.n_ctx), "--n_threads", str(args.n_threads),
           "--model_alias", MODEL_NAME]
    if args.chat_format:
        cmd += ["--chat_format", args.chat_format]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the llama server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return proc
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    stop(proc)
    raise SystemExit(f"the llama server did not answer /v1/models within 300 s; see {log}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class ProxyStats:
    requests: int = 0
    completions: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: int = 0
    http_errors: int = 0
    adapted: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)


def adapt(payload: dict[str, Any], ceiling: int) -> list[str]:
    """Rewrite an OpenAI request into what llama-cpp-python's server reads; returns what changed."""
    changed = []
    if "max_completion_tokens" in payload:
        value = payload.pop("max_completion_tokens")
        if payload.get("max_tokens") is None and value is not None:
            payload["max_tokens"] = value
            changed.append("max_completion_tokens")
    fmt = payload.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        payload["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
        changed.append("json_schema")
    if ceiling > 0:
        asked = payload.get("max_tokens")
        if asked is None or asked <= 0 or asked > ceiling:
            payload["max_tokens"] = ceiling
            changed.append("max_tokens_ceiling")
    return changed


class CountingProxy:
    """A loopback HTTP proxy in front of the llama server that counts and adapts requests."""

    def __init__(self, upstream_port: int, ceiling: int) -> None:
        self.upstream_port = upstream_port
        self.ceiling = ceiling
        self.stats = ProxyStats()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CountingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def take(self) -> ProxyStats:
        """The counts since the last take, and start again from zero."""
        with self.lock:
            stats, self.stats = self.stats, ProxyStats()
        return stats

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def do_GET(self) -> None:
                self.forward(None)

            def do_POST(self) -> None:
                self.forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def forward(self, body: bytes | None) -> None:
                completion = self.command == "POST" and self.path.rstrip("/").endswith("completions")
                changed: list[str] = []
                if completion and body:
                    try:
                        payload = json.loads(body)
                        changed = adapt(payload, proxy.ceiling)
                        body = json.dumps(payload).encode()
                    except (json.JSONDecodeError, AttributeError):
                        pass
                started = time.perf_counter()
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=3600)
                try:
                    conn.request(self.command, self.path, body=body,
                                 headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                    resp = conn.getresponse()
                    data, status, headers = resp.read(), resp.status, resp.getheaders()
                except OSError as exc:
                    data, status, headers = json.dumps({"error": str(exc)}).encode(), 502, []
                finally:
                    conn.close()
                elapsed = time.perf_counter() - started
                with proxy.lock:
                    s = proxy.stats
                    s.requests += 1
                    s.seconds += elapsed
                    for c in changed:
                        s.adapted[c] = s.adapted.get(c, 0) + 1
                    if status >= 400:
                        s.http_errors += 1
                        if len(s.error_samples) < 5:
                            s.error_samples.append(f"{status} {self.path}: {data[:300].decode(errors='replace')}")
                    elif completion:
                        s.completions += 1
                        try:
                            answer = json.loads(data)
                            usage = answer.get("usage") or {}
                            s.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                            s.completion_tokens += int(usage.get("completion_tokens") or 0)
                            s.truncated += sum(c.get("finish_reason") == "length" for c in answer.get("choices", []))
                        except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                            pass
                try:
                    self.send_response(status)
                    for k, v in headers:
                        if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout); the request is counted all the same

        return Handler


# ------------------------------------------------------------------ runs


def run_peer(peer: Peer, n: int, base_url: str, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    """One driver run in the peer's venv; its JSON line, or a row that says why there is none."""
    cmd = [str(peer.python), str(peer.driver), "--base-url", base_url, "--model-name", MODEL_NAME,
           "--agents", str(n), "--steps", str(args.steps), "--budget-s", str(args.budget_s)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONUNBUFFERED"] = "1"
    env["NO_PROXY"] = env["no_proxy"] = ",".join(filter(None, [env.get("NO_PROXY"), "127.0.0.1", "localhost"]))
    log = out_dir / f"{peer.key}-{n}.log"
    started = time.perf_counter()
    with log.open("w") as err:
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=ROOT,
                                  timeout=args.run_timeout or None)
            stdout, rc = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            rc = "timeout"
    row: dict[str, Any] = {"framework": peer.key, "agents": n, "wall_seconds": time.perf_counter() - started,
                           "log": rel(log)}
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if lines:
        row.update(json.loads(lines[-1]))
    else:
        row.update({"stopped": f"no result (exit {rc}); see {row['log']}", "errors": 1})
    return row


def fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def show(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="Peers on the bundled SmolLM2-135M (llama-cpp-python server, same machine)",
                  caption="issue 200 s/step: as reported in mesa-llm issue 200, on hosted models, "
                          "not on this machine")
    for col in ("framework", "agents", "steps", "s/step", "s/agent-step", "calls/agent-step",
                "issue 200 s/step", "server requests", "truncated", "setup s", "errors", "stopped"):
        table.add_column(col, justify="left" if col in ("framework", "stopped") else "right")
    for r in rows:
        server = r.get("server", {})
        reference = REFERENCE.get(r["agents"]) if r["framework"] == "mesa-llm" else None
        table.add_row(f"{r['framework']} {r.get('version', '')}".strip(), str(r["agents"]), fmt(r.get("steps"), 1),
                      fmt(r.get("seconds_per_step")), fmt(r.get("seconds_per_agent_step")),
                      fmt(r.get("calls_per_agent_step")), fmt(reference, 1), str(server.get("requests", "-")),
                      str(server.get("truncated", "-")), fmt(r.get("setup_seconds"), 1), str(r.get("errors", "-")),
                      escape(str(r.get("stopped", ""))))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description="mesa-llm and Concordia on Agora's machine and model",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--agents", default="5,10,20", help="comma-separated town sizes (default 5,10,20)")
    parser.add_argument("--steps", type=int, default=2, help="steps per run: every agent acts once per step")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated, of {', '.join(PEERS)}")
    parser.add_argument("--max-tokens", type=int, default=512,
                        help="ceiling on every answer's tokens, applied at the proxy (0: the peers' own limits)")
    parser.add_argument("--budget-s", type=float, default=1200.0,
                        help="per run: no new step after this many seconds of steps (0: no limit); "
                             "the rates are over the steps done")
    parser.add_argument("--run-timeout", type=float, default=7200.0,
                        help="per run: kill the driver after this many seconds (0: never)")
    parser.add_argument("--model", type=Path, default=None, help="GGUF file (default: the bundled SmolLM2-135M)")
    parser.add_argument("--n-threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--chat-format", default=None,
                        help="the server's --chat_format (default: the GGUF's own template, which answers "
                             "tool requests with plain text; llama-cpp-python's 'chatml-function-calling' "
                             "handler may let mesa-llm's tool calls through: untried)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out" / "peers")
    parser.add_argument("--setup", action="store_true", help="create the peers' venvs and install them, then stop")
    parser.add_argument("--python", default=None, help="Python >= 3.12 for --setup (default: found on PATH/pyenv)")
    args = parser.parse_args()
    console = Console(width=max(140, Console().width))

    keys = [k.strip() for k in args.peers.split(",") if k.strip()]
    unknown = [k for k in keys if k not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; known: {list(PEERS)}")
    peers = [PEERS[k] for k in keys]
    if args.setup:
        setup(peers, find_python312(args.python), console)
        for peer in peers:
            console.print(escape(missing(peer) or f"{peer.key}: ready in {peer.venv.relative_to(ROOT)}"))
        return

    ready = []
    for peer in peers:
        why = missing(peer)
        if why:
            console.print(f"[yellow]skipped[/yellow] {escape(why)}")
        else:
            ready.append(peer)
    if not ready:
        raise SystemExit(1)
    sizes = [int(a) for a in args.agents.split(",") if a.strip()]

    if args.model is None:
        from simulation.llm.llamacpp import bundled_model_path

        args.model = bundled_model_path()
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    console.print(f"starting llama_cpp.server on 127.0.0.1:{port} ({args.model.name}, n_ctx {args.n_ctx}, "
                  f"{args.n_threads} threads)")
    server = start_server(args.model, port, args, args.out / "server.log")
    rows: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "server": {"model": str(args.model), "n_ctx": args.n_ctx, "n_threads": args.n_threads,
                   "chat_format": args.chat_format or "GGUF template", "max_tokens_ceiling": args.max_tokens},
        "steps": args.steps, "agents": sizes, "budget_s": args.budget_s,
        "reference_mesa_llm_issue_200_seconds_per_step": REFERENCE,
        "results": rows,
    }
    path = args.out / "peers.json"
    try:
        with CountingProxy(port, args.max_tokens) as proxy:
            base_url = f"http://127.0.0.1:{proxy.port}/v1"
            for peer in ready:
                for n in sizes:
                    console.print(f"{peer.key}: {n} agents, {args.steps} steps ...")
                    proxy.take()
                    row = run_peer(peer, n, base_url, args, args.out)
                    row["server"] = asdict(proxy.take())
                    rows.append(row)
                    path.write_text(json.dumps(report, indent=2))  # after every run: a long sweep keeps its rows
                    console.print(f"  {fmt(row.get('seconds_per_step'))} s/step, "
                                  f"{fmt(row.get('calls_per_agent_step'))} calls/agent-step, "
                                  f"{row['server']['requests']} requests, {escape(str(row.get('stopped')))}")
    finally:
        stop(server)

    show(rows, console)
    console.print(f"wrote {rel(path)} (server log and each run's log beside it)")


if __name__ == "__main__":
    main()
