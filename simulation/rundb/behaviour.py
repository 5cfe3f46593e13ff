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
  ``talk.example_share``  lines that are, word for word, the example line their prompt showed
  ``talk.aim.A``  the share of lines made with move A (greet, share, invite, ask, answer, ...)
  ``talk.invitations``  invitations made; ``talk.invitations_accepted_share`` of them accepted;
  ``talk.invitation_turnout``  of accepted invitations whose happening ended within the run, the
  share whose guest was at its place while it went on
plans
  ``plans.valid_place_share``  plan items at a place of the town
  ``plans.fitting_share``  items whose activity fits the place: sleeping at home, working at the
  workplace (items that are neither count as fitting)
  ``plans.in_order_share``  plans whose hours the model wrote in increasing order
  ``plans.activities_per_agent_day``  distinct actions started, per person per game day
llm
  ``llm.calls_per_agent_hour`` (and ``.crowd`` / ``.named`` in a town with a background crowd),
  ``llm.tokens_per_agent_hour``, ``llm.parse_failure_share`` (of calls),
  ``llm.fallback_share`` (of questions: answers replaced by the safe default) and
  ``llm.fallback_share.<purpose>``, ``llm.sampled_rating_share`` (ratings the backend could not
  score from its probabilities, so one option was sampled)
facts (per fact id F)
  ``facts.F.aware_share``, ``facts.F.told``, ``facts.F.cascade_depth``, ``facts.F.distortion``,
  ``facts.F.retention``, ``facts.F.invented``, ``facts.F.first_told_hour`` (game hours from the start
  to the first telling)
