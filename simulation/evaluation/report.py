"""Writing an evaluation down: eval.db, results.json/.csv, report.md, plots, and run.db rows.

``evaluations`` has the same columns wherever it is written (a run's run.db for run agents,
so the viewer shows them next to the run; eval.db in the output folder for every agent):
id, run_id, agent_id, suite, metric, value, details (JSON), created_at. Aggregates over
agents have agent_id NULL. eval.db also holds every LLM call the evaluation made.
"""

from __future__ import annotations

import csv
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import sqlite_utils

from simulation.errors import InputError, Problem, RunError
from simulation.evaluation import plots
from simulation.evaluation.engine import EvalResult
from simulation.evaluation.ipip import FACTORS
from simulation.evaluation.personagym import TASKS
from simulation.evaluation.session import Metric

EVALUATION_COLUMNS: dict[str, type] = {
    "id": int, "run_id": str, "agent_id": str, "suite": str, "metric": str, "value": float, "details": str,
    "created_at": str,
}
CALL_COLUMNS: dict[str, type] = {
    "id": int, "eval_id": str, "role": str, "target": str, "purpose": str, "backend": str, "model": str,
    "attempt": int, "seed": int, "temperature": float, "max_tokens": int, "messages": str, "json_schema": str,
    "options": str, "completion": str, "finish_reason": str, "parse_ok": int, "parse_error": str, "fallback": int, "cache_hit": int,
    "prompt_tokens": int, "completion_tokens": int, "latency_s": float,
}


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become null (JSON has no NaN), tuples become lists."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def ensure_evaluations_table(db: sqlite_utils.Database) -> None:
    """Create ``evaluations`` if missing (readers may open the file while a run writes it: WAL)."""
    if "evaluations" not in db.table_names():
        db["evaluations"].create(EVALUATION_COLUMNS, pk="id")
        db["evaluations"].create_index(["run_id", "agent_id", "suite"])


def evaluation_rows(result: EvalResult, metrics: list[Metric], eval_dir: Path) -> list[dict[str, Any]]:
    return [{
        "run_id": m.run_id, "agent_id": m.agent_id, "suite": m.suite, "metric": m.metric,
        "value": _clean(m.value),
        "details": json.dumps(_clean({"eval_id": result.eval_id, "eval_dir": str(eval_dir), "target": m.target,
                                      "agent_model": result.agent["model"], "judge_model": result.judge["model"],
                                      **m.details}), ensure_ascii=False),
        "created_at": result.created_at,
    } for m in metrics]


def _write_eval_db(path: Path, result: EvalResult, out: Path) -> None:
    db = sqlite_utils.Database(path)
    try:
        with db.conn:
            db["evals"].insert({
                "eval_id": result.eval_id, "created_at": result.created_at, "wall_s": result.wall_s,
                "agent_backend": result.agent["backend"], "agent_model": result.agent["model"],
                "judge_backend": result.judge["backend"], "judge_model": result.judge["model"],
                "agent_model_why": result.model_notes.get("agent"), "judge_model_why": result.model_notes.get("judge"),
                "options": json.dumps(_clean(vars(result.options))),
                "targets": json.dumps([{"key": t.key, "source": t.source, "run_id": t.run_id} for t in result.targets]),
            }, pk="eval_id")
            ensure_evaluations_table(db)
            db["evaluations"].insert_all(evaluation_rows(result, result.metrics, out))
            if "llm_calls" not in db.table_names():
                db["llm_calls"].create(CALL_COLUMNS, pk="id")
            db["llm_calls"].insert_all(({"eval_id": result.eval_id, **c} for c in result.calls), alter=True)
    finally:
        db.close()


