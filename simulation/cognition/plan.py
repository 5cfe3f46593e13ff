"""Daily plans (at waking) and the next concrete action (whenever the current one ends)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.agent import Action
from simulation.cognition import prompts
from simulation.cognition.schemas import DailyPlan, NextAction, PlanItem, action_model, plan_model

if TYPE_CHECKING:
    from simulation.agent import PersonaAgent


def routine_plan(agent: PersonaAgent) -> list[PlanItem]:
    """A plain day from the persona's placement: breakfast at home, work (or the town's hub),
    out among people in the late afternoon, dinner at home. It seeds the plan prompt's example
    and is the safe default when the model's plan is unusable."""
    m = agent.model
    routine = agent.persona.routine
    now = m.now.hour
    bed = routine.sleep.hour + (24 if routine.sleep <= routine.wake else 0)  # night owls sleep after midnight
    day = [
        (now, "having breakfast", agent.home),
        (max(now + 1, 9), "working" if agent.workplace else "taking a walk",
         agent.workplace or m.hub),
        (max(now + 2, 17), "meeting people around town", m.hub),
        (max(now + 3, 19), "having dinner and relaxing", agent.home),
    ]
    return [PlanItem(hour=h, activity=a, place=p) for h, a, p in day if h < bed and h <= 23]


async def daily_plan(agent: PersonaAgent) -> list[PlanItem]:
    m = agent.model
    model = plan_model(m.place_ids)
    skeleton = routine_plan(agent) or [PlanItem(hour=m.now.hour, activity="resting", place=agent.home)]
    example = DailyPlan(plan=skeleton).model_dump_json()
    ctx = agent.prompt_context(query=f"today plan {agent.persona.occupation}")
    msgs = prompts.messages(
        agent.system_prompt, "plan.j2", **ctx,
        day=m.now.strftime("%A %d %B"), bedtime=agent.persona.routine.sleep.strftime("%H:%M"),
        example=example,
    )
    answer = await m.llm.ask(msgs, model, default=DailyPlan(plan=skeleton), purpose="plan",
                             agent_id=agent.agent_id, tick=m.tick, max_tokens=220)
    items = sorted(answer.value.plan, key=lambda i: i.hour)
    agent.plan = items
    agent.plan_day = m.now.date()
    text = "; ".join(f"{i.hour:02d}:00 {i.activity} at {m.town.name(i.place)}" for i in items)
    agent.remember("plan", f"Plan for {m.now:%A}: {text}")
    m.log_plan(agent, items, answer.ok)
    return items


async def next_action(agent: PersonaAgent) -> Action:
    m = agent.model
    step = agent.plan_for(m.now.hour)
    fallback = NextAction(action=step.activity if step else "taking a short break",
                          place=step.place if step else agent.place, minutes=30)
    ctx = agent.prompt_context(query=step.activity if step else agent.persona.occupation)
    msgs = prompts.messages(
        agent.system_prompt, "action.j2", **ctx, plan=agent.plan,
        example=fallback.model_dump_json(),
    )
    answer = await m.llm.ask(msgs, action_model(m.place_ids), default=fallback, purpose="action",
                             agent_id=agent.agent_id, tick=m.tick, max_tokens=64)
    value = answer.value
    text = value.action.strip().rstrip(".,;:!").strip() or fallback.action
    return Action(text=text, place=value.place, minutes=value.minutes)
