"""The behaviour report of a run: how believable it was, as numbers, each defined once (docs/behaviour.md).

``behaviour(con, run_id)`` returns metric name -> value (None where a run gives no basis, e.g.
turns per conversation in a run without conversations). The names are stable: the ``behaviour``
table, ``agora bench behaviour`` and the viewer key on them.

talk
  ``talk.encounters_per_agent_hour``  encounters (two people awake, not walking, at one place at
  the end of a tick, who were not together at the end of the previous one) x 2 / people / game hours
  ``talk.conversations_per_encounter``  conversations started / encounters
  ``talk.turns_mean``, ``talk.turns_median``, ``talk.two_line_share``  lines per conversation, and
  the share of conversations that ended at two lines or fewer
  ``talk.echo_share``  utterance answers rejected as a repeat (or empty), or repaired by dropping
  an echoed opening, / utterance answers
  ``talk.off_aim_share``  utterance answers rejected for not doing their move (news that tells
  nothing of it, a question without a question mark) / utterance answers
  ``talk.example_share``  lines the model wrote (a conversation line, or in older runs the opening
  line of a reaction) that are, word for word, the example line their prompt showed (``rundb.examples``)
  ``talk.name_errors``  lines that address their own speaker or someone not in the conversation
  ``talk.garbled_share``  lines that are a bare word or read the prompt's frame back (``rundb.garbled``)
  (``rundb.names``) / lines
  ``talk.aim.A``  the share of lines made with move A (greet, share, invite, ask, answer, ...);
  0 for a move never made in a run that has lines
  ``talk.invitations``  invitations made; ``talk.invitations_accepted_share`` of them accepted, of
  those settled (an invitation left unanswered in a conversation the run's end cut off is pending,
  not declined; one whose guest walked away without answering counts as not accepted);
  ``talk.invitation_turnout``  of accepted invitations whose happening ended within the run, the
  share whose guest was at its place while it went on
plans
  ``plans.in_order_share``  plans whose hours the model wrote in increasing order
  ``plans.activities_per_agent_day``  distinct actions started, per person per game day
llm
  ``llm.calls_per_agent_hour`` (and ``.crowd`` / ``.named`` in a town with a background crowd),
  ``llm.tokens_per_agent_hour``, ``llm.parse_failure_share`` (of calls),
  ``llm.fallback_share`` (of questions, probes included: answers replaced by the safe default) and
  ``llm.fallback_share.<purpose>`` (every probe question under ``probe``), ``llm.sampled_rating_share`` (ratings the backend could not
  score from its probabilities, so one option was sampled)
model groups (in a run whose people name model groups, ``llm.groups``; per group G, the people who
name none under ``default``; ``rundb.groups``)
  ``llm.group.G.calls_per_agent_hour``, ``llm.group.G.parse_failure_share`` and
  ``llm.group.G.fallback_share`` (as above, over the questions asked for G's people: the
  content-free calibration questions, asked for nobody, are in no group),
  ``talk.group.G.lines_per_agent_hour`` (lines G's people said) and ``talk.group.G.example_share``
facts (per fact id F; ``rundb.facts`` defines each)
  ``facts.F.told`` (the headline: people other than its sources who learnt it from someone),
  ``facts.F.told_own_words`` / ``facts.F.told_example`` (of them, told by a line in the teller's
  own words / by a line that was its prompt's example), ``facts.F.from_unaware`` (told by someone
  not aware of it themselves), ``facts.F.aware`` and ``facts.F.aware_share`` (the sources
  included: the whispered person counts), ``facts.F.cascade_depth``, ``facts.F.distortion``,
  ``facts.F.retention``, ``facts.F.invented``, ``facts.F.first_told_hour`` (game hours from the
  start to the first telling)
happenings (per fact F with a place, a day and a time range, once the run has passed its window;
``rundb.attendance`` defines each)
  ``facts.F.attended`` (named people at its place during its window), ``facts.F.invited`` and
  ``facts.F.attended_invited`` (people invited to it; of them, who came), ``facts.F.aware_at_start``
  and ``facts.F.attended_aware`` (aware when the window began; of them, who came),
  ``facts.F.planned`` and ``facts.F.planned_share`` (of the people aware when they planned its
  day, those whose plan put it in; the share)
story (the scenario's ``story.beats`` whose deadline the run reached, or that it reached earlier;
``rundb.beats`` defines each)
  ``story.beats`` (beats decided), ``story.beats_reached`` (the share of them reached),
  ``story.B.reached`` (1 or 0) and ``story.B.people`` (a reach beat: its people aware by the
  deadline; a gather beat: the largest gathering inside its window) per beat id B;
  ``story.nudges`` (the director's nudges, ``nudge`` events; 0 without a director)
probes (per fact id F asked about; verdicts in ``provenance.rules``)
  ``probes.F.right_share`` (of aware people's usable answers: every detail asked right and nothing
  else named), ``probes.F.mixed_share`` (a right detail named beside a wrong one),
  ``probes.F.wrong_share`` (only wrong values named for a detail), ``probes.F.hallucination`` (of
  unaware people's usable answers: claims to know or names a detail), ``probes.F.answers``
  (usable answers scored), ``probes.F.failed`` (answers the model failed to give: in no share)
memory
  ``memory.importance_per_agent_hour``  summed importance of the memories the run made that count
  towards reflection (not seeds, reflections or summaries) / people / game hours: the rate that,
  against ``memory.reflection_threshold``, decides how often people reflect
  ``memory.insights``  insights written (``reflection`` memories); ``memory.reflected_share``  the
  named people (not the background crowd) who reflected at least once / named people
moods (in a run with ``cognition.moods``; per happening H, a place event or a prop's change, keyed
by its fact id or ``<place>_<HHMM>``, whose hour after passed in the run; ``rundb.moods`` defines each)
  ``moods.happenings`` (happenings decided), ``moods.H.saw`` (named people who noticed it with a
  mood already), ``moods.H.first_moods`` (who noticed it before they had any mood: left out),
  ``moods.H.saw_shift`` (the mean valence change of the first over the game hour after they
  noticed it), ``moods.H.unseen_shift`` (the same over the hour from its start, of the people
  awake then, with a mood, who never noticed it) and ``moods.H.gap`` (the first minus the
  second: below 0, it made its witnesses feel worse than everyone else)
relationships
  ``relationships.density_start``, ``relationships.density_end`` (``rundb.metrics`` has the formula)

Every "per agent hour" (and per agent day) divides by person-hours: the hours each person was in
the town, from the tick they arrived to the tick they left (``rundb.presence``), so a fork that
adds or removes someone is not charged the hours they were not there. In a run where everyone was
there throughout, that is people x game hours, as it always was.

A metric needs the tables it reads: a run recorded before they existed (an older run.db
layout) has none of that group's metrics, found by looking at its layout, never by catching
errors. Standard library only (see the package's docstring).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from typing import Any

from simulation.provenance.rules import FAILED, HONEST, INVENTED, MISSED, MIXED, PARTIAL, RIGHT, WRONG
from simulation.rundb.attendance import attendance
from simulation.rundb.beats import beats
from simulation.rundb.connect import column_names, table_names
from simulation.rundb.examples import example_utterances
from simulation.rundb.groups import UNGROUPED, group_of
from simulation.rundb.facts import first_aware, probe_verdicts, spread
from simulation.rundb.metrics import density_by_tick
from simulation.rundb.moods import mood_shifts
from simulation.rundb.presence import Stay, headcount, run_ticks, stays
from simulation.rundb.garbled import garbled_lines
from simulation.rundb.names import name_errors

Metrics = dict[str, float | None]

AIMS = ("greet", "share", "invite", "ask", "answer", "reply", "accept", "decline", "end")
"""Every move a line can make (``simulation.core.Aim``'s values; a test keeps the two equal)."""
FAILING = 0.5
"""A purpose whose questions fall back to the safe default this often is failing: the CLI summary,
``agora behaviour`` and every report flag it (``failing_purposes``)."""
ECHO_ERRORS = ("repeats an earlier line", "says nothing")
OFF_AIM_ERRORS = ("does not say what it was to tell", "does not say what the invitation is to", "asks nothing")


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def game_hours(con: Any, run_id: str) -> float:
    row = con.execute("select count(*) from ticks where run_id = ?", [run_id]).fetchone()
    minutes = con.execute("select tick_minutes from runs where run_id = ?", [run_id]).fetchone()
    return (row[0] or 0) * ((minutes[0] if minutes else 10) or 10) / 60.0


def behaviour(con: Any, run_id: str) -> Metrics:
    out: Metrics = {}
    stayed = stays(con, run_id)
    ticks = run_ticks(con, run_id)
    n = headcount(stayed, ticks)  # people-equivalents: n * hours is the run's person-hours
    hours = game_hours(con, run_id)
    out.update(_talk(con, run_id, n, hours))
    out.update(_moves(con, run_id))
    out.update(_seeking(con, run_id))
    out.update(_plans(con, run_id, n, hours))
    out.update(_llm(con, run_id, n, hours, stayed, ticks))
    out.update(_facts(con, run_id))
    out.update(_attendance(con, run_id))
    out.update(_beats(con, run_id))
    out.update(_probes(con, run_id))
    out.update(_memory(con, run_id, hours, stayed, ticks))
    out.update(_moods(con, run_id))
    density = density_by_tick(con, run_id)
    out["relationships.density_start"] = density[0][2] if density else None
    out["relationships.density_end"] = density[-1][2] if density else None
    return out


def _has(con: Any, table: str, *columns: str) -> bool:
    """Whether the run's layout has ``table`` with ``columns`` (older run.db files lack newer ones)."""
    return table in table_names(con) and set(columns) <= column_names(con, table)


def failing_purposes(metrics: Metrics) -> list[tuple[str, float]]:
    """(purpose, fallback share) of every purpose whose questions fell back ``FAILING`` of the time
    or more, worst first: a part of cognition that is not running, whatever the totals say."""
    prefix = "llm.fallback_share."
    found = [(k[len(prefix):], v) for k, v in metrics.items() if k.startswith(prefix) and v is not None
             and v >= FAILING]
    return sorted(found, key=lambda kv: (-kv[1], kv[0]))


# ---------------------------------------------------------------------- talk

def encounters(con: Any, run_id: str) -> int:
    """Pairs of people who came together (awake, not walking, one place) at the end of a tick."""
    together: set[frozenset[str]] = set()
    total = 0
    by_tick: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for tick, agent_id, place, status in con.execute(
            "select tick, agent_id, place, status from agent_states where run_id = ? order by tick, agent_id",
            [run_id]):
        if status not in ("sleeping", "walking"):
            by_tick[int(tick)][place].append(agent_id)
    for tick in sorted(by_tick):
        now = {frozenset((a, b)) for group in by_tick[tick].values() for i, a in enumerate(group) for b in group[i + 1:]}
        total += len(now - together)
        together = now
    return total


def _talk(con: Any, run_id: str, n: float, hours: float) -> Metrics:
    """``n``: the people as ``presence.headcount`` counts them (``n * hours``: person-hours)."""
    met = encounters(con, run_id)
    turns = [int(r[0]) for r in con.execute(
        "select turns from conversations where run_id = ? and ended_tick is not null", [run_id])]
    started = con.execute("select count(*) from conversations where run_id = ?", [run_id]).fetchone()[0]
    attempts = rejected = off_aim = 0
    for error, in con.execute("select parse_error from llm_calls where run_id = ? and purpose = 'utterance'", [run_id]):
        attempts += 1
        rejected += error in ECHO_ERRORS
        off_aim += error in OFF_AIM_ERRORS
    repaired = 0
    for text, completion in con.execute(
            "select u.text, c.completion from utterances u join llm_calls c on c.id = u.llm_call_id "
            "and c.run_id = u.run_id where u.run_id = ? and c.parse_ok = 1 and c.purpose = 'utterance'", [run_id]):
        # read as the client read it when the answer came (simulation.llm.client.parse_answer): a raw
        # newline or tab inside the line is still an answer, and measuring must not fail where answering did not
        answer = json.loads(completion, strict=False)["say"]
        repaired += answer.strip() != (text or "").strip()
    copied, said = example_utterances(con, run_id)
    misnamed, lines = name_errors(con, run_id)
    mangled, _ = garbled_lines(con, run_id)
    return {
        "talk.encounters_per_agent_hour": _ratio(2 * met, n * hours),
        "talk.conversations_per_encounter": _ratio(started, met),
        "talk.conversations": float(started),
        "talk.turns_mean": statistics.fmean(turns) if turns else None,
        "talk.turns_median": float(statistics.median(turns)) if turns else None,
        "talk.two_line_share": _ratio(sum(t <= 2 for t in turns), len(turns)),
        "talk.echo_share": _ratio(rejected + repaired, attempts),
        "talk.off_aim_share": _ratio(off_aim, attempts),
        "talk.example_share": _ratio(len(copied), said),
        "talk.name_errors": _ratio(len(misnamed), lines),
        "talk.garbled_share": _ratio(mangled, lines),
    }


def _moves(con: Any, run_id: str) -> Metrics:
    if not (_has(con, "utterances", "aim") and _has(con, "invitations")):
        return {}  # recorded before moves (run.db schema 6)
    out: Metrics = {}
    aims = Counter(a for a, in con.execute("select aim from utterances where run_id = ? and aim is not null", [run_id]))
    total = sum(aims.values())
    for aim in sorted(set(AIMS) | set(aims)):  # a move never made is 0, not missing
        out[f"talk.aim.{aim}"] = _ratio(aims[aim], total)
    invitations = con.execute(
        "select i.guest_id, i.place, i.starts_at, i.ends_at, i.answer, "
        "i.answer is null and c.id is not null and c.ended_tick is null "
        "from invitations i left join conversations c on c.id = i.conversation_id and c.run_id = i.run_id "
        "where i.run_id = ?", [run_id]).fetchall()
    out["talk.invitations"] = float(len(invitations))
    accepted = [r for r in invitations if r[4] == "accepted"]
    settled = [r for r in invitations if not r[5]]  # not still open when the run ended: no answer yet is no 'no'
    out["talk.invitations_accepted_share"] = _ratio(len(accepted), len(settled))
    last = con.execute("select max(sim_time) from agent_states where run_id = ?", [run_id]).fetchone()[0]
    ended = [r for r in accepted if last is not None and r[3] <= last]
    came = sum(bool(con.execute(
        "select 1 from agent_states where run_id = ? and agent_id = ? and place = ? and sim_time >= ? and sim_time < ? "
        "and status != 'walking' limit 1", [run_id, guest, place, start, end]).fetchone())
        for guest, place, start, end, *_ in ended)
    out["talk.invitation_turnout"] = _ratio(came, len(ended))
    return out


def _seeking(con: Any, run_id: str) -> Metrics:
    """Going to find someone to tell them news (``cognition/seek.py``): how often a person asked
    set out, and how often the two then talked (a conversation between them, whoever opened it,
    started before the hour the seeker set out in was over)."""
    asked = con.execute("select count(*) from llm_calls where run_id = ? and purpose = 'seek'", [run_id]).fetchone()[0]
    trips = [(agent, json.loads(d or "{}").get("other"), _time(at)) for agent, d, at in con.execute(
        "select agent_id, data, sim_time from events where run_id = ? and kind = 'seek'", [run_id])]
    talks = [(frozenset((agent, json.loads(d or "{}").get("with"))), _time(at)) for agent, d, at in con.execute(
        "select agent_id, data, sim_time from events where run_id = ? and kind = 'conversation_start'", [run_id])]
    found = sum(1 for seeker, other, at in trips
                if any(pair == {seeker, other} and at <= when < at.replace(minute=0) + timedelta(hours=1)
                       for pair, when in talks))
    return {
        "talk.seek_asked": float(asked),
        "talk.seek_trips": float(len(trips)),
        "talk.seek_share": _ratio(len(trips), asked),
        "talk.seek_found": _ratio(found, len(trips)),
    }


# ---------------------------------------------------------------------- plans

def _plans(con: Any, run_id: str, n: float, hours: float) -> Metrics:
    """How plans went. Where plan items are and whether they fit their place are not measured: a
    plan is the usual day with choices from a menu of real places, so both held by construction.
    Person-days: ``n * hours / 24`` (``n`` as ``_talk``'s)."""
    ordered = plans = 0
    for completion, in con.execute(
            "select completion from llm_calls where run_id = ? and purpose = 'plan' and parse_ok = 1 "
            "and completion is not null", [run_id]):
        hours_written = [int(i["hour"]) for i in json.loads(completion, strict=False)["plan"]]
        plans += 1
        ordered += all(a < b for a, b in zip(hours_written, hours_written[1:]))
    days: dict[tuple[str, str], set[str]] = defaultdict(set)
    for agent_id, sim_time, text in con.execute(
            "select agent_id, sim_time, text from events where run_id = ? and kind = 'action'", [run_id]):
        days[(agent_id, sim_time[:10])].add(text.split(" is ", 1)[-1].rsplit(" at ", 1)[0].lower())
    agent_days = max(1e-9, n * hours / 24.0)
    distinct = sum(len(v) for v in days.values())
    return {
        "plans.in_order_share": _ratio(ordered, plans),
        "plans.activities_per_agent_day": distinct / agent_days if n and hours else None,
    }


# ---------------------------------------------------------------------- the LLM

def _question(purpose: str) -> str:
    """The purpose a question's fallback is counted under: every probe question under ``probe``."""
    return "probe" if purpose.startswith("probe") else purpose


def _llm(con: Any, run_id: str, n: float, hours: float, stayed: dict[str, Stay], ticks: int) -> Metrics:
    """Cost per person-hour counts the run's ticks (probes excluded: they come after the run);
    failures and fallbacks count every question, probes included. ``n``: as ``_talk``'s; ``stayed``
    and ``ticks`` (``rundb.presence``) give the person-hours of each group and kind of person."""
    calls = tokens = failures = 0
    asked: Counter[str] = Counter()
    fell: Counter[str] = Counter()
    for purpose, attempt, parse_ok, fallback, prompt, completion in con.execute(
            "select purpose, attempt, parse_ok, fallback, prompt_tokens, completion_tokens from llm_calls "
            "where run_id = ?", [run_id]):
        question = _question(purpose)
        if question != "probe":
            calls += 1
            tokens += (prompt or 0) + (completion or 0)
            failures += not parse_ok
        if not attempt:  # the first attempt at a question (None in runs that did not record it)
            asked[question] += 1
        fell[question] += bool(fallback)
    out: Metrics = {
        "llm.calls_per_agent_hour": _ratio(calls, n * hours),
        "llm.tokens_per_agent_hour": _ratio(tokens, n * hours),
        "llm.parse_failure_share": _ratio(failures, calls),
        "llm.fallback_share": _ratio(sum(fell.values()), sum(asked.values())),
    }
    for purpose in sorted(asked):
        out[f"llm.fallback_share.{purpose}"] = _ratio(fell[purpose], asked[purpose])
    if _has(con, "llm_calls", "options"):  # ratings by probability (run.db schema 5)
        rated, unscored = con.execute(
            "select count(*), sum(parse_ok = 0) from llm_calls where run_id = ? and options is not null "
            "and purpose not like 'probe%'", [run_id]).fetchone()
        if rated:
            out["llm.sampled_rating_share"] = _ratio(unscored or 0, rated)
    out.update(_calls_by_kind(con, run_id, hours, stayed, ticks))
    out.update(_by_group(con, run_id, hours, stayed, ticks))
    return out


def _by_group(con: Any, run_id: str, hours: float, stayed: dict[str, Stay], ticks: int) -> Metrics:
    """The LLM's cost and failures, and how much each group's people said and how much of it was the
    prompt's example, per model group, in runs whose people name model groups (``agents.llm_group``,
    run.db schema 12); probes out of the cost, in the failures, as in ``_llm``. Per person-hour of
    the group's people (``presence.headcount``)."""
    groups = group_of(con, run_id)
    if not groups or not hours:
        return {}
    ids: dict[str, list[str]] = defaultdict(list)
    for a in stayed:
        ids[groups.get(a, UNGROUPED)].append(a)
    members = {group: headcount(stayed, ticks, who) for group, who in ids.items()}
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    asked: Counter[str] = Counter()
    fell: Counter[str] = Counter()
    for agent_id, purpose, attempt, parse_ok, fallback in con.execute(
            "select agent_id, purpose, attempt, parse_ok, fallback from llm_calls where run_id = ? "
            "and agent_id is not null", [run_id]):
        group = groups.get(agent_id, UNGROUPED)
        if _question(purpose) != "probe":
            calls[group] += 1
            failures[group] += not parse_ok
        asked[group] += not attempt
        fell[group] += bool(fallback)
    lines: Counter[str] = Counter()
    for speaker, count in con.execute("select speaker_id, count(*) from utterances where run_id = ? "
                                      "group by speaker_id", [run_id]):
        lines[groups.get(speaker, UNGROUPED)] += count
    copied, _ = example_utterances(con, run_id)
    written: Counter[str] = Counter()
    examples: Counter[str] = Counter()
    for utterance_id, speaker in con.execute(
            "select u.id, u.speaker_id from utterances u join llm_calls c on c.id = u.llm_call_id "
            "and c.run_id = u.run_id where u.run_id = ? and c.parse_ok = 1", [run_id]):
        written[groups.get(speaker, UNGROUPED)] += 1
        examples[groups.get(speaker, UNGROUPED)] += int(utterance_id) in copied
    out: Metrics = {}
    for group in sorted(members):
        out[f"llm.group.{group}.calls_per_agent_hour"] = _ratio(calls[group], members[group] * hours)
        out[f"llm.group.{group}.parse_failure_share"] = _ratio(failures[group], calls[group])
        out[f"llm.group.{group}.fallback_share"] = _ratio(fell[group], asked[group])
        out[f"talk.group.{group}.lines_per_agent_hour"] = _ratio(lines[group], members[group] * hours)
        out[f"talk.group.{group}.example_share"] = _ratio(examples[group], written[group])
    return out


def _calls_by_kind(con: Any, run_id: str, hours: float, stayed: dict[str, Stay], ticks: int) -> Metrics:
    """Calls per person per game hour for the background crowd and the named people apart, in runs
    that have a crowd (``agents.crowd``, run.db schema 7); probes excluded as above. Per
    person-hour of each kind (``presence.headcount``)."""
    if not _has(con, "agents", "crowd"):
        return {}
    kinds = dict(con.execute("select agent_id, crowd from agents where run_id = ?", [run_id]).fetchall())
    crowd = {a for a, c in kinds.items() if c}
    if not crowd or not hours:
        return {}
    calls: Counter[bool] = Counter()
    for agent_id, count in con.execute("select agent_id, count(*) from llm_calls where run_id = ? "
                                       "and purpose not like 'probe%' group by agent_id", [run_id]):
        calls[agent_id in crowd] += count
    named = [a for a in kinds if a not in crowd]
    return {"llm.calls_per_agent_hour.crowd": _ratio(calls[True], headcount(stayed, ticks, sorted(crowd)) * hours),
            "llm.calls_per_agent_hour.named": _ratio(calls[False], headcount(stayed, ticks, named) * hours)
            if named else None}


# ---------------------------------------------------------------------- memory and reflection

COUNTED_OUT = ("seed", "reflection", "summary")
"""Memory kinds whose importance does not count towards reflection in the run (seeds come before it;
``memory.stream.NOT_COUNTED`` holds the other two)."""


def _memory(con: Any, run_id: str, hours: float, stayed: dict[str, Stay], ticks: int) -> Metrics:
    """How fast importance accrues and whether people reflected, for the named people (the background
    crowd does not reflect): a reflection that never fires is a part of cognition that is not running,
    whatever the fallback shares say. Importance per person-hour of the named people
    (``presence.headcount``); the reflected share of the named people ever in the town."""
    crowd = " and not crowd" if _has(con, "agents", "crowd") else ""
    named = f"agent_id in (select agent_id from agents where run_id = ?{crowd})"
    named_ids = [a for a, in con.execute(f"select agent_id from agents where run_id = ?{crowd}", [run_id])]
    people_named = len(named_ids)
    gained, = con.execute(
        f"select coalesce(sum(importance), 0) from memories where run_id = ? and {named} and importance is not null "
        f"and kind not in ({', '.join('?' for _ in COUNTED_OUT)})", [run_id, run_id, *COUNTED_OUT]).fetchone()
    insights, reflected = con.execute(
        f"select count(*), count(distinct agent_id) from memories where run_id = ? and {named} and kind = 'reflection'",
        [run_id, run_id]).fetchone()
    return {"memory.importance_per_agent_hour": _ratio(gained, headcount(stayed, ticks, named_ids) * hours),
            "memory.insights": float(insights) if people_named else None,
            "memory.reflected_share": _ratio(reflected, people_named)}


# ---------------------------------------------------------------------- facts and probes

def _facts(con: Any, run_id: str) -> Metrics:
    out: Metrics = {}
    start = con.execute("select start_time from runs where run_id = ?", [run_id]).fetchone()
    learned = first_aware(con, run_id)
    copied = example_utterances(con, run_id)[0]
    for fact_id, s in spread(con, run_id).items():
        told = [i for i in learned.get(fact_id, []) if i.parent is not None]
        by_example = sum(i.utterance_id in copied for i in told)
        first = None
        if told and start and start[0]:
            first = (_time(told[0].sim_time) - _time(start[0])).total_seconds() / 3600
        out.update({
            f"facts.{fact_id}.told": float(s.told), f"facts.{fact_id}.told_own_words": float(s.told - by_example),
            f"facts.{fact_id}.told_example": float(by_example), f"facts.{fact_id}.from_unaware": float(s.from_unaware),
            f"facts.{fact_id}.aware": float(s.aware), f"facts.{fact_id}.aware_share": s.aware_share,
            f"facts.{fact_id}.cascade_depth": float(s.depth), f"facts.{fact_id}.distortion": s.distortion,
            f"facts.{fact_id}.retention": s.retention, f"facts.{fact_id}.invented": float(s.invented),
            f"facts.{fact_id}.first_told_hour": first,
        })
    return out


def _attendance(con: Any, run_id: str) -> Metrics:
    out: Metrics = {}
    for fid, a in attendance(con, run_id).items():
        out[f"facts.{fid}.attended"] = float(len(a.attended))
        out[f"facts.{fid}.invited"] = float(len(a.invited))
        out[f"facts.{fid}.attended_invited"] = float(len(a.invited_came))
        out[f"facts.{fid}.aware_at_start"] = float(len(a.aware))
        out[f"facts.{fid}.attended_aware"] = float(len(a.aware_came))
        out[f"facts.{fid}.planned"] = float(len(a.planned))
        out[f"facts.{fid}.planned_share"] = _ratio(len(a.planned), len(a.planners))
    return out


def _beats(con: Any, run_id: str) -> Metrics:
    found = beats(con, run_id)
    if not found:
        return {}
    out: Metrics = {"story.nudges": float(con.execute(
        "select count(*) from events where run_id = ? and kind = 'nudge'", [run_id]).fetchone()[0])}
    decided = [b for b in found if b.reached is not None]
    if not decided:
        return out
    out.update({"story.beats": float(len(decided)),
                "story.beats_reached": sum(bool(b.reached) for b in decided) / len(decided)})
    for b in decided:
        out[f"story.{b.id}.reached"] = float(bool(b.reached))
        out[f"story.{b.id}.people"] = float(len(b.who))
    return out


def _moods(con: Any, run_id: str) -> Metrics:
    shifts = mood_shifts(con, run_id)
    if not shifts:
        return {}
    out: Metrics = {"moods.happenings": float(len(shifts))}
    for m in shifts:
        out.update({f"moods.{m.key}.saw": float(len(m.saw)), f"moods.{m.key}.first_moods": float(m.first_moods),
                    f"moods.{m.key}.saw_shift": m.saw_shift,
                    f"moods.{m.key}.unseen_shift": m.unseen_shift, f"moods.{m.key}.gap": m.gap})
    return out


def _time(text: str) -> datetime:
    return datetime.strptime(text[:16], "%Y-%m-%d %H:%M")


def _probes(con: Any, run_id: str) -> Metrics:
    """Shares of the usable answers: an answer the model failed to give is counted (``failed``),
    never scored as honest or missed."""
    out: Metrics = {}
    for fact_id, counts in probe_verdicts(con, run_id).items():
        aware = counts[RIGHT] + counts[PARTIAL] + counts[MIXED] + counts[WRONG] + counts[MISSED]
        unaware = counts[HONEST] + counts[INVENTED]
        out.update({
            f"probes.{fact_id}.answers": float(aware + unaware),
            f"probes.{fact_id}.failed": float(counts[FAILED]),
            f"probes.{fact_id}.right_share": _ratio(counts[RIGHT], aware),
            f"probes.{fact_id}.mixed_share": _ratio(counts[MIXED], aware),
            f"probes.{fact_id}.wrong_share": _ratio(counts[WRONG], aware),
            f"probes.{fact_id}.hallucination": _ratio(counts[INVENTED], unaware),
        })
    return out


def stored(con: Any, run_id: str) -> Metrics:
    """The behaviour table's rows for the run ({} when it has none)."""
    if "behaviour" not in table_names(con):
        return {}
    return {r[0]: r[1] for r in con.execute("select metric, value from behaviour where run_id = ? order by metric",
                                            [run_id])}