def write_run_evaluations(result: EvalResult, out: Path) -> dict[str, int]:
    """Each run agent's rows (and its run's aggregates) into that run's run.db; rows written per run.db."""
    by_db: dict[Path, list[Metric]] = {}
    for t in result.targets:
        if t.run_db is not None:
            by_db.setdefault(t.run_db, [])
    written = {}
    for db_path, rows in by_db.items():
        run_ids = {t.run_id for t in result.targets if t.run_db == db_path}
        rows.extend(m for m in result.metrics if m.run_id in run_ids)
        db = None
        try:
            db = sqlite_utils.Database(db_path)
            with db.conn:
                ensure_evaluations_table(db)
                db["evaluations"].insert_all(evaluation_rows(result, rows, out))
        except (sqlite3.Error, OSError) as exc:  # cannot open, read-only file, locked, disk full
            raise RunError(f"cannot write evaluations into {db_path}: {exc} "
                           f"(the report in {out} is complete)") from None
        finally:
            if db is not None:
                db.close()
        written[str(db_path)] = len(rows)
    return written


def _fmt(v: Any, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _ci(m: Metric | None, digits: int = 2) -> str:
    if m is None or m.value is None:
        return "–"
    lo, hi = m.details.get("ci_low"), m.details.get("ci_high")
    return f"{m.value:.{digits}f}" + (f" [{lo:.{digits}f}, {hi:.{digits}f}]" if lo is not None else "")


class Lookup:
    """Metrics by (suite, metric, target); aggregates are target None, scope 'all'."""

    def __init__(self, metrics: list[Metric]):
        self._by = {}
        for m in metrics:
            if m.target is None and m.details.get("scope") != "all":
                continue
            self._by[(m.suite, m.metric, m.target)] = m

    def get(self, suite: str, metric: str, target: str | None = None) -> Metric | None:
        return self._by.get((suite, metric, target))

    def value(self, suite: str, metric: str, target: str | None = None) -> float | None:
        m = self.get(suite, metric, target)
        return None if m is None else m.value


def kappa_cell(m: Metric | None) -> str:
    """Kappa with its interval, or "–" and why it was left out."""
    if m is not None and m.value is None and m.details.get("note"):
        return f"– ({m.details['note'].removeprefix('kappa undefined: ')})"
    return _ci(m)


def agreement_text(look: Lookup, suite: str) -> str:
    """"agreement X [CI] (constant guess Y; kappa Z [CI])", and what it shows when it is not above its baseline."""
    agree, base = look.get(suite, "agreement"), look.get(suite, "agreement_baseline")
    text = (f"agreement {_ci(agree)} (constant guess {_fmt(base.value if base else None)}; "
            f"kappa {kappa_cell(look.get(suite, 'kappa'))})")
    if agree is not None and agree.value is not None and base is not None and base.value is not None \
            and agree.value <= base.value:
        text += ": not above the constant guess, so it shows nothing"
    return text


def markdown(result: EvalResult, images: dict[str, str]) -> str:
    look = Lookup(result.metrics)
    names = {t.key: t.persona.name for t in result.targets}
    o = result.options
    lines = [f"# Evaluation {result.eval_id}", "",
             f"- agents: {len(result.targets)} ({', '.join(names[t.key] for t in result.targets)})",
             f"- agent model: {result.agent['backend']} / {result.agent['model']} (temperature {o.temperature}): "
             f"{result.model_notes.get('agent', 'not recorded')}",
             f"- judge model: {result.judge['backend']} / {result.judge['model']} (temperature {o.judge_temperature}): "
             f"{result.model_notes.get('judge', 'not recorded')}",
             f"- suites: {', '.join(result.suites)}; seed {o.seed}; bootstrap {o.bootstrap} resamples, 95% intervals",
             f"- wall time {result.wall_s:.0f} s, {len(result.calls)} LLM calls", ""]
    for suite, why in result.skipped.items():
        lines += [f"- **{suite}** skipped: {why}", ""]
    cost = result.cost()
    if cost:
        lines += ["| suite | agents | calls per agent | LLM seconds per agent | tokens |", "|---|---|---|---|---|"]
        for suite, c in cost.items():
            lines.append(f"| {suite} | {c.get('agents', 0):.0f} | {c['calls_per_agent']:.1f} | "
                         f"{c['llm_s_per_agent']:.1f} | {c['prompt_tokens'] + c['completion_tokens']:.0f} |")
        lines.append("")
    for suite in ("bigfive", "forcedchoice", "interview"):
        if suite not in result.suites:
            continue
        title = {"bigfive": "Big Five (IPIP-50 self-report)", "forcedchoice": "Big Five (IPIP-50 statements as "
                 "forced choices)", "interview": "Big Five (InCharacter-style interview)"}[suite]
        lines += [f"## {title}", "", "Measured / target, 0-1. Agreement: the share of factors on the same side "
                  "of 0.5 as the target; constant guess: the agreement of guessing, on each factor, the side most "
                  "of these agents' targets are on, for everybody alike; kappa: Cohen's kappa of target side and "
                  "measured side (left out, –, where either is all on one side). An agreement not above its "
                  "constant guess shows nothing.", "",
                  "| agent | " + " | ".join(f[:1].upper() for f in FACTORS) + " | MAE | agreement | constant guess |",
                  "|---" * (len(FACTORS) + 4) + "|"]
        for key in result.suites[suite]:
            cells = []
            for f in FACTORS:
                m = look.get(suite, f, key)
                cells.append(f"{_fmt(m.value if m else None)} / {_fmt(m.details.get('target') if m else None)}")
            lines.append(f"| {names[key]} | " + " | ".join(cells) + f" | {_fmt(look.value(suite, 'mae', key))} | "
                         f"{_fmt(look.value(suite, 'agreement', key))} | "
                         f"{_fmt(look.value(suite, 'agreement_baseline', key))} |")
        raw = suite in ("bigfive", "forcedchoice") and look.get(suite, "uncalibrated_mae") is not None
        if suite == "forcedchoice":
            lines += ["", "Each question sets a statement that raises the factor against one that lowers it; the "
                      "score is the mean probability of choosing the raising one, both orders averaged. "
                      + ("Calibrated: each order's probabilities divided by the same question's with the persona "
                         "blanked (N/A); the uncalibrated columns score the same answers raw." if raw else
                         "Uncalibrated.")]
        if suite == "bigfive":
            lines += ["", "Calibrated: each item's probabilities over 1-5 divided by those of the same item asked "
                      "with the persona blanked (N/A), so what is scored is how far the persona moves the answer; "
                      "the uncalibrated columns score the same answers raw." if raw else
                      "Uncalibrated: each item's expected value over the model's probabilities of 1-5."]
        lines += ["", f"Across agents: MAE {_ci(look.get(suite, 'mae'))}; high/low {agreement_text(look, suite)}."
                  + (f" Uncalibrated: MAE {_ci(look.get(suite, 'uncalibrated_mae'))}, agreement "
                     f"{_ci(look.get(suite, 'uncalibrated_agreement'))}." if raw else ""), "",
                  "| factor | agreement | constant guess | kappa | correlation (target, measured) "
                  "| effect size (d, high vs low) | MAE |" + (" r uncalibrated | d uncalibrated |" if raw else ""),
                  "|---|---|---|---|---|---|---|" + ("---|---|" if raw else "")]
        for f in FACTORS:
            lines.append(f"| {f} | {_ci(look.get(suite, f'agreement_{f}'))} | "
                         f"{_fmt(look.value(suite, f'agreement_baseline_{f}'))} | "
                         f"{kappa_cell(look.get(suite, f'kappa_{f}'))} | "
                         f"{_ci(look.get(suite, f'correlation_{f}'))} | {_ci(look.get(suite, f'effect_{f}'))} | "
                         f"{_ci(look.get(suite, f'mae_{f}'))} |"
                         + (f" {_ci(look.get(suite, f'uncalibrated_correlation_{f}'))} | "
                            f"{_ci(look.get(suite, f'uncalibrated_effect_{f}'))} |" if raw else ""))
        lines += ["", images.get(suite, ""), ""]
    if "personagym" in result.suites:
        lines += ["## PersonaGym", "", "Task means on 1-5; PersonaScore = mean of the task means.", "",
                  "| agent | " + " | ".join(t.replace("_", " ") for t in TASKS) + " | PersonaScore | dropped |",
                  "|---" * (len(TASKS) + 3) + "|"]
        for key in result.suites["personagym"]:
            tasks = " | ".join(_fmt(look.value("personagym", f"task_{t}", key)) for t in TASKS)
            lines.append(f"| {names[key]} | {tasks}"
                         + f" | {_fmt(look.value('personagym', 'persona_score', key))} | "
                         f"{_fmt(look.value('personagym', 'dropped_judgements', key), 0)} |")
        lines += ["", f"Across agents: PersonaScore {_ci(look.get('personagym', 'persona_score'))}; "
                  f"unparsable judgements dropped: {_fmt(look.value('personagym', 'dropped_judgements'), 0)}.", "",
                  images.get("personagym", ""), ""]
    if "backtest" in result.suites:
        lines += ["## Back-test: traits read from the lines alone", "",
                  "A judge that never sees the persona reads each person's lines of the run and names, per "
                  "factor, the side of 0.5 it fits (both orders of the two descriptions, averaged). Success = "
                  "the side the persona was written on; factors within 0.05 of 0.5 have no side. Wilson 95 % "
                  "intervals; the constant guess always names the side most people were written on. AUC: the chance "
                  "that someone written high gets a higher probability of the high pole than someone written low "
                  "(0.5: the judge's probabilities do not order people; bootstrap 95 % interval over people), "
                  "so a judge that leans one way for everybody is told apart from lines that show nothing. "
                  "Calibrated (unless --no-calibrate): the judge's answers divided by its answer with the lines "
                  "blanked; the raw answers' success beside.", "",
                  "| factor | success | written low | written high | raw answers' success | constant guess | AUC |",
                  "|---|---|---|---|---|---|---|"]
        for f in (*FACTORS, None):
            key = f"success_{f}" if f else "success"
            m = look.get("backtest", key)
            lines.append(f"| {f or '**all factors**'} | {_ci(m)} ({m.details.get('n', 0) if m else 0} judged) | "
                         f"{_ci(look.get('backtest', f'{key}_low')) if f else ''} | "
                         f"{_ci(look.get('backtest', f'{key}_high')) if f else ''} | "
                         f"{_ci(look.get('backtest', f'uncalibrated_{key}'))} | "
                         f"{_fmt(m.details.get('constant_guess') if m else None)} | "
                         f"{_ci(look.get('backtest', f'auc_{f}' if f else 'auc'))} |")
        everyone = look.get("backtest", "success")
        few = everyone.details.get("too_few_lines", 0) if everyone else 0
        lines += ["", f"People left out for saying fewer than 2 lines: {few}.", "",
                  images.get("backtest", ""), ""]
    if "customisation" in result.suites:
        lines += ["## Customisation: aspiration and skills read from the lines alone", "",
                  "A judge that never sees the persona reads each person's lines of the run and picks, out of "
                  "four, the aspiration that fits them, then their skills; the other three options are other "
                  "people's (or stock ones where the town has too few). Each question is asked in four rotations "
                  "of the options and the probabilities averaged, so a favourite position wins nothing; "
                  "calibrated (unless --no-calibrate) against the same question with the lines blanked. Success = "
                  "the person's own option has the highest probability. Chance is 0.25; Wilson 95 % intervals.", "",
                  "| question | success | raw answers' success | mean p(own option) |", "|---|---|---|---|"]
        for q in ("aspiration", "skills", None):
            key = f"success_{q}" if q else "success"
            m = look.get("customisation", key)
            lines.append(f"| {q or '**both**'} | {_ci(m)} ({m.details.get('n', 0) if m else 0} judged) | "
                         f"{_ci(look.get('customisation', f'uncalibrated_{key}'))} | "
                         f"{_fmt(look.value('customisation', f'p_own_{q}')) if q else ''} |")
        everyone = look.get("customisation", "success")
        details = everyone.details if everyone else {}
        unwritten = details.get("unwritten", {})
        lines += ["", f"People judged: {details.get('people', 0)}; left out for saying fewer than 2 lines: "
                  f"{details.get('too_few_lines', 0)}; with no aspiration written: {unwritten.get('aspiration', 0)}; "
                  f"with no skills written: {unwritten.get('skills', 0)}.", "", images.get("customisation", ""), ""]
    if "believability" in result.suites:
        from simulation.evaluation.believability import CATEGORIES

        lines += ["## Believability interview (Generative Agents, section 6.1)", "",
                  "Each agent answered five questions in each of five categories, from the memories retrieval "
                  "ranks first for the question in its own run (recency, importance, relevance). The answers are "
                  "in `results.json` (`details.qa` of each agent's `answered_*` rows); a judge's ranking of "
                  "conditions is a separate step. Below: one answer per category, and the answers the model "
                  "failed to give.", "", "| agent | " + " | ".join(c.replace("_", " ") for c in CATEGORIES)
                  + " | failed |", "|---" * (len(CATEGORIES) + 2) + "|"]
        for key in result.suites["believability"]:
            cells = []
            for c in CATEGORIES:
                m = look.get("believability", f"answered_{c}", key)
                first = (m.details.get("qa") or [{}])[0] if m else {}
                said = " ".join(str(first.get("answer", "")).split()).replace("|", "/")
                cells.append(f"*{first.get('question', '')}* {said[:160] or '(no answer)'}")
            lines.append(f"| {names[key]} | " + " | ".join(cells)
                         + f" | {_fmt(look.value('believability', 'failed', key), 0)} |")
        lines.append("")
    if "consistency" in result.suites:
        lines += ["## Consistency with the persona in the run", "", "Judge's score per logged item, 0-9.", "",
                  "| agent | mean | judged | dropped |", "|---|---|---|---|"]
        for key in result.suites["consistency"]:
            m = look.get("consistency", "mean", key)
            judged = m.details.get("judged", 0) if m else 0
            lines.append(f"| {names[key]} | {_fmt(m.value if m else None)} | {judged} | "
                         f"{_fmt(look.value('consistency', 'dropped_judgements', key), 0)} |")
        lines += ["", f"Across agents: {_ci(look.get('consistency', 'mean'))}.", "", images.get("consistency", ""), ""]
    return "\n".join(lines).rstrip() + "\n"


def write(result: EvalResult, out: Path) -> dict[str, Any]:
    """Everything into ``out`` (created; must not already hold an evaluation), then run.db rows."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(Problem(str(out), f"cannot create the output folder: {exc.strerror or exc}")) from None
    if (out / "eval.db").exists():
        raise InputError(Problem(str(out), "already holds an evaluation (eval.db); choose another --out"))
    _write_eval_db(out / "eval.db", result, out)
    rows = [{**m.row(), "details": json.dumps(_clean(m.details), ensure_ascii=False)} for m in result.metrics]
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["target", "run_id", "agent_id", "suite", "metric", "value", "details"])
        writer.writeheader()
        writer.writerows({**r, "value": _clean(r["value"])} for r in rows)
    images = plots.write_all(result, out)
    summary = {
        "eval_id": result.eval_id, "created_at": result.created_at, "wall_s": result.wall_s,
        "agent": result.agent, "judge": result.judge, "model_notes": result.model_notes,
        "options": vars(result.options),
        "targets": [{"key": t.key, "name": t.persona.name, "source": t.source, "run_id": t.run_id}
                    for t in result.targets],
        "suites": result.suites, "skipped": result.skipped, "cost": result.cost(), "llm_calls": len(result.calls),
        "plots": images["files"], "metrics": [m.row() for m in result.metrics],
    }
    (out / "results.json").write_text(json.dumps(_clean(summary), indent=2, ensure_ascii=False) + "\n", "utf-8")
    (out / "report.md").write_text(markdown(result, images["markdown"]), "utf-8")
    summary["run_db_rows"] = write_run_evaluations(result, out)
    return summary
