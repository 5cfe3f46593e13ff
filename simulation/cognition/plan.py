"""Hierarchical plans: a daily plan on waking, hour blocks and 5-30 minute steps made lazily.

1. **Day** (on waking): the day in broad strokes (3-6 items, each an hour, activity and
   place) from the persona, relevant memories and, from the second day on, a one-line
   summary of yesterday that the model writes first and the plan then follows from.
2. **Hours** (when a plan item begins): an item spanning several hours is split into what
   happens in each hour. One question per item, asked only when the item is reached.
3. **Steps** (when the agent has nothing queued for the current hour): the rest of the hour
   as 5-30 minute actions with a place and an importance. The agent works through them
   without asking anything (``PersonaAgent.advance``). A reaction drops the queue and asks
   again from the current time, starting with what the agent decided to do.

Less than ``MIN_WINDOW`` minutes before the hour is over, the agent carries on with the
hour's activity without asking. Every level has a safe default (the routine day, the item
itself, the hour's activity) so a model that returns garbage still gives a day.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import context, memory_line
from simulation.cognition.schemas import DailyPlan, Step, clip, hours_model, plan_model, steps_model
from simulation.core import Action, HourBlock, MemoryKind, PlanItem, Provenance, Purpose, Source
from simulation.memory.stream import MemoryNode

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

MIN_WINDOW = 20
"""Minutes: with less of the hour left, carry on with the hour's activity instead of asking."""
MAX_HOURS = 8
"""Hour blocks asked for in one question; a longer item repeats its activity after that."""
YESTERDAY_LINES = 8


def bed_hour(me: AgentState) -> int:
    routine = me.persona.routine
    return routine.sleep.hour + (24 if routine.sleep <= routine.wake else 0)  # night owls sleep after midnight


def routine_plan(me: AgentState, hour: int, hub: str) -> list[PlanItem]:
    """A plain day from the persona's placement: breakfast at home, work (or the town's hub),
    out among people in the late afternoon, dinner at home. It seeds the plan prompt's example
    and is the safe default when the model's plan is unusable. A pure function of the person,
    the hour they plan at and the town's hub."""
    now = hour
    bed = bed_hour(me)
    day = [
        (now, "having breakfast", me.home),
        (max(now + 1, 9), "working" if me.workplace else "taking a walk", me.workplace or hub),
        (max(now + 2, 17), "meeting people around town", hub),
        (max(now + 3, 19), "having dinner and relaxing", me.home),
    ]
    return [PlanItem(hour=h, activity=a, place=p) for h, a, p in day if h < bed and h <= 23]


def yesterday_memories(nodes: list[MemoryNode], today: date) -> list[MemoryNode]:
    """The most important memories of a person's last day before ``today``, in time order."""
    earlier = [n for n in nodes
               if n.created.date() < today and n.kind not in (MemoryKind.SEED, MemoryKind.UTTERANCE,
                                                                 MemoryKind.SUMMARY)]
    if not earlier:
        return []
    day = max(n.created.date() for n in earlier)
    last = [n for n in earlier if n.created.date() == day]
    top = sorted(last, key=lambda n: (-n.rated_importance, -n.id))[:YESTERDAY_LINES]
    return sorted(top, key=lambda n: n.id)


async def daily_plan(me: AgentState, mind: Mind) -> list[PlanItem]:
    now = mind.now
    yesterday = yesterday_memories(mind.memories(me.id).nodes, now.date())
    model = plan_model(mind.place_ids, bool(yesterday))
    skeleton = routine_plan(me, now.hour, mind.hub) or [PlanItem(hour=now.hour, activity="resting", place=me.home)]
    recap = yesterday[-1].text[:160] if yesterday else ""
    default = model(plan=[i.model_dump() for i in skeleton], **({"yesterday": recap} if yesterday else {}))
    ctx = await context(me, mind, f"{me.persona.name}'s plans and goals for {now:%A}", Purpose.PLAN)
    msgs = prompts.messages(
        me.system_prompt, "plan.j2", **ctx, day=now.strftime("%A %d %B"),
        bedtime=me.persona.routine.sleep.strftime("%H:%M"), yesterday=[memory_line(n) for n in yesterday],
        example=default.model_dump_json(exclude=None if yesterday else {"yesterday"}),
    )
    answer = await mind.ask(me, msgs, model, default=default, purpose=Purpose.PLAN, max_tokens=256,
                            check=lambda v: _check_plan(v, now.hour))
    items = sorted(answer.value.plan, key=lambda i: i.hour)
    me.plan = items
    me.plan_day = now.date()
    me.hours = {}
    me.steps, me.steps_key = [], None
    if yesterday and answer.ok:
        mind.remember(me.id, MemoryKind.SUMMARY,
                      f"{me.first_name}'s day on {yesterday[-1].created:%A}: {answer.value.yesterday}",
                      Provenance(Source.PLANNED))
    text = "; ".join(f"{i.hour:02d}:00 {i.activity} at {mind.place_name(i.place)}" for i in items)
    mind.remember(me.id, MemoryKind.PLAN, f"Plan for {now:%A}: {text}", Provenance(Source.PLANNED))
    mind.record_plan(me, items, answer.ok)
    return items


