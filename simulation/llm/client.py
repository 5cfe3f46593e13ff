"""The batching client: agents await single answers, the backend sees whole batches.

Agent cognition is ordinary sequential ``async`` code. Each ``ask`` parks its request in a
``Batcher`` (simulation/llm/batching.py); once the event loop has nothing else to run, every
request parked goes to the backend as one batch. Answers are validated against the caller's pydantic model; a failure is retried
once, with a new seed and the rejected answer plus the reason appended to the prompt,
then the caller's safe default is used and logged, never raised.

A run whose people ask different models (model groups, ``llm.groups``) has one client with a
``Route`` per group: who asks picks the route (its backend, temperature and token cap), the
request carries the group's name, and the batch is split by group when it is sent, each part
one batch to its own backend, one after another (a part computed in this process must not
wait on another's worker thread under its own deadline). The answers come back together, in
the batch's order, so who resumes first never depends on which backend answered first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError, create_model

from simulation.errors import RunError
from simulation.llm.backend import Backend, agenerate
from simulation.llm.deadline import CALL_TIMEOUT_S, bounded
from simulation.llm.batching import Batcher
from simulation.llm.scoring import ScoredOptions, expected
from simulation.llm.seeds import derive_seed
from simulation.llm.types import CallRecord, LLMRequest, RawCompletion

T = TypeVar("T", bound=BaseModel)

MAX_ATTEMPTS = 2
PRIORITY = 1
"""Batcher priority: after memory retrieval (0), so agents who retrieve first join the same batch."""


@dataclass
class Answer(Generic[T]):
    value: T
    ok: bool
    """False when the value is the caller's default after failed attempts."""
    call_id: int | None = None
    """The ``llm_calls`` row of the last attempt, when the caller records calls."""
    rejected: T | None = None
    """When ``ok`` is False: the last attempt's answer if it was well-formed and only ``check``
    turned it down (the caller may still use it for something else, e.g. a line that does not do
    its move said as a plain reply), else None."""


@dataclass
class ClientStats:
    calls: int = 0
    batches: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    parse_failures: int = 0
    fallbacks: int = 0
    cache_hits: int = 0
    ratings: int = 0
    sampled_ratings: int = 0
    """Ratings the backend could not score, for which one option was sampled instead."""


@dataclass
class Rating:
    """A rating read from the model's probabilities over the options (``simulation.llm.scoring``)."""

    value: float
    probabilities: list[float]
    """One per option; one-hot when sampled, empty when the default was used."""
    ok: bool
    """False when the value is the caller's default."""
    sampled: bool = False
    """The backend gave no probabilities: one option was sampled (the old, noisy way)."""
    call_id: int | None = None
    seed: int = 0
    """The request's seed (from the run seed, agent, tick and purpose): what a choice drawn from
    ``probabilities`` is drawn with, so the draw is the same whenever the run is replayed."""


@dataclass(frozen=True)
class Route:
    """Where the questions of some people go: a backend and how it is asked (a model group's, or
    the ``llm:`` block's own for everyone else)."""

    backend: Backend
    temperature: float = 0.7
    max_tokens: int = 96
    call_timeout_s: float | None = CALL_TIMEOUT_S
    """As ``LLMClient``'s: None or 0, no deadline."""
    group: str | None = None
    """The model group's name; None for the ``llm:`` block's own backend."""

    @property
    def reads_probabilities(self) -> bool:
        """Whether the backend's option probabilities come from a model (not the scripted control,
        whose "probabilities" are its rule: all on the first option; a backend says so with a
        ``scripted = True`` class attribute)."""
        return not getattr(self.backend, "scripted", False)


@lru_cache(maxsize=64)
def _choice_model(options: tuple[str, ...]) -> type[BaseModel]:
    """``{"answer": one of the options}``: the sampled fallback of a rating."""
    return create_model("Choice", __base__=BaseModel, answer=(Literal[options], ...))  # type: ignore[valid-type]


@lru_cache(maxsize=128)
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """An answer model's JSON Schema, built once per model rather than on every call."""
    return model.model_json_schema()


def parse_answer(text: str, model: type[T]) -> tuple[T | None, str | None]:
    """Parse a JSON answer into ``model``; return (value, None) or (None, reason)."""
    try:
        data = json.loads(text, strict=False)  # a raw newline inside a string is still an answer
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at char {exc.pos})"
    try:
        return model.model_validate(data), None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        return None, f"{where}: {first['msg']}"


