"""Real HTTP servers on loopback for the openai backend's tests.

``FaultServer`` speaks just enough of the OpenAI chat API and misbehaves on a schedule
(500s, 429s, stalls, malformed bodies, dropped connections, refusing json_schema), so the
backend's retries and error reports are tested against real sockets, not mocks.
``llama_server`` starts llama-cpp-python's own OpenAI-compatible server on the bundled model.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chat_reply(content: str, finish: str = "stop", top: dict[str, float] | None = None) -> dict[str, Any]:
    """A chat completion; with ``top`` (token -> logprob), the first token's top log-probabilities."""
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
    if top is not None:
        choice["logprobs"] = {"content": [{"token": content, "logprob": max(top.values(), default=0.0),
                                           "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()]}]}
    return {"id": "x", "object": "chat.completion", "model": "fault-model", "choices": [choice],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}


class FaultServer:
    """Answers POST /v1/chat/completions by popping the next action of ``script``.

    Actions: "ok" (a JSON answer {"n": <request number>}), "500", "429", "stall" (sleep longer
    than any client timeout used in tests), "garbage" (200 with a body that is not JSON),
    "reset" (close the socket without answering), "no_schema" (400 if response_format is
    json_schema, else ok), "401". An empty script means "ok"."""

    def __init__(self, script: list[str] | None = None, delay: float = 0.0, models: list[str] | None = None,
                 answer: Callable[[dict[str, Any]], str] | None = None, port: int | None = None):
        """``answer`` turns a request body into the content of an "ok" reply (default {"n": N}), or
        into the whole reply (a dict)."""
        self.answer = answer
        self.gone = False
        self.script: deque[str] = deque(script or [])
        self.delay = delay
        self.models = models if models is not None else ["fault-model"]
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, json.dumps({"data": [{"id": m} for m in server.models]}))
                else:
                    self._send(404, '{"error": "not found"}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.bodies.append(body)
                    server.headers.append(dict(self.headers))
                    n = len(server.bodies)
                    action = server.script.popleft() if server.script else "ok"
                if server.gone:  # stopped: keep-alive connections must not go on being served
                    action = "reset"
                if server.delay:
                    time.sleep(server.delay)
                if self.path != "/v1/chat/completions":
                    return self._send(404, '{"error": "not found"}')
                if action == "500":
                    return self._send(500, '{"error": "internal error"}')
                if action == "429":
                    return self._send(429, '{"error": "slow down"}', {"Retry-After": "0"})
                if action == "401":
                    return self._send(401, '{"error": "invalid api key"}')
                if action == "stall":
                    time.sleep(3)
                    return self._send(200, json.dumps(chat_reply(json.dumps({"n": n}))))
                if action == "garbage":
                    return self._send(200, "<html>Bad Gateway</html>")
                if action == "reset":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return None
                if action == "no_schema" and (body.get("response_format") or {}).get("type") == "json_schema":
                    return self._send(400, '{"error": "response_format type json_schema is not supported"}')
                content = server.answer(body) if server.answer else json.dumps({"n": n})
                reply = content if isinstance(content, dict) else chat_reply(content)
                return self._send(200, json.dumps(reply))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.gone = True
        self.httpd.shutdown()
        self.httpd.server_close()


# The scripted backend's answers over HTTP: the purpose is read from the answer schema's fields.
_PURPOSE_BY_FIELD = {"plan": "plan", "hours": "hours", "steps": "steps",
                     "detail": "react", "say": "utterance", "summary": "recap", "questions": "questions",
                     "insights": "insights", "answer": "probe"}


RATING_SCALES = [tuple(str(i) for i in range(1, 11)), tuple(str(i) for i in range(1, 6))]


def scripted_answer(body: dict[str, Any]) -> str | dict[str, Any]:
    """What ``ScriptedBackend`` would answer to this chat completion request; a rating (a request
    for log-probabilities) gets the option it would put all the probability on."""
    from simulation.llm.types import LLMRequest
    from simulation.testing import ScriptedBackend

    if body.get("logprobs"):  # an HTTP body names no purpose: the 1-10 scale is importance's
        importance = any("1 to 10" in m["content"] for m in body["messages"])
        scale = RATING_SCALES[0] if importance else RATING_SCALES[1]
        rating = LLMRequest(messages=body["messages"], seed=body.get("seed", 0), options=list(scale),
                            purpose="importance" if importance else "rating")
        picked = ScriptedBackend().choose(rating)
        return chat_reply(picked, "length", top={picked: -0.001, "x": -7.0})

    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
    purpose = next((p for f, p in _PURPOSE_BY_FIELD.items() if f in schema.get("properties", {})), "other")
    req = LLMRequest(messages=body["messages"], json_schema=schema or None, max_tokens=body.get("max_tokens", 256),
                     temperature=body.get("temperature", 0.0), seed=body.get("seed", 0), purpose=purpose)
    return ScriptedBackend().answer(req)


@contextmanager
def llama_server(model: Path, n_ctx: int = 2048, threads: int | None = None):
    """llama-cpp-python's OpenAI-compatible server on a free loopback port; yields its /v1 URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(n_ctx), "--model_alias", "smollm2"]
    if threads:
        cmd += ["--n_threads", str(threads)]
    log = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads would fill up and stall the server
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"llama_cpp.server exited: {log.read()[-2000:]}")
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start within 120 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
