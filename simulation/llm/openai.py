"""OpenAI-compatible backend: vLLM serve, llama.cpp's server, Ollama, OpenAI itself, or a fleet of them.

A batch becomes concurrent HTTP requests (at most ``concurrency`` in flight per server), each
sent to the server with the fewest outstanding requests, so one simulation can keep several
vLLM servers busy. Transient failures (timeouts, dropped connections, 429, 5xx, bodies that
are not a chat completion) are retried with exponential backoff and jitter, on another server
when there is one. A request gives up on a server problem only when it has used
``max_retries`` retries *and* the servers have failed for ``patience_s``: then the run stops
with a message naming the servers, at a tick boundary, with every committed tick kept.

Structured output differs between servers: vLLM takes OpenAI's
``response_format={"type": "json_schema", ...}``; llama-cpp-python's server rejects that and
takes ``{"type": "json_object", "schema": ...}``. In ``auto`` mode each server starts with the
first and falls back to the second (then to none) when the server refuses it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from simulation.errors import InputError, Problem, RunError
from simulation.llm.backend import Messages, OnDone, TokenCounter, estimate_tokens
from simulation.llm.scoring import TOP_LOGPROBS, from_top_logprobs
from simulation.llm.types import LLMRequest, RawCompletion, plain

if TYPE_CHECKING:
    from simulation.llm.settings import OpenAISettings

MODES = ("json_schema", "json_object", "none")


class _Transient(Exception):
    """A failure worth retrying; ``server_down`` when the server itself is the problem."""

    def __init__(self, message: str, server_down: bool = True, retry_after: float | None = None):
        super().__init__(message)
        self.server_down = server_down
        self.retry_after = retry_after


@dataclass
class Server:
    url: str
    index: int
    mode: str = "json_schema"
    outstanding: int = 0
    requests: int = 0
    failures: int = 0
    down_until: float = 0.0
    notes: list[str] = field(default_factory=list)


def _refused_response_format(status: int, body: str) -> bool:
    """The server rejected the request's response_format (llama-cpp-python's server says so
    with an HTTP 500 carrying a validation error; others with 400 or 422)."""
    text = body.lower()
    if status in (400, 422):
        return any(w in text for w in ("response_format", "json_schema", "json_object", "schema"))
    return status == 500 and "response_format" in text


class OpenAIBackend:
    name = "openai"

    @classmethod
    def from_settings(cls, settings: OpenAISettings, base_dir: Path) -> OpenAIBackend:
        """The backend an ``llm:`` block describes (``base_dir`` is unused: servers have no paths)."""
        cls.replay_id(settings, base_dir)
        return cls(
            settings.base_urls, settings.model, api_key=api_key_from_env(settings.api_key_env),
            concurrency=settings.concurrency, timeout_s=settings.timeout_s, max_retries=settings.max_retries,
            patience_s=settings.patience_s, structured_output=settings.structured_output,
        )

    @classmethod
    def replay_id(cls, settings: OpenAISettings, base_dir: Path) -> str | None:
        """The model id answers are cached under, without asking a server: the model named in the
        settings; None when only the servers can say (no model given)."""
        if not settings.base_urls:
            raise InputError(Problem("llm.base_urls", "the openai backend needs a server: give --base-url URL "
                                     "(e.g. http://127.0.0.1:8000/v1) or llm.base_urls in the scenario"))
        return settings.model

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str | None = None,
        *,
        api_key: str | None = None,
        concurrency: int = 16,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        patience_s: float = 300.0,
        structured_output: str = "auto",
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
    ):
        if not base_urls:
            raise RunError("the openai backend needs at least one server URL (--base-url or llm.base_urls)")
        self.api_key = api_key
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.patience_s = patience_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        first_mode = "json_schema" if structured_output == "auto" else structured_output
        self.auto = structured_output == "auto"
        self.servers = [Server(url.rstrip("/"), i, first_mode) for i, url in enumerate(base_urls)]
        self.model_id = self._probe(model)
        self.retries = 0
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._cond: asyncio.Condition | None = None
        self._jitter = random.Random()

    # ------------------------------------------------------------------ start-up

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _probe(self, model: str | None) -> str:
        """Check every server answers ``/models`` (fixing a URL missing its ``/v1``) and pick the model."""
        problems: list[str] = []
        served: list[str] = []
        with httpx.Client(timeout=min(10.0, self.timeout_s), headers=self._headers()) as client:
            for server in self.servers:
                candidates = [server.url] if server.url.endswith("/v1") else [server.url, server.url + "/v1"]
                for url in candidates:
                    try:
                        resp = client.get(url + "/models")
                    except httpx.HTTPError as exc:
                        problems.append(f"{server.url}: {_describe(exc)}")
                        break
                    if resp.status_code in (401, 403):
                        raise RunError(f"LLM server {server.url} refused the API key (HTTP {resp.status_code}); "
                                       "set the environment variable named by llm.api_key_env")
                    if resp.status_code == 200:
                        server.url = url
                        try:
                            served += [m["id"] for m in resp.json().get("data", [])]
                        except (ValueError, KeyError, TypeError, AttributeError):
                            pass
                        break
                else:
                    if model is None:
                        problems.append(f"{server.url}: /models answered HTTP {resp.status_code}")
        if len(problems) == len(self.servers) or (model is None and not served):
            detail = "; ".join(problems) or "no server lists a model (give one with --model)"
            raise RunError(f"cannot reach the LLM server{'s' if len(self.servers) > 1 else ''}: {detail}")
        return model or served[0]

    # ------------------------------------------------------------------ prompt size

    @classmethod
    def token_counter(cls, model_id: str | None, settings: OpenAISettings | None = None,
                      base_dir: Path | None = None) -> TokenCounter:
        """``estimate_tokens``, known without a server (see ``count_tokens``)."""
        return estimate_tokens

    def count_tokens(self, messages: Messages) -> int:
        """An estimate, not a count: a server's tokenizer is not here (and OpenAI's API has no way
        to ask it), so this is ``estimate_tokens``: characters / 3, rounded up, plus each message's
        role markers. It over-counts English for common tokenizers, so a prompt budgeted with it
        fits the server's window; a server whose window is smaller than ``llm.context_tokens``
        still refuses (that setting is what cognition budgets for)."""
        return estimate_tokens(messages)

    # ------------------------------------------------------------------ batch

    def generate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        """Blocking form, for callers outside an event loop (benchmarks, scripts)."""
        return asyncio.run(self.agenerate(requests, on_done))

    async def agenerate(self, requests: Sequence[LLMRequest], on_done: OnDone | None = None) -> list[RawCompletion]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # Connections belong to the loop that made them; a new loop gets a new pool.
            limits = httpx.Limits(max_connections=self.concurrency * len(self.servers),
                                  max_keepalive_connections=self.concurrency * len(self.servers))
            self._client = httpx.AsyncClient(timeout=self.timeout_s, limits=limits, headers=self._headers())
            self._client_loop = loop
            self._cond = asyncio.Condition()

        async def one(i: int, req: LLMRequest) -> RawCompletion:
            completion = await self._one(req)
            if on_done:
                on_done(i, completion)
            return completion

        tasks = [asyncio.ensure_future(one(i, r)) for i, r in enumerate(requests)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # One request gave up (server gone) or we were interrupted: stop the others too.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    # ------------------------------------------------------------------ scheduling

    async def _acquire(self, avoid: Server | None) -> Server:
        """The usable server with the fewest outstanding requests (waiting for a free slot)."""
        assert self._cond is not None
        async with self._cond:
            while True:
                now = time.monotonic()
                usable = [s for s in self.servers if s.outstanding < self.concurrency and s.down_until <= now]
                if avoid is not None and len(usable) > 1:
                    usable = [s for s in usable if s is not avoid] or usable
                if usable:
                    server = min(usable, key=lambda s: (s.outstanding, s.index))
                    server.outstanding += 1
                    server.requests += 1
                    return server
                wake = min((s.down_until for s in self.servers if s.down_until > now), default=now + 1.0)
                try:
                    await asyncio.wait_for(self._cond.wait(), timeout=max(0.01, wake - now))
                except TimeoutError:
                    pass

    async def _release(self, server: Server) -> None:
        assert self._cond is not None
        async with self._cond:
            server.outstanding -= 1
            self._cond.notify_all()

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        base = min(self.max_backoff_s, self.backoff_s * 2 ** (retry - 1))
        delay = base / 2 + self._jitter.random() * base / 2  # "equal jitter": spread, never near zero
        return min(self.max_backoff_s, max(delay, retry_after or 0.0))

    # ------------------------------------------------------------------ one request

    async def _one(self, req: LLMRequest) -> RawCompletion:
        started = time.perf_counter()
        first_failure: float | None = None
        retries = 0
        avoid: Server | None = None
        while True:
            server = await self._acquire(avoid)
            try:
                completion = await self._post(server, req)
                completion.latency_s = time.perf_counter() - started
                completion.retries = retries
                return completion
            except _Transient as exc:
                retries += 1
                self.retries += 1
                server.failures += 1
                now = time.monotonic()
                first_failure = first_failure or now
                delay = self._backoff(retries, exc.retry_after)
                if exc.server_down:
                    server.down_until = now + delay
                    if retries > self.max_retries and now - first_failure >= self.patience_s:
                        urls = ", ".join(s.url for s in self.servers)
                        raise RunError(
                            f"LLM server{'s' if len(self.servers) > 1 else ''} {urls} failed for "
                            f"{now - first_failure:.0f} s ({retries} tries); last error: {exc}"
                        ) from None
                elif retries > self.max_retries:
                    return RawCompletion(text="", latency_s=time.perf_counter() - started, retries=retries,
                                         server=server.url, error=str(exc))
                avoid = server
            finally:
                await self._release(server)
            await asyncio.sleep(delay)

    def _body(self, server: Server, req: LLMRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_id, "messages": plain(req.messages), "max_tokens": req.max_tokens,
            "temperature": req.temperature, "seed": req.seed, "n": 1, "stream": False,
        }
        if req.options is not None:  # scored, not written: the first answer token's top log-probabilities
            body.update(max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=TOP_LOGPROBS)
            return body
        if req.json_schema is not None:
            if server.mode == "json_schema":
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "answer", "schema": req.json_schema, "strict": True}}
            elif server.mode == "json_object":
                body["response_format"] = {"type": "json_object", "schema": req.json_schema}
        return body

    async def _post(self, server: Server, req: LLMRequest) -> RawCompletion:
        assert self._client is not None
        while True:
            sent_mode = server.mode
            try:
                resp = await self._client.post(server.url + "/chat/completions", json=self._body(server, req))
            except httpx.TimeoutException as exc:
                raise _Transient(f"{server.url}: timed out after {self.timeout_s:g} s ({type(exc).__name__})") from None
            except httpx.HTTPError as exc:
                raise _Transient(f"{server.url}: {_describe(exc)}") from None
            status, text = resp.status_code, resp.text
            if status == 200:
                return _completion(server, text, req.options)
            if self.auto and req.json_schema is not None and _refused_response_format(status, text) \
                    and sent_mode != "none":
                if server.mode == sent_mode:  # concurrent requests may have stepped down already
                    server.mode = MODES[MODES.index(sent_mode) + 1]
                    server.notes.append(f"refused response_format {sent_mode}; using {server.mode}")
                continue
            if status == 429 or status >= 500:
                raise _Transient(f"{server.url}: HTTP {status} {_snippet(text)}", retry_after=_retry_after(resp))
            if status in (401, 403):
                raise RunError(f"LLM server {server.url} refused the API key (HTTP {status}): {_snippet(text)}")
            if status == 404:
                raise RunError(f"LLM server {server.url} has no model {self.model_id!r} or no chat endpoint "
                               f"(HTTP 404): {_snippet(text)}")
            # Any other 4xx is about this request (e.g. a prompt longer than the context): an error answer.
            return RawCompletion(text="", server=server.url, error=f"{server.url}: HTTP {status} {_snippet(text)}")

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._client_loop is not None and not self._client_loop.is_closed():
            try:
                self._client_loop.run_until_complete(client.aclose())
            except RuntimeError:  # the loop is running elsewhere or gone: sockets close with the process
                pass

    def describe(self) -> str:
        return ", ".join(f"{s.url} ({s.requests} requests, {s.failures} failures, {s.mode})" for s in self.servers)


def _completion(server: Server, text: str, options: list[str] | None = None) -> RawCompletion:
    try:
        data = json.loads(text)
        choice = data["choices"][0]
        content = choice["message"].get("content") or ""
        usage = data.get("usage") or {}
        out = RawCompletion(
            text=content, prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason"), server=server.url,
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise _Transient(f"{server.url}: the reply is not a chat completion: {_snippet(text)}",
                         server_down=False) from None
    if options is not None:
        top = _top_logprobs(choice)
        if not top:
            return out.model_copy(update={"text": "", "error": f"{server.url} gave no log-probabilities"})
        return out.model_copy(update={"text": from_top_logprobs(top, options).to_text(), "finish_reason": "scored"})
    return out


def _top_logprobs(choice: dict[str, Any]) -> dict[str, float]:
    """token -> logprob at the answer's first position, from an OpenAI-style ``logprobs`` block."""
    try:
        first = (choice.get("logprobs") or {}).get("content")[0]
        return {str(t["token"]): float(t["logprob"]) for t in first.get("top_logprobs") or []}
    except (TypeError, IndexError, KeyError, ValueError, AttributeError):
        return {}


def _describe(exc: Exception) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({exc or 'connection refused'})"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _snippet(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        return min(60.0, float(resp.headers.get("retry-after", "")))
    except ValueError:
        return None


def api_key_from_env(name: str) -> str | None:
    return os.environ.get(name) or None
