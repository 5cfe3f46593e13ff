"""Concordia driver for bench/peers.py: runs Concordia's tutorial simulation (its generic
prefabs), sized to N agents, against an OpenAI-compatible server, and prints one JSON line with
its speed.

Runs with the Concordia venv's Python (gdm-concordia 2.1.0, in a venv made with Python 3.12), never Agora's:

    .venv-peers/concordia/bin/python bench/peers/concordia_driver.py \
        --base-url http://127.0.0.1:8080/v1 --agents 5 --steps 2

The simulation is the one of Concordia's ``examples/tutorial.ipynb`` (the wheel ships no
examples; the prefabs it uses are in the wheel): N ``basic__Entity`` players with a goal each, a
``generic__GameMaster`` ("default rules") and a ``formative_memories_initializer__GameMaster``
that writes every player's backstory first, run by ``prefabs.simulation.generic.Simulation`` on
a ``Sequential`` engine. The model is Concordia's own OpenAI class: in 2.1.0
``language_model.base_gpt_model.BaseGPTModel``, given an ``openai.OpenAI`` client whose
``base_url`` is the server (2.1.0's ``GptLanguageModel`` makes its own client, with no way to name
a server).

Steps. Concordia's sequential engine lets ONE player act per engine step (the game master picks
who, and makes an observation for every player first). So that a step means the same as in the
other peers (every agent acts once), a step here is a round of N turns: ``--steps 2`` runs 2*N
turns, agent-steps are turns, and seconds per step are seconds per turn times N. The
initializer's engine steps (backstories: no player acts) are timed and counted apart, as setup.
2.1.0's ``Simulation.play`` takes no step controller or callback, so the driver hands
``Simulation`` a ``Sequential`` of its own that keeps the engine's loop and adds three things: its
``next_acting`` notes the initializer's ``SKIP_THIS_STEP`` (the end of set-up), its ``resolve``
notes a turn done, and its ``terminate`` ends the game once the turns are done or the time budget
is spent (otherwise it asks the game master, as the engine does). The moment set-up ended and the
moment the turns ended are reported in wall-clock time, so that bench/peers.py can cut the
server's log there.

LLM calls are counted where Concordia's model sends them: each call of the OpenAI client's
``chat.completions.create`` inside it is one request (the SDK's own retries after a timeout are
seen only by the proxy in bench/peers.py). One ``sample_choice`` can make up to 20 requests
(Concordia's OpenAI class re-asks until the answer is exactly one of the options). When the 20 run
out, Concordia raises ``InvalidResponseError`` and the whole simulation would stop; here
the choice falls back to a random option (as Concordia's own ``RandomChoiceLanguageModel``) and is
counted in ``choice_fallbacks`` and ``errors``; so is a next-action spec from the game master that
Concordia cannot parse, which becomes a free-text turn (``lenient_action_specs``).

Two adaptations to a local 2-core server, neither of which changes what Concordia asks: the
request timeout is raised from Concordia's 60 s to ``--request-timeout`` (the engine makes the
players' observations in parallel threads, and the server answers one request at a time, so a
request can wait behind N others), and the sentence embedder is a hashed bag of words in numpy
(the tutorial loads sentence-transformers, which would pull torch; retrieval quality changes the
prompts' content, not the number of calls). The GPT-5 fields 2.1.0 sends with every request
(``reasoning_effort``, ``verbosity``) travel in ``extra_body``, so the request body is the same
whichever ``openai`` release the venv resolved; llama-cpp-python's server ignores them.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection, Mapping, Sequence
from importlib import metadata
from typing import Any

import numpy as np

NAMES = [
    "Ada Hale", "Ben Ortiz", "Cora Lind", "Dev Rao", "Elin Berg", "Femi Adé", "Gus Moreau", "Hana Ito",
    "Ivo Petrov", "Jun Park", "Kira Novak", "Luis Vega", "Mona Saleh", "Nils Dahl", "Omar Haddad",
    "Pia Rossi", "Quinn Doyle", "Rosa Lima", "Sami Koski", "Tess Quinn",
]
GOALS = [
    "sell the whole batch of bread before noon", "find out who broke the fountain",
    "get elected to the town council", "organise a party for Friday", "borrow money to fix the roof",
    "make peace with an old friend", "open a bookshop in the square", "win the baking contest",
]


def hashed_embedder(dims: int = 256) -> Any:
    """A deterministic bag-of-words embedding (unit vector of hashed word counts)."""

    def embed(text: str) -> np.ndarray:
        vec = np.zeros(dims, dtype=np.float32)
        for word in re.findall(r"[a-z0-9']+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            vec[h % dims] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    return embed


class Counter:
    """Thread-safe counters for requests, model calls and fallbacks."""

    def __init__(self) -> None:
        self.requests = 0
        self.request_seconds = 0.0
        self.request_failures = 0
        self.sample_text = 0
        self.sample_choice = 0
        self.choice_fallbacks = 0
        self.fallback_samples: list[str] = []
        self.lock = threading.Lock()


GPT5_FIELDS = ("reasoning_effort", "verbosity")
"""What 2.1.0's BaseGPTModel sends with every request, whichever the model: sent in the body as is."""