class LLMClient:
    def __init__(
        self,
        backend: Backend,
        *,
        run_seed: int,
        temperature: float = 0.7,
        max_tokens: int = 96,
        on_call: Callable[[CallRecord], int | None] | None = None,
        on_progress: Callable[[RawCompletion], None] | None = None,
        call_timeout_s: float | None = CALL_TIMEOUT_S,
        groups: Mapping[str, Route] | None = None,
        group_of: Mapping[str, str] | None = None,
    ):
        """``call_timeout_s``: seconds a batch may go without an answer before it is abandoned
        with ``CallTimeout`` (``simulation.llm.deadline``); None or 0: no deadline, and an
        in-process backend computes on the loop's own thread. ``backend``, ``temperature``,
        ``max_tokens`` and ``call_timeout_s`` make the route of everyone who is in no model group;
        ``groups``: each model group's route, by name; ``group_of``: person -> model group."""
        self.backend = backend
        self.call_timeout_s = call_timeout_s or None
        self.run_seed = run_seed
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.on_call = on_call
        self.on_progress = on_progress
        self.stats = ClientStats()
        self._routes: dict[str | None, Route] = {
            None: Route(backend, temperature, max_tokens, self.call_timeout_s),
            **{name: replace(route, group=name, call_timeout_s=route.call_timeout_s or None)
               for name, route in (groups or {}).items()},
        }
        self._group_of = dict(group_of or {})
        unknown = sorted(set(self._group_of.values()) - set(self._routes))
        if unknown:
            raise RunError(f"no backend for model group(s) {', '.join(map(repr, unknown))}")
        names = " + ".join(dict.fromkeys(r.backend.name for r in self._routes.values()))
        self._batcher: Batcher[LLMRequest, RawCompletion] = Batcher(
            f"backend {names}", self._send, priority=PRIORITY)

    def route(self, agent_id: str | None = None, group: str | None = None) -> Route:
        """Where ``agent_id``'s questions go (their model group's route; the default one for people
        in no group and for questions nobody asks), or model group ``group``'s when it is given."""
        return self._routes[group if group is not None else self._group_of.get(agent_id or "")]

    async def ask(
        self,
        messages: list[dict[str, str]],
        model: type[T],
        *,
        default: T,
        purpose: str,
        agent_id: str | None,
        tick: int | None,
        max_tokens: int | None = None,
        check: Callable[[T], str | None] | None = None,
        script: str | None = None,
        group: str | None = None,
        temperature: float | None = None,
    ) -> Answer[T]:
        """One structured question. Never raises for a bad answer: returns ``default`` instead.

        ``check`` judges a well-formed answer the schema cannot (e.g. an utterance that only
        echoes the last line) and may repair it in place; a reason it returns counts as a
        parse failure and is retried. ``script`` is the engine's own answer, for the no-LLM
        control only (``LLMRequest.script``). It goes to ``agent_id``'s model group, or to
        ``group``'s when given (``route``), at the route's temperature unless ``temperature`` is given."""
        schema = _schema(model)
        route = self.route(agent_id, group)
        text, prompt = "", messages
        for attempt in range(MAX_ATTEMPTS):
            rejected: T | None = None
            request = LLMRequest(
                messages=prompt,
                json_schema=schema,
                max_tokens=min(max_tokens or route.max_tokens, route.max_tokens),
                temperature=route.temperature if temperature is None else temperature,
                seed=derive_seed(self.run_seed, agent_id, tick, purpose, attempt),
                purpose=purpose,
                agent_id=agent_id,
                tick=tick,
                script=script,
                group=route.group,
            )
            completion = await self._batcher.submit(request, who=agent_id, purpose=purpose)
            text = completion.text
            if completion.error:
                value, error = None, completion.error
            elif completion.finish_reason == "length":
                value, error = None, f"answer cut off at max_tokens={request.max_tokens}"
            else:
                value, error = parse_answer(completion.text, model)
                if value is not None and check is not None:
                    error = check(value)
                    rejected, value = (value, None) if error else (None, value)
            last = attempt == MAX_ATTEMPTS - 1
            call_id = self._record(request, completion, attempt, value is not None, error,
                                   fallback=value is None and last)
            if value is not None:
                return Answer(value, True, call_id)
            # The retry sees its rejected answer and why, so it does not simply say it again.
            prompt = [*messages, {"role": "assistant", "content": text},
                      {"role": "user", "content": f"That answer is not usable: {error}. Answer again, differently."}]
        self.stats.fallbacks += 1
        return Answer(default, False, call_id, rejected)

    async def rate(self, messages: list[dict[str, str]], options: Sequence[str], values: Sequence[float], *,
                   default: float, purpose: str, agent_id: str | None, tick: int | None,
                   group: str | None = None) -> Rating:
        """The expected value over ``options`` (answer texts, e.g. "1".."10"), weighted by the
        model's probability of each as its whole answer; ``values`` are what the options mean.
        Where the backend cannot score, one option is sampled under a schema (counted in
        ``stats.sampled_ratings``), and ``default`` is used if even that fails. Routed as ``ask``."""
        self.stats.ratings += 1
        route = self.route(agent_id, group)
        request = LLMRequest(messages=messages, options=list(options), max_tokens=1, temperature=0.0,
                             seed=derive_seed(self.run_seed, agent_id, tick, purpose, 0), purpose=purpose,
                             agent_id=agent_id, tick=tick, group=route.group)
        completion = await self._batcher.submit(request, who=agent_id, purpose=purpose)
        error = completion.error
        scored = None
        if error is None:
            try:
                scored = ScoredOptions.from_text(completion.text, len(options))
            except ValueError as exc:
                error = str(exc)
        call_id = self._record(request, completion, 0, scored is not None, error, fallback=False)
        if scored is not None:
            probabilities = scored.probabilities()
            return Rating(expected(values, probabilities), probabilities, True, False, call_id, request.seed)
        self.stats.sampled_ratings += 1
        model = _choice_model(tuple(options))
        nearest = min(range(len(values)), key=lambda i: abs(values[i] - default))
        answer = await self.ask(messages, model, default=model(answer=options[nearest]), purpose=purpose,
                                agent_id=agent_id, tick=tick, max_tokens=16, group=route.group)
        if not answer.ok:
            return Rating(default, [], False, True, answer.call_id, request.seed)
        picked = list(options).index(answer.value.answer)  # type: ignore[attr-defined]
        return Rating(values[picked], [float(i == picked) for i in range(len(options))], True, True,
                      answer.call_id, request.seed)

    @property
    def reads_probabilities(self) -> bool:
        """``Route.reads_probabilities`` of the default route (a person's: ``route(agent_id)``)."""
        return self._routes[None].reads_probabilities

    def count_tokens(self, messages: list[dict[str, str]], agent_id: str | None = None) -> int:
        """The prompt tokens ``agent_id``'s backend (``route``) will see for ``messages`` (its chat
        template applied): exact where the backend has a tokenizer (llama.cpp, vLLM), an
        over-counting estimate otherwise (``simulation.llm.backend.estimate_tokens``). A request
        fits when this plus its ``max_tokens`` is at most the context window."""
        from simulation.llm.backend import count_tokens

        return count_tokens(self.route(agent_id).backend, messages)

    def _record(self, request: LLMRequest, completion: RawCompletion, attempt: int, ok: bool,
                error: str | None, fallback: bool) -> int | None:
        s = self.stats
        s.calls += 1
        s.prompt_tokens += completion.prompt_tokens
        s.completion_tokens += completion.completion_tokens
        s.llm_seconds += completion.latency_s
        s.parse_failures += not ok
        s.cache_hits += completion.cache_hit
        if self.on_call:
            answered_by = self._routes[request.group].backend
            return self.on_call(
                CallRecord(
                    request=request, completion=completion, backend=answered_by.name,
                    model=answered_by.model_id, attempt=attempt, parse_ok=ok,
                    parse_error=error, fallback=fallback, cache_hit=completion.cache_hit,
                )
            )
        return None

    async def _send(self, requests: list[LLMRequest]) -> list[RawCompletion]:
        """The batch's requests of each model group as one batch to its backend, group after group in
        the order they first appear (see the module's docstring); the answers in the batch's order."""
        parts: dict[str | None, list[int]] = {}
        for i, request in enumerate(requests):
            parts.setdefault(request.group, []).append(i)
        if len(parts) == 1:
            return await self._send_to(self._routes[requests[0].group], requests)
        answers: list[RawCompletion | None] = [None] * len(requests)
        for group, indices in parts.items():
            part = await self._send_to(self._routes[group], [requests[i] for i in indices])
            if len(part) != len(indices):
                raise RunError(f"backend {self._routes[group].backend.name} returned {len(part)} answers "
                               f"for {len(indices)} requests")
            for i, answer in zip(indices, part):
                answers[i] = answer
        return answers  # type: ignore[return-value]

    async def _send_to(self, route: Route, requests: list[LLMRequest]) -> list[RawCompletion]:
        """One batch to one backend: awaited where the backend talks to servers (its requests are in
        flight together), computed in this process otherwise; under the route's deadline."""
        self.stats.batches += 1
        on_done = (lambda _i, c: self.on_progress(c)) if self.on_progress else None  # type: ignore[misc]
        if route.call_timeout_s is None:
            return await agenerate(route.backend, requests, on_done)
        return await bounded(route.backend, requests, on_done, route.call_timeout_s)
