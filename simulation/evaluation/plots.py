"""Plots of an evaluation (plotly): target vs measured Big Five, PersonaScore per task, consistency over time.

Each plot is a standalone HTML file that works offline (plotly.js is written once, next to
them, as plotly.min.js). PNG copies are written too when kaleido is installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.evaluation.ipip import FACTORS
from simulation.evaluation.personagym import TASKS

if TYPE_CHECKING:
    from simulation.evaluation.engine import EvalResult


def _save(fig: Any, out: Path, stem: str, files: list[str]) -> str:
    fig.write_html(out / f"{stem}.html", include_plotlyjs="directory", full_html=True)
    files.append(f"{stem}.html")
    if importlib.util.find_spec("kaleido") is not None:
        try:
            fig.write_image(out / f"{stem}.png", width=1200, height=500, scale=1)
            files.append(f"{stem}.png")
            return f"![{stem}]({stem}.png)\n\n[interactive plot]({stem}.html)"
        except Exception:  # kaleido without a usable browser: the HTML plot is enough
            pass
    return f"[{stem} plot]({stem}.html) (interactive HTML; install kaleido for PNG copies)"


def _factor_figure(result: EvalResult, suite: str, title: str) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = {t.key: t.persona.name for t in result.targets}
    fig = make_subplots(rows=1, cols=len(FACTORS), subplot_titles=[f.capitalize() for f in FACTORS],
                        shared_yaxes=True, horizontal_spacing=0.03)
    for col, f in enumerate(FACTORS, start=1):
        xs, ys, labels = [], [], []
        for m in result.metrics:
            if m.suite == suite and m.metric == f and m.target is not None and m.value is not None:
                xs.append(m.details["target"])
                ys.append(m.value)
                labels.append(names.get(m.target, m.target))
        fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "#999"},
                                 showlegend=False, hoverinfo="skip"), row=1, col=col)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", text=labels, name=f, showlegend=False,
                                 marker={"size": 9}, hovertemplate="%{text}<br>target %{x:.2f}<br>measured %{y:.2f}"),
                      row=1, col=col)
        fig.update_xaxes(range=[-0.05, 1.05], title_text="target", row=1, col=col)
    fig.update_yaxes(range=[-0.05, 1.05], title_text="measured", row=1, col=1)
    fig.update_layout(title=title, template="plotly_white", height=420)
    return fig


def _personagym_figure(result: EvalResult) -> Any:
    import plotly.graph_objects as go

    names = {t.key: t.persona.name for t in result.targets}
    fig = go.Figure()
    labels = [t.replace("_", " ") for t in TASKS] + ["PersonaScore"]
    for key in result.suites["personagym"]:
        values = {m.metric: m.value for m in result.metrics if m.suite == "personagym" and m.target == key}
        ys = [values.get(f"task_{t}") for t in TASKS] + [values.get("persona_score")]
        fig.add_trace(go.Bar(x=labels, y=ys, name=names[key]))
    agg = {m.metric: m for m in result.metrics
           if m.suite == "personagym" and m.target is None and m.details.get("scope") == "all"}
    ys = [agg[f"task_{t}"].value if f"task_{t}" in agg else None for t in TASKS] + \
         [agg["persona_score"].value if "persona_score" in agg else None]
    fig.add_trace(go.Scatter(x=labels, y=ys, mode="markers", name="mean over agents",
                             marker={"symbol": "diamond", "size": 12, "color": "black"}))
    fig.update_layout(title="PersonaGym: task means and PersonaScore (1-5)", barmode="group", template="plotly_white",
                      yaxis={"range": [0, 5.2], "title": "score"}, height=450)
    return fig


def _consistency_figure(result: EvalResult) -> Any:
    import plotly.graph_objects as go

    names = {t.key: t.persona.name for t in result.targets}
    fig = go.Figure()
    for m in result.metrics:
        if m.suite == "consistency" and m.metric == "mean" and m.target is not None:
            hours = m.details.get("by_hour", {})
            fig.add_trace(go.Scatter(x=[f"{h}:00" for h in hours], y=list(hours.values()), mode="lines+markers",
                                     name=names.get(m.target, m.target)))
    fig.update_layout(title="Consistency with the persona over game time (judge, 0-9)", template="plotly_white",
                      yaxis={"range": [-0.2, 9.2], "title": "mean score in the hour"},
                      xaxis={"title": "game time"}, height=450)
    return fig


def write_all(result: EvalResult, out: Path) -> dict[str, Any]:
    files: list[str] = []
    md: dict[str, str] = {}
    if "bigfive" in result.suites:
        md["bigfive"] = _save(_factor_figure(result, "bigfive", "Big Five: target vs IPIP-50 score"),
                              out, "bigfive", files)
    if "forcedchoice" in result.suites:
        md["forcedchoice"] = _save(_factor_figure(result, "forcedchoice", "Big Five: target vs forced-choice score"),
                                   out, "forcedchoice", files)
    if "interview" in result.suites:
        md["interview"] = _save(_factor_figure(result, "interview", "Big Five: target vs interview rating"),
                                out, "interview", files)
    if "personagym" in result.suites:
        md["personagym"] = _save(_personagym_figure(result), out, "personagym", files)
    if "consistency" in result.suites:
        md["consistency"] = _save(_consistency_figure(result), out, "consistency", files)
    if "backtest" in result.suites:
        md["backtest"] = _save(_backtest_figure(result), out, "backtest", files)
    if "customisation" in result.suites:
        md["customisation"] = _save(_customisation_figure(result), out, "customisation", files)
    return {"files": files, "markdown": md}


def _customisation_figure(result: EvalResult) -> Any:
    """Per question: the probability the judge gave each person's own option (chance 0.25), people
    sorted, green where their own option came out on top."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from simulation.evaluation.customisation import CHANCE, QUESTIONS

    names = {t.key: t.persona.name for t in result.targets}
    fig = make_subplots(rows=1, cols=len(QUESTIONS), subplot_titles=[q.capitalize() for q in QUESTIONS],
                        shared_yaxes=True, horizontal_spacing=0.05)
    for col, q in enumerate(QUESTIONS, start=1):
        rows = sorted((m for m in result.metrics if m.suite == "customisation" and m.metric == f"p_own_{q}"
                       and m.target is not None and m.value is not None), key=lambda m: -m.value)
        labels = [names.get(m.target, m.target) for m in rows]
        colours = ["#2a9d8f" if m.details.get("success") else "#e76f51" if m.details.get("success") is False
                   else "#999" for m in rows]
        fig.add_trace(go.Bar(x=labels, y=[m.value for m in rows], marker={"color": colours}, showlegend=False,
                             customdata=[m.details["options"][m.details["own"]] for m in rows],
                             hovertemplate="%{x}<br>own: %{customdata}<br>p %{y:.2f}"), row=1, col=col)
        fig.add_hline(y=CHANCE, line={"dash": "dot", "color": "#777"}, row=1, col=col)
    fig.update_yaxes(range=[0, 1], title_text="judge's p(own option)", row=1, col=1)
    fig.update_layout(title="Customisation: each person's own aspiration and skills, picked out of four from their "
                            "lines (dotted: chance; green: their own came out on top)", template="plotly_white",
                      height=420)
    return fig