def count_requests(model: Any, counter: Counter, timeout: float) -> None:
    """Wrap the OpenAI client inside Concordia's model (2.1.0: ``BaseGPTModel._client``): count
    each HTTP request, raise the timeout, and pass the GPT-5 fields as body fields."""
    completions = model._client.chat.completions
    original = completions.create

    def create(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("timeout") is not None:
            kwargs["timeout"] = max(float(kwargs["timeout"]), timeout)
        extra = {k: kwargs.pop(k) for k in GPT5_FIELDS if k in kwargs}
        if extra:
            kwargs["extra_body"] = {**(kwargs.get("extra_body") or {}), **extra}
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        except Exception:
            with counter.lock:
                counter.request_failures += 1
            raise
        finally:
            with counter.lock:
                counter.requests += 1
                counter.request_seconds += time.perf_counter() - started

    completions.create = create


def counted_model(inner: Any, counter: Counter, seed: int) -> Any:
    """A Concordia LanguageModel that counts calls and survives a choice the model never makes."""
    from concordia.language_model import language_model

    rng = random.Random(seed)

    class CountedModel(language_model.LanguageModel):
        # 2.1.0's LanguageModel.sample_text: no top_p/top_k (nor DEFAULT_TOP_P/DEFAULT_TOP_K)
        def sample_text(self, prompt: str, *, max_tokens: int = language_model.DEFAULT_MAX_TOKENS,
                        terminators: Collection[str] = language_model.DEFAULT_TERMINATORS,
                        temperature: float = language_model.DEFAULT_TEMPERATURE,
                        timeout: float = language_model.DEFAULT_TIMEOUT_SECONDS, seed: int | None = None) -> str:
            with counter.lock:
                counter.sample_text += 1
            return inner.sample_text(prompt, max_tokens=max_tokens, terminators=terminators,
                                     temperature=temperature, timeout=timeout, seed=seed)

        def sample_choice(self, prompt: str, responses: Sequence[str], *,
                          seed: int | None = None) -> tuple[int, str, Mapping[str, Any]]:
            with counter.lock:
                counter.sample_choice += 1
            try:
                return inner.sample_choice(prompt, responses, seed=seed)
            except language_model.InvalidResponseError as exc:
                with counter.lock:
                    counter.choice_fallbacks += 1
                    if len(counter.fallback_samples) < 5:
                        counter.fallback_samples.append(f"InvalidResponseError: {str(exc)[:200]}")
                    idx = rng.randrange(len(responses)) if responses else 0
                return idx, responses[idx] if responses else "", {"fallback": True}

    return CountedModel()


class TurnLimit:
    """The turns to play and the time budget, and what the engine has done so far."""

    def __init__(self, turns: int, budget_s: float) -> None:
        self.turns = turns
        self.budget_s = budget_s
        self.turns_done = 0
        self.turns_started: float | None = None
        self.stopped = "done"
        self.ended_by_game_master = 0

    def may_go_on(self) -> bool:
        """Whether the engine may take another step (False also records why not)."""
        if self.turns_done >= self.turns:
            return False
        if self.budget_s and self.turns_started is not None and \
                time.perf_counter() - self.turns_started >= self.budget_s:
            self.stopped = "budget"
            return False
        return True


def counting_engine(limit: TurnLimit, on_setup_done: Callable[[], None], on_turn: Callable[[], None]) -> Any:
    """A ``Sequential`` engine (2.1.0) that ends the game at the turn limit or budget and reports
    the end of set-up and every turn; its loop (``run_loop``) is Concordia's own."""
    from concordia.environment.engines import sequential
    from concordia.typing import entity as entity_lib

    class CountingSequential(sequential.Sequential):
        def terminate(self, game_master: Any, verbose: bool = False) -> bool:
            if not limit.may_go_on():
                return True
            ended = super().terminate(game_master, verbose)
            limit.ended_by_game_master += bool(ended)
            return ended

        def next_acting(self, game_master: Any, entities: Any, log_entry: Any = None,
                        log: Any = None) -> tuple[Any, Any]:
            entity, spec = super().next_acting(game_master, entities, log_entry=log_entry, log=log)
            if spec.output_type == entity_lib.OutputType.SKIP_THIS_STEP:  # the initializer's step
                on_setup_done()
            return entity, spec

        def resolve(self, game_master: Any, putative_event: str, verbose: bool = False) -> None:
            super().resolve(game_master=game_master, putative_event=putative_event, verbose=verbose)
            on_turn()

    return CountingSequential()


def build_simulation(n_agents: int, model: Any, seed: int, acting_order: str, engine: Any) -> Any:
    """The tutorial's configuration with ``n_agents`` players in a small town."""
    import concordia.prefabs.entity as entity_prefabs
    import concordia.prefabs.game_master as game_master_prefabs
    from concordia.prefabs.simulation import generic as simulation
    from concordia.typing import prefab as prefab_lib
    from concordia.utils import helper_functions

    if n_agents > len(NAMES):
        raise SystemExit(f"at most {len(NAMES)} agents (add names to NAMES)")
    prefabs = {
        **helper_functions.get_package_classes(entity_prefabs),
        **helper_functions.get_package_classes(game_master_prefabs),
    }
    instances = [
        prefab_lib.InstanceConfig(prefab="basic__Entity", role=prefab_lib.Role.ENTITY,
                                  params={"name": NAMES[i], "goal": GOALS[i % len(GOALS)]})
        for i in range(n_agents)
    ]
    instances += [
        prefab_lib.InstanceConfig(prefab="generic__GameMaster", role=prefab_lib.Role.GAME_MASTER,
                                  params={"name": "default rules", "extra_event_resolution_steps": "",
                                          "acting_order": acting_order}),
        prefab_lib.InstanceConfig(prefab="formative_memories_initializer__GameMaster",
                                  role=prefab_lib.Role.INITIALIZER,
                                  params={"name": "initial setup rules", "next_game_master_name": "default rules",
                                          "shared_memories": [
                                              "Willowbrook is a small market town by a river.",
                                              "The town square hosts a market every Saturday.",
                                          ]}),
    ]
    config = prefab_lib.Config(default_premise="It is Saturday morning, market day in Willowbrook's square.",
                               default_max_steps=1, prefabs=prefabs, instances=instances)
    np.random.seed(seed)
    return simulation.Simulation(config=config, model=model, embedder=hashed_embedder(), engine=engine)


def lenient_action_specs(counter: Counter) -> None:
    """When the game master's next-action spec cannot be parsed (a small model writes a sentence
    where Concordia expects its format), the player gets a free-text turn with the default call
    to action instead of the whole simulation stopping; counted like a choice fallback."""
    from concordia.environment import engine as engine_lib
    from concordia.typing import entity as entity_lib

    strict = engine_lib.action_spec_parser

    def parse(text: str) -> Any:
        try:
            return strict(text)
        except (RuntimeError, ValueError, TypeError, KeyError, IndexError) as exc:  # every way its parser meets prose
            counter.choice_fallbacks += 1
            if len(counter.fallback_samples) < 5:
                counter.fallback_samples.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            return entity_lib.ActionSpec(call_to_action=entity_lib.DEFAULT_CALL_TO_ACTION,
                                         output_type=entity_lib.OutputType.FREE)

    engine_lib.action_spec_parser = parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model-name", default="smollm2-135m", help="model name sent to the server")
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="rounds of N turns")
    parser.add_argument("--budget-s", type=float, default=0.0,
                        help="stop after the turn in which this many seconds (after setup) have passed (0: no limit)")
    parser.add_argument("--request-timeout", type=float, default=900.0)
    parser.add_argument("--acting-order", default="game_master_choice",
                        choices=["game_master_choice", "fixed", "random"],
                        help="who acts next: the generic game master's own choice (the prefab's default), "
                             "round robin, or random")
    parser.add_argument("--restarts", type=int, default=3,
                        help="times to play on when the game master ends the game before the turns are done")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    result: dict[str, Any] = {
        "framework": "concordia",
        "example": f"tutorial (basic__Entity x N, generic__GameMaster, formative memories; sequential engine, "
                   f"acting order {args.acting_order})",
        "agents": args.agents, "steps_requested": args.steps, "steps": 0.0, "agent_steps": 0,
        "minutes_per_step": None,  # the tutorial has no clock: bench/peers.py applies its convention
        "seconds": 0.0, "setup_seconds": 0.0, "setup_calls": 0, "llm_calls": 0, "llm_seconds": 0.0,
        "errors": 0, "error_samples": [], "stopped": "done", "turn_seconds": [], "turn_calls": [], "restarts": 0,
        "steps_started_at": None, "steps_ended_at": None,
    }
    for dist, key in (("gdm-concordia", "version"), ("openai", "openai_version")):
        with contextlib.suppress(metadata.PackageNotFoundError):
            result[key] = metadata.version(dist)

    counter = Counter()
    lenient_action_specs(counter)
    limit = TurnLimit(args.steps * args.agents, args.budget_s)
    marks: dict[str, float] = {}

    def requests_now() -> int:
        with counter.lock:
            return counter.requests

    def on_setup_done() -> None:
        """An initializer step ended (no player acted): set-up lasts until the last one before a turn."""
        if limit.turns_done:
            return  # a skipped step between turns belongs to the turn after it
        now, requests = time.perf_counter(), requests_now()
        result["setup_seconds"] = now - marks["t0"]
        result["setup_calls"] = requests - marks["calls0"]
        result["steps_started_at"] = time.time()
        limit.turns_started = now  # turns start where set-up ended
        marks["last"], marks["last_calls"] = now, requests

    def on_turn() -> None:
        now, requests = time.perf_counter(), requests_now()
        if limit.turns_started is None:  # no set-up step seen: the turns started with the play
            limit.turns_started = marks["t0"]
            result["steps_started_at"] = marks["wall0"]
        result["turn_seconds"].append(round(now - marks["last"], 3))
        result["turn_calls"].append(requests - marks["last_calls"])
        result["steps_ended_at"] = time.time()
        limit.turns_done += 1
        marks["last"], marks["last_calls"] = now, requests

    # Concordia prints every step (verbose is on in Simulation.play): keep stdout for the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            import openai
            from concordia.language_model import base_gpt_model

            client = openai.OpenAI(api_key="sk-local-no-key", base_url=args.base_url)
            inner = base_gpt_model.BaseGPTModel(args.model_name, client=client)
            count_requests(inner, counter, args.request_timeout)
            model = counted_model(inner, counter, args.seed)
            engine = counting_engine(limit, on_setup_done, on_turn)
            sim = build_simulation(args.agents, model, args.seed, args.acting_order, engine)
            marks["t0"] = marks["last"] = time.perf_counter()
            marks["wall0"] = time.time()
            marks["calls0"] = marks["last_calls"] = counter.requests
            # Initializer steps + turns; the engine ends the game when the turns are done. When the game
            # master ends it early, play on (at most --restarts times, without a new premise): the
            # initializer, first in the engine's list again, hands over at once (it initializes once).
            premise: str | None = None
            while True:
                sim.play(premise=premise, max_steps=limit.turns, return_html_log=False)
                if limit.turns_done >= limit.turns or limit.stopped != "done" or result["restarts"] >= args.restarts:
                    break
                result["restarts"] += 1
                premise = ""
            if limit.turns_done < limit.turns and limit.stopped == "done":
                result["stopped"] = "ended by the game master"
            else:
                result["stopped"] = limit.stopped
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            result["stopped"] = "crashed"
            result["error_samples"].append(f"{type(exc).__name__}: {str(exc)[:300]}")
            result["errors"] += 1

    turns = limit.turns_done
    n = max(1, args.agents)
    result["agent_steps"] = turns
    result["steps"] = turns / n
    result["seconds"] = float(sum(result["turn_seconds"]))
    result["llm_calls"] = int(sum(result["turn_calls"]))
    result["llm_seconds"] = counter.request_seconds
    result["llm_failures"] = counter.request_failures
    result["requests_total"] = counter.requests
    result["sample_text_calls"] = counter.sample_text
    result["sample_choice_calls"] = counter.sample_choice
    result["choice_fallbacks"] = counter.choice_fallbacks
    result["ended_by_game_master"] = limit.ended_by_game_master
    result["errors"] += counter.choice_fallbacks
    result["error_samples"] += counter.fallback_samples
    result["seconds_per_agent_step"] = result["seconds"] / turns if turns else None
    result["seconds_per_step"] = result["seconds"] / turns * n if turns else None
    result["calls_per_agent_step"] = result["llm_calls"] / turns if turns else None
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
