"""Plans: the day chosen from a menu on waking, then each hour's activity, with no more questions.

1. **Day** (on waking): the day's plan is *chosen*, not written: from the person's usual day,
   what they know is happening today and what anyone can do (``menu.day_menu``), each item an
   hour and the number of one of the menu's options (the answer's schema allows nothing else).
   The plan is the usual day with the chosen changes in it (``day_with_changes``). From the
   second day on, the model first sums up yesterday in one line, and the plan follows from it.
   The safe default is the usual day.
2. **Hours**: the plan item in force is the hour's activity, at its place.
3. **Steps**: the rest of the hour is that activity. A reaction ("do something else now")
   takes up to half an hour at the person's place first, then the hour's activity resumes.

A 135M model asked for free-text plans, hour blocks and 5-30 minute steps invented places
and activities; these levels now cost no LLM call (the day's choice is the only one), and a
person's day is always at real places that fit what they do.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING

from simulation.cognition import prompts
from simulation.cognition.context import context, memory_line
from simulation.cognition.menu import Option, day_menu
from simulation.cognition.schemas import DailyPlan, choice_plan_model
from simulation.core import Action, HourBlock, MemoryKind, PlanItem, Provenance, Purpose, Source, Status
from simulation.formats.persona import HOME, WORK
from simulation.memory.stream import UNRATED_IMPORTANCE, MemoryNode

if TYPE_CHECKING:
    from simulation.agents import AgentState
    from simulation.cognition.mind import Mind

REACTION_MINUTES = 30
"""How long a reaction ("do something else now") lasts before the hour's activity resumes."""
USUAL_IMPORTANCE = 2.0
"""Importance of the memory "X is <doing their usual thing>": mundane, no question needed."""
REACTION_IMPORTANCE = UNRATED_IMPORTANCE
"""Importance of the memory "X is <doing what they chose instead>": a break from the day, above
the usual day's 2, middling (what retrieval assumes of anything unrated). Asked, the bundled
model rated these 6.0-7.2 and the measurement model 3.5-7.6 whatever they said. Of a person's own doings
only a change their plan made is asked about (the usual day weighs 2, a trip to tell someone
news what the news weighs: ``seek``)."""
YESTERDAY_LINES = 8


def bed_hour(me: AgentState) -> int:
    routine = me.persona.routine
    return routine.sleep.hour + (24 if routine.sleep <= routine.wake else 0)  # night owls sleep after midnight


def bedtime(me: AgentState, day: date) -> datetime:
    """When ``me`` goes to bed on the night that starts on ``day`` (the next morning for a night owl,
    as ``bed_hour`` counts)."""
    routine = me.persona.routine
    return datetime.combine(day, routine.sleep) + timedelta(days=routine.sleep <= routine.wake)


