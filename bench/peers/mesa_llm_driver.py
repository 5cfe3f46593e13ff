"""mesa-llm driver for bench/peers.py: runs mesa-llm's negotiation example, sized to N agents,
against an OpenAI-compatible server, and prints one JSON line with its speed and its tool calls.

Runs with the mesa-llm venv's Python (mesa-llm 0.2.0, in a venv made with Python 3.12), never Agora's:

    .venv-peers/mesa-llm/bin/python bench/peers/mesa_llm_driver.py \
        --base-url http://127.0.0.1:8080/v1 --agents 5 --steps 2

The town is the shape of mesa-llm's ``examples/negotiation`` (the wheel ships no examples, so it is
rebuilt here on the public 0.2.0 API): two sellers in the middle of a 5x5 ``MultiGrid`` and N-2
buyers at random cells, every agent an ``LLMAgent`` with ``ReActReasoning`` (the example app's
choice), mesa-llm's default short/long-term memory, ``vision=-1`` (every other agent: in 0.2.0 a
positive vision on a ``MultiGrid`` sees only the eight cells around the agent, whatever its
radius), sellers limited to ``speak_to``, buyers to ``teleport_to_location``, ``speak_to`` and
``buy_product``. One model step steps every agent once (one agent-step each), one after another in
a shuffled order: the example's app switches on mesa-llm's parallel stepping, which against one
llama.cpp server (one request at a time) would only overlap client-side work, and which lets one
failing agent abort the whole step (mesa-llm issue 220). Here a failing agent is counted in
``errors`` and the step goes on.

What 0.2.0 asks of a driver, read from its source:

* ``LLMAgent`` takes no ``api_base``: the agent's ``ModuleLLM`` and its memory's (the long-term
  summaries) get it after construction; ``ModuleLLM.generate`` hands it to litellm.
* ``ReActReasoning.plan`` ignores a ``prompt=`` argument (it appends only ``agent.step_prompt``):
  the step's instructions are the agent's ``step_prompt``, given at construction (so the memory's
  summary prompt names them too, as mesa-llm means it to) and renewed each step for buyers, whose
  budget changes; ``plan`` gets the observation and the selected tools.

Tool calls. A ReAct agent-step asks twice: a plan (JSON ``reasoning``/``action``; the tools are
listed with ``tool_choice: "none"``), then the action with ``tool_choice: "required"``, whose tool
calls ``apply_plan`` executes through ``ToolManager.call_tools``. The driver wraps that method and
counts, per agent-step, the tool calls the model returned, those that executed, and those that
came back as errors (mesa-llm turns an unknown tool, arguments that do not fit or a tool that
raised into an ``Error: ...`` result). Whether any execute depends on the server's chat format:
bench/peers.py serves mesa-llm with llama-cpp-python's ``chatml-function-calling``.

LLM calls are counted at the lowest level mesa-llm has: every call of litellm's
``completion``/``acompletion`` as ``mesa_llm.module_llm`` sees them (tenacity's retries included),
which covers the agents' reasoning and the memories' consolidation summaries alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
import traceback
from collections import Counter
from importlib import metadata
from typing import Any

# Before litellm is imported: use the cost map bundled in the wheel (no download at import),
# and give the OpenAI provider the key it insists on (the local server checks none).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-local-no-key")


class CallCounter:
    """Counts and times the calls that reach litellm (thread-safe)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.failures = 0
        self._lock = threading.Lock()

    def _count(self, started: float, failed: bool) -> None:
        with self._lock:
            self.calls += 1
            self.failures += failed
            self.seconds += time.perf_counter() - started

    def wrap_sync(self, fn: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            started, failed = time.perf_counter(), True
            try:
                result = fn(*args, **kwargs)
                failed = False
                return result
            finally:
                self._count(started, failed)

        return counted

    def wrap_async(self, fn: Any) -> Any:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            started, failed = time.perf_counter(), True
            try:
                result = await fn(*args, **kwargs)
                failed = False
                return result
            finally:
                self._count(started, failed)

        return counted


class ToolCounter:
    """Counts, per agent-step, the tool calls the model returned and what became of them."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.error_samples: list[str] = []
        self._lock = threading.Lock()

    def wrap(self, tool_manager: type) -> None:
        """Wrap ``ToolManager.call_tools`` (0.2.0: ``call_tools(agent, llm_response) -> list[dict]``,
        one ``{"name", "response", ...}`` per tool call, ``"Error: ..."`` for one that failed)."""
        original = tool_manager.call_tools
        counter = self

        def call_tools(manager: Any, agent: Any, llm_response: Any) -> list[dict]:
            returned = len(getattr(llm_response, "tool_calls", None) or [])
            results = original(manager, agent, llm_response)
            failed = [str(r.get("response", "")).startswith("Error:") for r in results]
            with counter._lock:
                counter.rows.append({
                    "step": agent.model.steps, "agent": agent.unique_id, "kind": type(agent).__name__,
                    "returned": returned, "executed": failed.count(False), "errors": failed.count(True),
                    "tools": [r.get("name") for r, bad in zip(results, failed, strict=True) if not bad],
                })
                for r, bad in zip(results, failed, strict=True):
                    if bad and len(counter.error_samples) < 5:
                        counter.error_samples.append(f"{r.get('name')}: {str(r.get('response'))[:200]}")
            return results

        tool_manager.call_tools = call_tools

    def summary(self, agent_steps: int) -> dict[str, Any]:
        returned = sum(r["returned"] for r in self.rows)
        executed = sum(r["executed"] for r in self.rows)
        errors = sum(r["errors"] for r in self.rows)
        return {
            "returned": returned, "executed": executed, "errors": errors,
            "agent_steps_with_one_executed": sum(r["executed"] > 0 for r in self.rows),
            "agent_steps_applied": len(self.rows),
            "returned_per_agent_step": returned / agent_steps if agent_steps else None,
            "executed_per_agent_step": executed / agent_steps if agent_steps else None,
            "errors_per_agent_step": errors / agent_steps if agent_steps else None,
            "executed_by_tool": dict(Counter(name for r in self.rows for name in r["tools"])),
            "error_samples": self.error_samples,
            "per_agent_step": self.rows,
        }


def build_town(n_agents: int, llm_model: str, api_base: str, seed: int) -> Any:
    """The negotiation town with ``n_agents`` agents: 2 sellers, ``n_agents - 2`` buyers."""
    from mesa.model import Model
    from mesa.space import MultiGrid

    from mesa_llm.llm_agent import LLMAgent
    from mesa_llm.reasoning.react import ReActReasoning
    from mesa_llm.tools.tool_decorator import tool
    from mesa_llm.tools.tool_manager import ToolManager

    seller_tools = ToolManager()
    buyer_tools = ToolManager()
    prices = {"Brand A Shoes": 40, "Brand A Track Suit": 50, "Brand B Shoes": 35, "Brand B Track Suit": 47}

    @tool(tool_manager=buyer_tools)
    def buy_product(agent: Any, chosen_product: str, chosen_price: int) -> str:
        """
        Buy one product from a seller. The product must be one of "Brand A Shoes", "Brand A Track Suit",
        "Brand B Shoes" or "Brand B Track Suit".

        Args:
            agent: The buying agent (provided automatically).
            chosen_product: The product to buy, with its brand and type.
            chosen_price: The price agreed for it, in dollars.

        Returns:
            What was bought and the budget left.
        """
        if chosen_product not in prices:
            raise ValueError(f"unknown product {chosen_product!r}; choose one of {sorted(prices)}")
        price = prices[chosen_product]
        if agent.budget < price:
            raise ValueError(f"budget {agent.budget} is below the price {price}")
        agent.budget -= price
        agent.products.append(chosen_product)
        agent.internal_state.append(f"owns {chosen_product}")
        seller = agent.model.seller_a if chosen_product.startswith("Brand A") else agent.model.seller_b
        seller.sales += 1
        return f"bought {chosen_product}; budget left {agent.budget}"

    def connect(agent: LLMAgent) -> None:
        """Point the agent's model and its memory's at the server (0.2.0's LLMAgent takes no api_base)."""
        agent.llm.api_base = api_base
        agent.memory.llm.api_base = api_base

    class SellerAgent(LLMAgent):
        def __init__(self, model: Model, system_prompt: str, internal_state: list[str]) -> None:
            super().__init__(model=model, reasoning=ReActReasoning, llm_model=llm_model,
                             system_prompt=system_prompt, vision=-1, internal_state=internal_state,
                             step_prompt=("Stay where you are. If buyers are in your cell or next to it, pitch "
                                          "your products to them with the speak_to tool, and keep talking until "
                                          "they buy or clearly refuse."))
            connect(self)
            self.tool_manager = seller_tools
            self.sales = 0

        def step(self) -> None:
            observation = self.generate_obs()
            plan = self.reasoning.plan(obs=observation, selected_tools=["speak_to"])
            self.apply_plan(plan)

    class BuyerAgent(LLMAgent):
        def __init__(self, model: Model, budget: int) -> None:
            self.budget = budget  # buyer_prompt() reads it before LLMAgent's constructor hands the prompt to the memory
            super().__init__(model=model, reasoning=ReActReasoning, llm_model=llm_model,
                             system_prompt=("You are a buyer at a market. You want to buy a product from a "
                                            "seller, and you bargain. While a seller is in sight, talk rather "
                                            "than move; with no seller in sight, move around until you see one."),
                             vision=-1, internal_state=[], step_prompt=self.buyer_prompt(model))
            connect(self)
            self.tool_manager = buyer_tools
            self.products: list[str] = []

        def buyer_prompt(self, model: Model) -> str:
            grid = model.grid
            return (f"Your budget is ${self.budget}. If you are not talking to a seller, move with the "
                    f"teleport_to_location tool (the grid is {grid.width} x {grid.height}). Sellers may "
                    "send you pitches: learn what they offer, then decide what to buy.")

        def step(self) -> None:
            observation = self.generate_obs()
            self.step_prompt = self.buyer_prompt(self.model)
            plan = self.reasoning.plan(obs=observation,
                                       selected_tools=["teleport_to_location", "speak_to", "buy_product"])
            self.apply_plan(plan)

    class NegotiationTown(Model):
        def __init__(self) -> None:
            super().__init__(seed=seed)
            self.grid = MultiGrid(5, 5, torus=False)
            self.errors: list[str] = []
            buyers = max(0, n_agents - 2)
            for i in range(buyers):
                buyer = BuyerAgent(self, budget=50 if i < buyers - buyers // 2 else 100)
                x, y = (int(v) for v in self.rng.integers(0, 5, size=2))
                self.grid.place_agent(buyer, (x, y))
            self.seller_a = SellerAgent(self, "You sell brand A at a market: shoes for $40 and a track suit for "
                                        "$50. You are a keen, persuasive and hard-working salesperson. Act only "
                                        "through the tools you are given.", ["hard-working", "persuasive"])
            self.grid.place_agent(self.seller_a, (2, 2))
            self.seller_b = SellerAgent(self, "You sell brand B at a market: shoes for $35 and a track suit for "
                                        "$47. You do not care much about the job. Act only through the tools "
                                        "you are given.", ["lazy", "unmotivated"])
            self.grid.place_agent(self.seller_b, (2, 3))

        def step(self) -> None:
            agents = list(self.agents)
            self.random.shuffle(agents)
            for agent in agents:
                try:
                    agent.step()
                except Exception as exc:  # one agent's failure must not end the step
                    self.errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
                    traceback.print_exc(file=sys.stderr)

    return NegotiationTown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model-name", default="smollm2-135m", help="model name sent to the server")
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--budget-s", type=float, default=0.0,
                        help="stop after the step in which this many seconds have passed (0: no limit)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    result: dict[str, Any] = {
        "framework": "mesa-llm", "example": "negotiation (2 sellers + N-2 buyers, ReAct, 5x5 grid, vision -1)",
        "agents": args.agents, "steps_requested": args.steps, "steps": 0, "agent_steps": 0,
        "minutes_per_step": None,  # the example has no clock: bench/peers.py applies its convention
        "seconds": 0.0, "setup_seconds": 0.0, "setup_calls": 0, "llm_calls": 0, "llm_seconds": 0.0,
        "errors": 0, "error_samples": [], "stopped": "done", "step_seconds": [], "step_calls": [],
        "steps_started_at": None, "steps_ended_at": None,
    }
    for dist, key in (("mesa-llm", "version"), ("mesa", "mesa_version"), ("litellm", "litellm_version")):
        with contextlib.suppress(metadata.PackageNotFoundError):
            result[key] = metadata.version(dist)

    counter = CallCounter()
    tools = ToolCounter()
    # Everything mesa-llm and litellm print (memory panels, logs) goes to stderr: stdout carries the JSON.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            import mesa_llm.module_llm as module_llm
            from mesa_llm.tools.tool_manager import ToolManager

            module_llm.completion = counter.wrap_sync(module_llm.completion)
            module_llm.acompletion = counter.wrap_async(module_llm.acompletion)
            tools.wrap(ToolManager)

            t0 = time.perf_counter()
            town = build_town(args.agents, f"openai/{args.model_name}", args.base_url, args.seed)
            result["setup_seconds"] = time.perf_counter() - t0
            result["setup_calls"] = counter.calls
            result["agents"] = len(town.agents)

            result["steps_started_at"] = time.time()
            started = time.perf_counter()
            for _ in range(args.steps):
                if args.budget_s and time.perf_counter() - started >= args.budget_s:
                    result["stopped"] = "budget"
                    break
                t, c = time.perf_counter(), counter.calls
                town.step()
                result["step_seconds"].append(round(time.perf_counter() - t, 3))
                result["step_calls"].append(counter.calls - c)
                result["steps"] += 1
            result["seconds"] = time.perf_counter() - started
            result["steps_ended_at"] = time.time()
            result["llm_calls"] = counter.calls - result["setup_calls"]
            result["llm_seconds"] = counter.seconds
            result["llm_failures"] = counter.failures
            result["errors"] = len(town.errors)
            result["error_samples"] = town.errors[:5]
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            result["stopped"] = "crashed"
            result["errors"] += 1
            result["error_samples"].append(f"{type(exc).__name__}: {str(exc)[:300]}")

    steps = result["steps"]
    result["agent_steps"] = steps * result["agents"]
    result["seconds_per_step"] = result["seconds"] / steps if steps else None
    result["seconds_per_agent_step"] = result["seconds"] / result["agent_steps"] if result["agent_steps"] else None
    result["calls_per_agent_step"] = (result["llm_calls"] / result["agent_steps"]
                                      if result["agent_steps"] else None)
    result["tools"] = tools.summary(result["agent_steps"])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