def _backtest_figure(result: EvalResult) -> Any:
    """Per factor: the judge's probability of the high pole against the persona's written value."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    names = {t.key: t.persona.name for t in result.targets}
    fig = make_subplots(rows=1, cols=len(FACTORS), subplot_titles=[f.capitalize() for f in FACTORS],
                        shared_yaxes=True, horizontal_spacing=0.03)
    for col, f in enumerate(FACTORS, start=1):
        rows = [m for m in result.metrics if m.suite == "backtest" and m.metric == f"p_high_{f}"
                and m.target is not None and m.value is not None]
        colours = ["#2a9d8f" if m.details.get("success") else "#e76f51" if m.details.get("success") is False
                   else "#999" for m in rows]
        for x0, y0, x1, y1 in ((0, 0.5, 1, 0.5), (0.5, 0, 0.5, 1)):
            fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", line={"dash": "dot", "color": "#bbb"},
                                     showlegend=False, hoverinfo="skip"), row=1, col=col)
        fig.add_trace(go.Scatter(x=[m.details["written"] for m in rows], y=[m.value for m in rows], mode="markers",
                                 text=[names.get(m.target, m.target) for m in rows], showlegend=False,
                                 marker={"size": 9, "color": colours},
                                 hovertemplate="%{text}<br>written %{x:.2f}<br>judge's P(high) %{y:.2f}"),
                      row=1, col=col)
        fig.update_xaxes(range=[-0.05, 1.05], title_text="written", row=1, col=col)
    fig.update_yaxes(range=[-0.05, 1.05], title_text="judge's P(high pole)", row=1, col=1)
    fig.update_layout(title="Back-test: traits read from the person's lines (green: right side, red: wrong)",
                      template="plotly_white", height=420)
    return fig