def routine_plan(me: AgentState, hour: int, hub: str) -> list[PlanItem]:
    """The person's usual day from ``hour`` until bedtime: their habits (``routine.day``) when the
    persona has them, the habit in force at ``hour`` starting now; otherwise a plain day from
    their placement (breakfast at home, work or the town's hub, out among people in the late
    afternoon, dinner at home). It is what the plan is chosen around and the safe default when
    the model's plan is unusable. A pure function of the person, the hour and the town's hub."""
    bed = bed_hour(me)
    habits = me.persona.routine.day
    if habits:
        places = {HOME: me.home, WORK: me.workplace or hub}
        day = [(h.at.hour, h.activity, places.get(h.place, h.place)) for h in habits]
        current = [d for d in day if d[0] <= hour][-1:]
        day = [(hour, a, p) for _, a, p in current] + [d for d in day if d[0] > hour]
    else:
        day = [
            (hour, "having breakfast", me.home),
            (max(hour + 1, 9), "working" if me.workplace else "taking a walk", me.workplace or hub),
            (max(hour + 2, 17), "meeting people around town", hub),
            (max(hour + 3, 19), "having dinner and relaxing", me.home),
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
    usual = routine_plan(me, now.hour, mind.hub) or [PlanItem(hour=now.hour, activity="resting", place=me.home)]
    menu = day_menu(me, mind, usual, now.date())
    model = choice_plan_model(len(menu), now.hour, min(23, max(now.hour, bed_hour(me) - 1)), bool(yesterday))
    number = {(o.activity, o.place): n for n, o in enumerate(menu, 1)}
    recap = yesterday[-1].text[:160] if yesterday else ""
    default = model(plan=[{"hour": i.hour, "choice": number[(i.activity, i.place)]} for i in usual],
                    **({"yesterday": recap} if yesterday else {}))
    ctx = await context(me, mind, f"{me.persona.name}'s plans and goals for {now:%A}", Purpose.PLAN)
    msgs = prompts.messages(
        me.system_prompt, "plan.j2", **ctx, day=now.strftime("%A %d %B"),
        bedtime=me.persona.routine.sleep.strftime("%H:%M"), yesterday=[memory_line(n) for n in yesterday],
        menu=menu, example=default.model_dump_json(exclude=None if yesterday else {"yesterday"}),
    )
    answer = await mind.ask(me, msgs, model, default=default, purpose=Purpose.PLAN, max_tokens=24 + 20 * len(usual),
                            check=lambda v: _check_plan(v, now.hour))
    items = day_with_changes(usual, [(i.hour, menu[i.choice - 1]) for i in answer.value.plan], bed_hour(me))
    me.plan = items
    me.plan_day = now.date()
    me.plan_call = answer.call_id if answer.ok else None
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


def usual_day(me: AgentState, mind: Mind) -> list[PlanItem]:
    """A background-crowd member's day, asked of nobody: the usual day, with the happenings they
    accepted an invitation to in it (``day_with_changes``), recorded like a chosen plan."""
    now = mind.now
    usual = routine_plan(me, now.hour, mind.hub) or [PlanItem(hour=now.hour, activity="resting", place=me.home)]
    going = [(h.start.hour, option) for h in me.going if h.start.date() == now.date()
             for option in day_menu(me, mind, [], now.date()) if option.until is not None
             and option.place == h.place and option.hour == h.start.hour]
    items = day_with_changes(usual, going, bed_hour(me))
    me.plan, me.plan_day, me.plan_call = items, now.date(), None
    me.hours, me.steps, me.steps_key = {}, [], None
    text = "; ".join(f"{i.hour:02d}:00 {i.activity} at {mind.place_name(i.place)}" for i in items)
    mind.remember(me.id, MemoryKind.PLAN, f"Plan for {now:%A}: {text}", Provenance(Source.PLANNED),
                  importance=USUAL_IMPORTANCE)
    mind.record_plan(me, items, True)
    return items


def day_with_changes(usual: list[PlanItem], choices: list[tuple[int, Option]], bed: int) -> list[PlanItem]:
    """The usual day with the chosen changes in it. A habit chosen stays at its own hour (it is
    there already). Something that happens at a set time (a happening) goes in at its hour and
    lasts until it is over; anything else goes in at the hour the model gave it, for that hour.
    After a change, whatever the usual day has in force then resumes. The first change for an
    hour stands. A 135M model put "a morning walk" at 21:00 and left whole mornings empty when
    the plan was only what it chose; the usual day is the prior, the choices are the day's news."""
    day = {i.hour: i for i in usual}
    habits = {(i.activity, i.place) for i in usual}
    start = min(day) if day else 0

    def in_force(hour: int) -> PlanItem | None:
        earlier = [h for h in day if h <= hour and (day[h].activity, day[h].place) in habits]
        return day[max(earlier)] if earlier else None

    changed: set[int] = set()
    for given, option in choices:
        if (option.activity, option.place) in habits:
            continue
        hour = option.hour if option.hour is not None else given
        if hour < start or hour >= bed or hour > 23 or hour in changed:
            continue
        until = option.until if option.until is not None else hour + 1
        resume = in_force(until)
        day[hour] = PlanItem(hour=hour, activity=option.activity, place=option.place)
        changed.add(hour)
        for h in [h for h in day if hour < h < until and h not in changed]:
            del day[h]  # what the usual day had inside the change waits until it is over
        if until not in day and until < bed and until <= 23 and resume is not None:
            day[until] = PlanItem(hour=until, activity=resume.activity, place=resume.place)
    return [day[h] for h in sorted(day)]


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
    """What the current hour is for: the plan item in force (resting where they are before it)."""
    hour = mind.now.hour
    if hour not in me.hours:
        span = _item_span(me, hour)
        me.hours[hour] = (HourBlock(hour, span[0].activity, span[0].place) if span is not None
                          else HourBlock(hour, "taking it easy", me.place))
    return me.hours[hour]


async def plan_steps(me: AgentState, mind: Mind) -> list[Action]:
    """Queue the rest of the current hour: a reaction first (at most ``REACTION_MINUTES``, where
    the person is), then the hour's activity at its place (see the module docstring)."""
    now = mind.now
    left = 60 - now.minute
    block = await hour_block(me, mind)
    reaction, me.replan = me.replan, None
    usual = {(i.activity, i.place) for i in routine_plan(me, 0, mind.hub)}
    importance = USUAL_IMPORTANCE if (block.activity, block.place) in usual else None
    steps: list[Action] = []
    if reaction:
        first = min(REACTION_MINUTES, left)
        steps.append(Action(reaction, me.place, first, importance=REACTION_IMPORTANCE))
        left -= first
    if left > 0:
        steps.append(Action(block.activity, block.place, left, importance=importance,
                            call_id=block.call_id if block.call_id is not None else me.plan_call))
    queue_hour(me, mind, steps, block.activity)
    return steps


def queue_hour(me: AgentState, mind: Mind, steps: list[Action], parent: str, replacing: bool = False) -> None:
    """``steps`` become the rest of ``me``'s current hour, recorded as a ``steps`` schedule under
    ``parent``; with ``replacing``, an activity under way stops for them (an errand chosen mid-task)."""
    now = mind.now
    me.steps = steps
    me.steps_key = (now.date(), now.hour)
    if replacing and me.status == Status.ACTING:
        me.status, me.action = Status.IDLE, None
    mind.record_schedule(me, "steps", parent,
                         [{"action": s.text, "place": s.place, "minutes": s.minutes, "importance": s.importance}
                          for s in steps], True)


def keep_hours(me: AgentState, mind: Mind, activity: str, place: str, until: datetime, call_id: int | None) -> None:
    """This hour and the ones after it that start before ``until`` (and bedtime) become ``activity`` at
    ``place``: a change to the day the person agreed to (the director's gathering offer, "go to the
    market now and stay until noon"; ``call_id`` is that answer), which the hours' steps then follow
    as they follow the day's plan, a reaction in between included. An hour that ``until`` ends
    inside is kept whole."""
    hour = mind.now.hour
    while hour <= 23 and (hour == mind.now.hour or hour < bed_hour(me)) \
            and datetime.combine(mind.now.date(), time(hour)) < until:
        me.hours[hour] = HourBlock(hour, activity, place, call_id)
        hour += 1
