"""Plotly figures for the pages: pure functions of data frames, so they can be tested alone."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

STATUS_COLORS = {
    "talking": "#d6336c", "acting": "#2b8a3e", "walking": "#e8590c", "idle": "#868e96",
    "waking": "#f59f00", "sleeping": "#5c7cfa",
}
CONVERSATION_COLORS = ["#d6336c", "#7048e8", "#1c7ed6", "#0ca678", "#f08c00", "#e03131"]
KIND_COLORS = {
    "home": "#c5d8f5", "cafe": "#f7c59f", "square": "#e9ecef", "park": "#b2f2bb", "bar": "#ffc9c9",
    "shop": "#ffe8a1", "pharmacy": "#c3fae8", "library": "#d0bfff", "college": "#eebefa",
}


def short(text: str | None, limit: int = 32) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def first_name(name: str) -> str:
    return name.split()[0] if name else name


def _empty(title: str, height: int = 300) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, height=height, xaxis_visible=False, yaxis_visible=False)
    return fig


# ---------------------------------------------------------------------- the town map

Links = dict[int, tuple[tuple[str, str], str]]
"""conversation id -> ((person, person), the last line said at the tick, or "")."""


def conversation_links(states: pd.DataFrame, said: pd.DataFrame) -> Links:
    """Conversations to draw at a tick: those with a line said at it (even if they ended within
    the tick) and those still open (``agent_states.conversation_id``)."""
    links: Links = {}
    for r in said.itertuples():
        links[int(r.conversation_id)] = ((r.speaker_id, r.listener_id), r.text)  # the last line wins
    for cid, group in states.dropna(subset=["conversation_id"]).groupby("conversation_id"):
        if int(cid) not in links and len(group) == 2:
            links[int(cid)] = ((group["agent_id"].iloc[0], group["agent_id"].iloc[1]), "")
    return links


def agent_positions(places: pd.DataFrame, states: pd.DataFrame, links: Links) -> dict[str, tuple[float, float]]:
    """Each agent stacked below-right of its place; partners in a conversation next to each other."""
    at = {r.place_id: (float(r.x), float(r.y)) for r in places.itertuples()}
    partner_of = {a: cid for cid, (pair, _) in links.items() for a in pair}
    out: dict[str, tuple[float, float]] = {}
    for place, group in states.groupby("place", sort=True):
        x, y = at.get(place, (0.0, 0.0))
        order = sorted(zip(group["agent_id"], group["name"], strict=True),
                       key=lambda a: (partner_of.get(a[0], 10**12), a[1]))
        for i, (agent_id, _) in enumerate(order):  # downwards from the marker, clear of the place's name
            out[agent_id] = (x + 3.6, y + 2.7 * i)
    return out


def town_map(places: pd.DataFrame, paths: pd.DataFrame, states: pd.DataFrame,
             links: Links | None = None, height: int = 720) -> go.Figure:
    """Places at their map positions, walking paths, every agent beside its place labelled with
    name and action, and a curved link between two people in a conversation."""
    links = links or {}
    fig = go.Figure()
    at = {r.place_id: (float(r.x), float(r.y)) for r in places.itertuples()}
    xs: list[float | None] = []
    ys: list[float | None] = []
    for r in paths.itertuples():
        if r.a in at and r.b in at:
            xs += [at[r.a][0], at[r.b][0], None]
            ys += [at[r.a][1], at[r.b][1], None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#ced4da", "width": 3},
                             hoverinfo="skip", showlegend=False, name="paths"))
    if len(paths):
        mid = [((at[r.a][0] + at[r.b][0]) / 2, (at[r.a][1] + at[r.b][1]) / 2, r.minutes)
               for r in paths.itertuples() if r.a in at and r.b in at]
        fig.add_trace(go.Scatter(x=[m[0] for m in mid], y=[m[1] for m in mid], mode="markers",
                                 marker={"size": 6, "color": "#ced4da"}, showlegend=False, name="path",
                                 hovertemplate="%{text} min walk<extra></extra>", text=[m[2] for m in mid]))
    fig.add_trace(go.Scatter(
        x=places["x"], y=places["y"], mode="markers+text", name="places", showlegend=False,
        marker={"symbol": "square", "size": 22, "line": {"width": 1, "color": "#495057"},
                "color": [KIND_COLORS.get(k, "#dee2e6") for k in places["kind"]]},
        text=[f"<b>{n}</b>" for n in places["name"]], textposition="top center", textfont={"size": 12},
        customdata=list(zip(places["kind"], places["description"].fillna(""), strict=True)),
        hovertemplate="<b>%{text}</b> (%{customdata[0]})<br>%{customdata[1]}<extra></extra>",
    ))
    pos = agent_positions(places, states, links)
    for n, (cid, (pair, line)) in enumerate(sorted(links.items())):
        if not (pair[0] in pos and pair[1] in pos):
            continue
        color = CONVERSATION_COLORS[n % len(CONVERSATION_COLORS)]
        (x1, y1), (x2, y2) = pos[pair[0]], pos[pair[1]]
        bend = min(x1, x2) - 1.2 - abs(y2 - y1) * 0.2
        fig.add_shape(type="path", path=f"M {x1},{y1} Q {bend},{(y1 + y2) / 2} {x2},{y2}",
                      line={"color": color, "width": 4})
        fig.add_trace(go.Scatter(
            x=[bend + 0.5], y=[(y1 + y2) / 2], mode="markers", showlegend=False, name=f"conversation {cid}",
            marker={"symbol": "diamond", "size": 11, "color": color},
            hovertemplate=f"conversation {cid}<br>%{{text}}<extra></extra>",
            text=[short(line, 90) or "(no line this tick)"],
        ))
    for status, color in STATUS_COLORS.items():
        group = states[states["status"] == status]
        if group.empty:
            continue
        fig.add_trace(go.Scatter(
            x=[pos[a][0] for a in group["agent_id"]], y=[pos[a][1] for a in group["agent_id"]],
            mode="markers+text", name=status,
            marker={"size": 12, "color": color, "line": {"width": 1, "color": "white"}},
            text=[f"{first_name(n)} · {short(act)}" for n, act in zip(group["name"], group["action"], strict=True)],
            textposition="middle right", textfont={"size": 10.5},
            customdata=list(zip(group["name"], group["action"].fillna(""), group["place_name"].fillna(""),
                                strict=True)),
            hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]}<br>at %{customdata[2]}"
                          f"<extra>{status}</extra>",
        ))
    x_lo, x_hi = float(places["x"].min()), float(places["x"].max())
    y_lo, y_hi = float(places["y"].min()), float(places["y"].max())
    fig.update_layout(
        height=height, margin={"l": 10, "r": 10, "t": 10, "b": 10}, legend={"orientation": "h", "y": -0.02},
        xaxis={"visible": False, "range": [x_lo - 8, x_hi + 26]},
        yaxis={"visible": False, "range": [y_hi + 8, y_lo - 8], "scaleanchor": "x", "scaleratio": 1},
        plot_bgcolor="#fbfbf8", hoverlabel={"align": "left"},
    )
    return fig


# ---------------------------------------------------------------------- metrics

def _times(frame: pd.DataFrame) -> pd.Series:
    return pd.to_datetime(frame["sim_time"], errors="coerce")


def llm_per_tick(frame: pd.DataFrame) -> go.Figure:
    """Calls (and cache hits), tokens, latency, parse failures (and fallbacks) per tick."""
    if frame.empty:
        return _empty("No ticks yet")
    x = _times(frame)
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=("LLM calls per tick (line: answered from the cache)", "tokens per tick",
                                        "LLM seconds per tick (line: mean seconds per call)",
                                        "parse failures per tick (line: safe-default fallbacks)"))
    hover = frame["tick"]
    fig.add_trace(go.Bar(x=x, y=frame["llm_calls"], name="calls", marker_color="#1c7ed6", customdata=hover,
                         hovertemplate="tick %{customdata}: %{y} calls<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=frame["cache_hits"].fillna(0), name="cache hits", mode="lines",
                             line={"color": "#0ca678"}), row=1, col=1)
    fig.add_trace(go.Bar(x=x, y=frame["prompt_tokens"], name="prompt tokens", marker_color="#74c0fc"), row=2, col=1)
    fig.add_trace(go.Bar(x=x, y=frame["completion_tokens"], name="completion tokens", marker_color="#1864ab"),
                  row=2, col=1)
    fig.add_trace(go.Bar(x=x, y=frame["llm_s"], name="LLM seconds", marker_color="#f59f00"), row=3, col=1)
    if "mean_latency_s" in frame:
        fig.add_trace(go.Scatter(x=x, y=frame["mean_latency_s"], name="mean s per call", mode="lines+markers",
                                 line={"color": "#e8590c"}, connectgaps=False), row=3, col=1)
    fig.add_trace(go.Bar(x=x, y=frame["parse_failures"], name="parse failures", marker_color="#e03131"), row=4, col=1)
    fig.add_trace(go.Scatter(x=x, y=frame["fallbacks"], name="fallbacks", mode="lines", line={"color": "#862e9c"}),
                  row=4, col=1)
    fig.update_layout(barmode="stack", height=760, margin={"t": 40, "b": 10}, legend={"orientation": "h", "y": -0.05})
    return fig


def calls_by_purpose(frame: pd.DataFrame) -> go.Figure:
    fig = go.Figure(go.Bar(x=frame["purpose"], y=frame["calls"], marker_color="#1c7ed6",
                           customdata=frame["mean_latency_s"].fillna(0),
                           hovertemplate="%{x}: %{y} calls, %{customdata:.2f} s each on average<extra></extra>"))
    fig.update_layout(title="LLM calls by purpose", height=300, margin={"t": 40, "b": 10})
    return fig


def awareness(aware: pd.DataFrame, ticks: pd.DataFrame, n_agents: int, topic: str) -> go.Figure:
    """How many people know about ``topic`` over game time (a step line), with who and when."""
    rows = aware[aware["topic"] == topic]
    x = _times(ticks)
    counts = [int((rows["tick"] <= t).sum()) for t in ticks["tick"]]
    fig = go.Figure(go.Scatter(x=x, y=counts, mode="lines", line={"shape": "hv", "width": 3, "color": "#d6336c"},
                               name="aware", hovertemplate="%{x|%a %H:%M}: %{y} aware<extra></extra>"))
    if len(rows):
        fig.add_trace(go.Scatter(
            x=pd.to_datetime(rows["sim_time"]), y=[counts[min(int(t), len(counts) - 1)] if counts else 0
                                                   for t in rows["tick"]],
            mode="markers+text", text=[first_name(n) for n in rows["name"]], textposition="top left",
            marker={"size": 9, "color": "#d6336c"}, name="learns",
            hovertemplate="%{text} at %{x|%a %H:%M}<extra></extra>"))
    fig.update_layout(title=f"Topic “{topic}”: people aware over time", height=320, showlegend=False,
                      yaxis={"range": [0, max(n_agents, 1) + 0.5], "dtick": 1, "title": "people"},
                      margin={"t": 40, "b": 10})
    return fig


def density(frame: pd.DataFrame, source: str) -> go.Figure:
    """Who-knows-whom density per tick (``queries.density``), a step line."""
    fig = go.Figure(go.Scatter(x=_times(frame), y=frame["density"], mode="lines", line={"shape": "hv", "width": 3},
                               customdata=frame["edges"],
                               hovertemplate="%{x|%a %H:%M}: density %{y:.3f} (%{customdata} pairs)<extra></extra>"))
    what = "relationships" if source == "relationships" else "who has talked with whom"
    fig.update_layout(title=f"Graph density over time ({what}; pairs / (n(n-1)/2))", height=300,
                      yaxis={"range": [0, 1.02], "tickformat": ".0%"}, margin={"t": 40, "b": 10})
    return fig


def relationship_graph(names: dict[str, str], edges: pd.DataFrame, source: str) -> go.Figure:
    """People on a circle (stable between reloads); a pair's edge is as wide as their
    conversations and, for relationships, coloured by mean sentiment (red -1 .. green +1)."""
    ids = sorted(names)
    n = max(len(ids), 1)
    pos = {a: (math.cos(2 * math.pi * i / n - math.pi / 2), math.sin(2 * math.pi * i / n - math.pi / 2))
           for i, a in enumerate(ids)}
    fig = go.Figure()
    pairs: dict[tuple[str, str], list[Any]] = {}
    for r in edges.itertuples():
        if r.agent_id in pos and r.other_id in pos:
            pairs.setdefault(tuple(sorted((r.agent_id, r.other_id))), []).append(r)  # type: ignore[arg-type]
    for (a, b), rows in pairs.items():
        weight = max(float(r.weight or 0) for r in rows)
        senti = [float(r.sentiment) for r in rows if r.sentiment is not None and not pd.isna(r.sentiment)]
        mean = sum(senti) / len(senti) if senti else None
        color = "#adb5bd" if mean is None else _sentiment_color(mean)
        views = "<br>".join(f"{names[r.agent_id]} → {names[r.other_id]}: {short(r.view, 80)}"
                            for r in rows if isinstance(r.view, str) and r.view)
        label = f"{names[a]} and {names[b]}: {weight:g} conversation(s)"
        if mean is not None:
            label += f", sentiment {mean:+.2f}"
        fig.add_trace(go.Scatter(
            x=[pos[a][0], pos[b][0]], y=[pos[a][1], pos[b][1]], mode="lines", showlegend=False,
            line={"width": 1.5 + 2 * math.log1p(weight), "color": color}, hoverinfo="text",
            text=label + (f"<br>{views}" if views else "")))
    fig.add_trace(go.Scatter(
        x=[pos[a][0] for a in ids], y=[pos[a][1] for a in ids], mode="markers+text", showlegend=False,
        text=[names[a] for a in ids], textposition=["top center" if pos[a][1] >= 0 else "bottom center" for a in ids],
        marker={"size": 16, "color": "#1c7ed6", "line": {"width": 1, "color": "white"}}, hoverinfo="text"))
    title = "Relationships" if source == "relationships" else "Who has talked with whom"
    fig.update_layout(title=title, height=480, xaxis={"visible": False, "range": [-1.5, 1.5]},
                      yaxis={"visible": False, "range": [-1.3, 1.3], "scaleanchor": "x"}, margin={"t": 40, "b": 10})
    return fig


def _sentiment_color(value: float) -> str:
    value = max(-1.0, min(1.0, value))
    if value >= 0:
        r, g, b = int(173 - 130 * value), int(181 - 9 * value), int(189 - 127 * value)
    else:
        r, g, b = int(173 + 51 * -value), int(181 - 132 * -value), int(189 - 140 * -value)
    return f"rgb({r},{g},{b})"


def _per_agent_lines(frame: pd.DataFrame, column: str, title: str, ytitle: str) -> go.Figure:
    fig = go.Figure()
    for name, group in frame.groupby("name", sort=True):
        fig.add_trace(go.Scatter(x=group["tick"], y=group[column], mode="lines+markers", name=str(name)))
    fig.update_layout(title=title, height=340, xaxis_title="tick", yaxis_title=ytitle, margin={"t": 40, "b": 10})
    return fig


def rewards(frame: pd.DataFrame) -> go.Figure:
    return _per_agent_lines(frame, "reward", "Reward per agent over time (mean per tick)", "reward")


def advantages(frame: pd.DataFrame) -> go.Figure:
    fig = _per_agent_lines(frame, "advantage", "Advantage per agent over time (mean per tick)", "advantage")
    fig.add_hline(y=0, line_dash="dot", line_color="#868e96")
    return fig


def reward_totals(frame: pd.DataFrame) -> go.Figure:
    return _per_agent_lines(frame, "total", "Running total of reward per agent", "total reward")


def evaluations(frame: pd.DataFrame, suite: str) -> go.Figure:
    rows = frame[frame["suite"] == suite]
    fig = go.Figure()
    for metric, group in rows.groupby("metric", sort=True):
        fig.add_trace(go.Bar(x=group["name"], y=group["value"], name=str(metric)))
    fig.update_layout(title=f"Evaluation: {suite}", barmode="group", height=340, margin={"t": 40, "b": 10})
    return fig


# ---------------------------------------------------------------------- people

def importance(frame: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for kind, group in frame.dropna(subset=["importance"]).groupby("kind", sort=True):
        fig.add_trace(go.Scatter(x=group["tick"], y=group["importance"], mode="markers", name=str(kind),
                                 text=[short(t, 90) for t in group["text"]],
                                 hovertemplate="tick %{x}, importance %{y}<br>%{text}<extra></extra>"))
    fig.update_layout(title="Importance of memories over time", height=260, xaxis_title="tick",
                      margin={"t": 40, "b": 10})
    return fig


def retrieval_scores(results: list[dict[str, Any]]) -> go.Figure:
    """Each retrieved memory's score as its recency, importance and relevance parts."""
    labels = [f"#{r.get('memory_id')} {short(r.get('text'), 48)}" for r in results][::-1]
    fig = go.Figure()
    for part, color in (("recency", "#74c0fc"), ("importance", "#f59f00"), ("relevance", "#2b8a3e")):
        fig.add_trace(go.Bar(y=labels, x=[float(r.get(part) or 0) for r in results][::-1], name=part,
                             orientation="h", marker_color=color))
    fig.add_trace(go.Scatter(y=labels, x=[float(r.get("score") or 0) for r in results][::-1], mode="markers",
                             name="score", marker={"symbol": "line-ns-open", "size": 18, "color": "black"}))
    fig.update_layout(barmode="stack", height=120 + 34 * len(results), margin={"t": 10, "b": 10, "l": 10},
                      legend={"orientation": "h"})
    return fig