def _check_plan(plan: DailyPlan, hour: int) -> str | None:
    """A day planned from now on: a plan that starts before the current hour is rejected (and retried)."""
    early = [i.hour for i in plan.plan if i.hour < hour]
    return f"the plan starts at {min(early):02d}:00, before now ({hour:02d}:00)" if early else None


def _item_span(me: AgentState, hour: int) -> tuple[PlanItem, int] | None:
    """The plan item in force at ``hour`` and the hour it ends (the next item, or bedtime)."""
    index = None
    for i, item in enumerate(me.plan):  # sorted by hour
        if item.hour <= hour:
            index = i
    if index is None:
        return None
    end = me.plan[index + 1].hour if index + 1 < len(me.plan) else bed_hour(me)
    return me.plan[index], max(end, hour + 1)


async def hour_block(me: AgentState, mind: Mind) -> HourBlock:
    """What the current hour is for, splitting the plan item in force into hours when first reached."""
    hour = mind.now.hour
    if hour in me.hours:
        return me.hours[hour]
    span = _item_span(me, hour)
    if span is None:
        me.hours[hour] = HourBlock(hour, "taking it easy", me.place)
        return me.hours[hour]
    item, end = span
    n = min(end - hour, MAX_HOURS)
    if n <= 1:
        me.hours[hour] = HourBlock(hour, item.activity, item.place)
        return me.hours[hour]
    model = hours_model(n)
    default = model(hours=[item.activity] * n)
    ctx = await context(me, mind, item.activity, Purpose.HOURS)
    msgs = prompts.messages(
        me.system_prompt, "hours.j2", **ctx, plan=me.plan, item=item, item_place=mind.place_name(item.place),
        start=hour, end=hour + n, example=default.model_dump_json(),
    )
    answer = await mind.ask(me, msgs, model, default=default, purpose=Purpose.HOURS, max_tokens=24 + 20 * n)
    for j, activity in enumerate(answer.value.hours):
        me.hours[hour + j] = HourBlock(hour + j, activity.strip() or item.activity, item.place)
    mind.record_schedule(me, "hours", item.activity,
                         [{"hour": hour + j, "activity": me.hours[hour + j].activity, "place": item.place}
                          for j in range(n)], answer.ok)
    return me.hours[hour]


def fit_steps(steps: list[Step], window: int, call_id: int | None = None) -> list[Action]:
    """Steps laid end to end over ``window`` minutes: later ones cut, the last one stretched or
    trimmed so the queue ends with the hour."""
    out: list[Action] = []
    used = 0
    for step in steps:
        if used >= window:
            break
        text = step.action.strip().rstrip(".,;:!").strip()
        minutes = min(step.minutes, window - used)
        out.append(Action(text=text or "carrying on", place=step.place, minutes=minutes,
                          importance=float(step.importance), call_id=call_id))
        used += minutes
    if out and used < window:
        out[-1].minutes += window - used
    return out


async def plan_steps(me: AgentState, mind: Mind) -> list[Action]:
    """Queue the rest of the current hour as 5-30 minute steps (see the module docstring)."""
    now = mind.now
    left = 60 - now.minute
    block = await hour_block(me, mind)
    reaction, me.replan = me.replan, None
    if left < MIN_WINDOW and not reaction:
        steps = [Action(block.activity, block.place, left)]
        ok = True
    else:
        model = steps_model(mind.place_ids)
        first = min(30, left)
        example = [{"action": clip(reaction or block.activity, 60), "place": block.place, "minutes": first,
                    "importance": 3}]
        if left > first:
            example.append({"action": clip(block.activity, 60), "place": block.place, "minutes": min(30, left - first),
                            "importance": 2})
        default = model(steps=example)
        ctx = await context(me, mind, reaction or block.activity, Purpose.STEPS)
        msgs = prompts.messages(
            me.system_prompt, "steps.j2", **ctx, block=block, block_place=mind.place_name(block.place),
            until=(now + timedelta(minutes=left)).strftime("%H:%M"), minutes=left, reaction=reaction or "",
            example=default.model_dump_json(),
        )
        answer = await mind.ask(me, msgs, model, default=default, purpose=Purpose.STEPS, max_tokens=200)
        ok = answer.ok
        steps = (fit_steps(answer.value.steps, left, answer.call_id) if ok
                 else [Action(reaction or block.activity, block.place, left)])
    me.steps = steps
    me.steps_key = (now.date(), now.hour)
    mind.record_schedule(me, "steps", block.activity,
                         [{"action": s.text, "place": s.place, "minutes": s.minutes, "importance": s.importance}
                          for s in steps], ok)
    return steps