probes (per fact id F asked about)
  ``probes.F.right_share`` (of aware people's answers: every detail asked right),
  ``probes.F.wrong_share`` (aware: a detail changed), ``probes.F.hallucination`` (of unaware people's
  answers: claims to know or names a detail), ``probes.F.answers``
relationships
  ``relationships.density_start``, ``relationships.density_end`` (``rundb.metrics`` has the formula)

Standard library only (see the package's docstring).
"""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
from collections import Counter, defaultdict
from datetime import datetime
from collections.abc import Callable
from typing import Any

from simulation.provenance.rules import HONEST, INVENTED, MISSED, PARTIAL, RIGHT, WRONG
from simulation.rundb.connect import table_names
from simulation.rundb.facts import first_aware, probe_verdicts, spread
from simulation.rundb.metrics import density_by_tick, people

Metrics = dict[str, float | None]

SLEEP_WORDS = ("sleep", "bed", "nap", "asleep")
WORK_WORDS = ("work", "shift", "open", "serve", "serving", "teach", "lecture", "class", "office", "shop", "counter",
              "customers", "prescription", "bar", "stock")
ECHO_ERRORS = ("repeats an earlier line", "says nothing")
OFF_AIM_ERRORS = ("does not say what it was to tell", "does not say what the invitation is to", "asks nothing")
_EXAMPLE = re.compile(r"^Example: (\{.*\})\s*$", re.MULTILINE)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def game_hours(con: Any, run_id: str) -> float:
    row = con.execute("select count(*) from ticks where run_id = ?", [run_id]).fetchone()
    minutes = con.execute("select tick_minutes from runs where run_id = ?", [run_id]).fetchone()
    return (row[0] or 0) * ((minutes[0] if minutes else 10) or 10) / 60.0


def behaviour(con: Any, run_id: str) -> Metrics:
    out: Metrics = {}
    n = len(people(con, run_id))
    hours = game_hours(con, run_id)
    for group in (_talk, _moves, _plans, _llm):
        out.update(_tolerant(group, con, run_id, n, hours))
    out.update(_tolerant(lambda c, r, *_: _facts(c, r), con, run_id))
    out.update(_tolerant(lambda c, r, *_: _probes(c, r), con, run_id))
    density = density_by_tick(con, run_id)
    out["relationships.density_start"] = density[0][2] if density else None
    out["relationships.density_end"] = density[-1][2] if density else None
    return out


def _tolerant(group: Callable[..., Metrics], con: Any, run_id: str, *args: Any) -> Metrics:
    """A group's metrics; none of them for a run recorded before a table or column it reads existed."""
    try:
        return group(con, run_id, *args)
    except sqlite3.OperationalError:
        return {}


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


def _talk(con: Any, run_id: str, n: int, hours: float) -> Metrics:
    met = encounters(con, run_id)
    turns = [int(r[0]) for r in con.execute(
        "select turns from conversations where run_id = ? and ended_tick is not null", [run_id])]
    started = con.execute("select count(*) from conversations where run_id = ?", [run_id]).fetchone()[0]
    attempts = rejected = off_aim = 0
    for error, in con.execute("select parse_error from llm_calls where run_id = ? and purpose = 'utterance'", [run_id]):
        attempts += 1
        rejected += error in ECHO_ERRORS
        off_aim += error in OFF_AIM_ERRORS
    repaired = copied = said = 0
    for text, completion, messages in con.execute(
            "select u.text, c.completion, c.messages from utterances u join llm_calls c on c.id = u.llm_call_id "
            "and c.run_id = u.run_id where u.run_id = ? and c.parse_ok = 1 and c.purpose = 'utterance'", [run_id]):
        said += 1
        try:
            answer = json.loads(completion).get("say")
        except (TypeError, ValueError, AttributeError):
            continue
        repaired += isinstance(answer, str) and answer.strip() != (text or "").strip()
        copied += _example(messages) == _norm(text or "")
    return {
        "talk.encounters_per_agent_hour": _ratio(2 * met, n * hours),
        "talk.conversations_per_encounter": _ratio(started, met),
        "talk.conversations": float(started),
        "talk.turns_mean": statistics.fmean(turns) if turns else None,
        "talk.turns_median": float(statistics.median(turns)) if turns else None,
        "talk.two_line_share": _ratio(sum(t <= 2 for t in turns), len(turns)),
        "talk.echo_share": _ratio(rejected + repaired, attempts),
        "talk.off_aim_share": _ratio(off_aim, attempts),
        "talk.example_share": _ratio(copied, said),
    }


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def _example(messages: str | None) -> str | None:
    """The example line an utterance prompt showed, normalised (None without one)."""
    try:
        prompt = json.loads(messages or "[]")[-1]["content"]
        found = _EXAMPLE.search(prompt)
        return _norm(json.loads(found.group(1))["say"]) if found else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _moves(con: Any, run_id: str, *_: Any) -> Metrics:
    out: Metrics = {}
    aims = Counter(a for a, in con.execute("select aim from utterances where run_id = ? and aim is not null", [run_id]))
    total = sum(aims.values())
    for aim, n in sorted(aims.items()):
        out[f"talk.aim.{aim}"] = n / total
    invitations = con.execute("select guest_id, place, starts_at, ends_at, answer from invitations where run_id = ?",
                              [run_id]).fetchall()
    out["talk.invitations"] = float(len(invitations))
    accepted = [r for r in invitations if r[4] == "accepted"]
    out["talk.invitations_accepted_share"] = _ratio(len(accepted), len(invitations))
    last = con.execute("select max(sim_time) from agent_states where run_id = ?", [run_id]).fetchone()[0]
    ended = [r for r in accepted if last is not None and r[3] <= last]
    came = sum(bool(con.execute(
        "select 1 from agent_states where run_id = ? and agent_id = ? and place = ? and sim_time >= ? and sim_time < ? "
        "and status != 'walking' limit 1", [run_id, guest, place, start, end]).fetchone())
        for guest, place, start, end, _ in ended)
    out["talk.invitation_turnout"] = _ratio(came, len(ended))
    return out


# ---------------------------------------------------------------------- plans

def _homes_and_workplaces(con: Any, run_id: str) -> tuple[dict[str, str], dict[str, str | None]]:
    homes = {r[0]: r[1] for r in con.execute("select agent_id, home from agents where run_id = ?", [run_id])}
    work: dict[str, str | None] = {}
    try:
        row = con.execute("select scenario from resume_state where run_id = ?", [run_id]).fetchone()
        for person in (json.loads(row[0]).get("people") or []) if row else []:
            work[person["persona"]["id"]] = person.get("workplace")
    except Exception:  # an older or unreadable resume state: no workplaces known
        pass
    return homes, work


def _has(words: tuple[str, ...], text: str) -> bool:
    low = text.lower()
    return any(w in low for w in words)


def _plans(con: Any, run_id: str, n: int, hours: float) -> Metrics:
    places = {r[0] for r in con.execute("select place_id from places where run_id = ?", [run_id])}
    homes, work = _homes_and_workplaces(con, run_id)
    items = valid = fitting = 0
    for agent_id, text in con.execute("select agent_id, items from plans where run_id = ?", [run_id]):
        for item in json.loads(text or "[]"):
            items += 1
            place, activity = item.get("place"), str(item.get("activity", ""))
            valid += place in places
            if _has(SLEEP_WORDS, activity):
                fitting += place == homes.get(agent_id)
            elif _has(WORK_WORDS, activity) and work.get(agent_id):
                fitting += place == work.get(agent_id)
            else:
                fitting += place in places
    ordered = plans = 0
    for completion, in con.execute(
            "select completion from llm_calls where run_id = ? and purpose = 'plan' and parse_ok = 1", [run_id]):
        try:
            hours_written = [int(i["hour"]) for i in json.loads(completion)["plan"]]
        except (TypeError, ValueError, KeyError):
            continue
        plans += 1
        ordered += all(a < b for a, b in zip(hours_written, hours_written[1:]))
    days: dict[tuple[str, str], set[str]] = defaultdict(set)
    for agent_id, sim_time, text in con.execute(
            "select agent_id, sim_time, text from events where run_id = ? and kind = 'action'", [run_id]):
        days[(agent_id, sim_time[:10])].add(text.split(" is ", 1)[-1].rsplit(" at ", 1)[0].lower())
    agent_days = max(1e-9, n * hours / 24.0)
    distinct = sum(len(v) for v in days.values())
    return {
        "plans.valid_place_share": _ratio(valid, items),
        "plans.fitting_share": _ratio(fitting, items),
        "plans.in_order_share": _ratio(ordered, plans),
        "plans.activities_per_agent_day": distinct / agent_days if n and hours else None,
    }


# ---------------------------------------------------------------------- the LLM

def _llm(con: Any, run_id: str, n: int, hours: float) -> Metrics:
    calls = tokens = failures = 0
    asked: Counter[str] = Counter()
    fell: Counter[str] = Counter()
    for purpose, attempt, parse_ok, fallback, prompt, completion in con.execute(
            "select purpose, attempt, parse_ok, fallback, prompt_tokens, completion_tokens from llm_calls "
            "where run_id = ? and purpose not like 'probe%'", [run_id]):
        calls += 1
        tokens += (prompt or 0) + (completion or 0)
        failures += not parse_ok
        if not attempt:  # the first attempt at a question (None in runs that did not record it)
            asked[purpose] += 1
        fell[purpose] += bool(fallback)
    out: Metrics = {
        "llm.calls_per_agent_hour": _ratio(calls, n * hours),
        "llm.tokens_per_agent_hour": _ratio(tokens, n * hours),
        "llm.parse_failure_share": _ratio(failures, calls),
        "llm.fallback_share": _ratio(sum(fell.values()), sum(asked.values())),
    }
    for purpose in sorted(asked):
        out[f"llm.fallback_share.{purpose}"] = _ratio(fell[purpose], asked[purpose])
    try:  # runs before ratings by probability have no options column
        rated, unscored = con.execute(
            "select count(*), sum(parse_ok = 0) from llm_calls where run_id = ? and options is not null "
            "and purpose not like 'probe%'", [run_id]).fetchone()
    except Exception:
        rated = unscored = 0
    if rated:
        out["llm.sampled_rating_share"] = _ratio(unscored or 0, rated)
    out.update(_calls_by_kind(con, run_id, hours))
    return out


def _calls_by_kind(con: Any, run_id: str, hours: float) -> Metrics:
    """Calls per person per game hour for the background crowd and the named people apart, in runs
    that have a crowd (``agents.crowd``, run.db schema 7); probes excluded as above."""
    try:
        kinds = dict(con.execute("select agent_id, crowd from agents where run_id = ?", [run_id]).fetchall())
    except Exception:  # before schema 7
        return {}
    crowd = {a for a, c in kinds.items() if c}
    if not crowd or not hours:
        return {}
    calls: Counter[bool] = Counter()
    for agent_id, count in con.execute("select agent_id, count(*) from llm_calls where run_id = ? "
                                       "and purpose not like 'probe%' group by agent_id", [run_id]):
        calls[agent_id in crowd] += count
    named = len(kinds) - len(crowd)
    return {"llm.calls_per_agent_hour.crowd": _ratio(calls[True], len(crowd) * hours),
            "llm.calls_per_agent_hour.named": _ratio(calls[False], named * hours) if named else None}


# ---------------------------------------------------------------------- facts and probes

def _facts(con: Any, run_id: str) -> Metrics:
    out: Metrics = {}
    start = con.execute("select start_time from runs where run_id = ?", [run_id]).fetchone()
    learned = first_aware(con, run_id)
    for fact_id, s in spread(con, run_id).items():
        told = [i for i in learned.get(fact_id, []) if i.parent is not None]
        first = None
        if told and start and start[0]:
            first = (_time(told[0].sim_time) - _time(start[0])).total_seconds() / 3600
        out.update({
            f"facts.{fact_id}.aware_share": s.aware_share, f"facts.{fact_id}.told": float(s.told),
            f"facts.{fact_id}.cascade_depth": float(s.depth), f"facts.{fact_id}.distortion": s.distortion,
            f"facts.{fact_id}.retention": s.retention, f"facts.{fact_id}.invented": float(s.invented),
            f"facts.{fact_id}.first_told_hour": first,
        })
    return out


def _time(text: str) -> datetime:
    return datetime.strptime(text[:16], "%Y-%m-%d %H:%M")


def _probes(con: Any, run_id: str) -> Metrics:
    out: Metrics = {}
    for fact_id, counts in probe_verdicts(con, run_id).items():
        aware = counts[RIGHT] + counts[PARTIAL] + counts[WRONG] + counts[MISSED]
        unaware = counts[HONEST] + counts[INVENTED]
        out.update({
            f"probes.{fact_id}.answers": float(aware + unaware),
            f"probes.{fact_id}.right_share": _ratio(counts[RIGHT], aware),
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