def sentiments(frame: pd.DataFrame, names: dict[str, str]) -> go.Figure:
    frame = frame.dropna(subset=["sentiment"])
    fig = go.Figure(go.Bar(
        x=[names.get(o, o) for o in frame["other_id"]], y=frame["sentiment"],
        marker_color=[_sentiment_color(float(s)) for s in frame["sentiment"]],
        customdata=frame["conversations"],
        hovertemplate="%{x}: %{y:+.2f} after %{customdata} conversation(s)<extra></extra>"))
    fig.update_layout(title="Sentiment towards each person", height=280, yaxis={"range": [-1, 1]},
                      margin={"t": 40, "b": 10})
    return fig


# ---------------------------------------------------------------------- runs

def runs_compare(frame: pd.DataFrame) -> go.Figure:
    """LLM calls and aware people per run, side by side."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("LLM calls", "people aware of each topic"))
    fig.add_trace(go.Bar(x=frame["run"], y=frame["LLM calls"], marker_color="#1c7ed6", showlegend=False), row=1, col=1)
    topics = sorted({t for aware in frame["aware"] for t in aware})
    for topic in topics:
        fig.add_trace(go.Bar(x=frame["run"], y=[aware.get(topic, 0) for aware in frame["aware"]], name=topic),
                      row=1, col=2)
    fig.update_layout(height=340, barmode="group", margin={"t": 40, "b": 10})
    return fig
