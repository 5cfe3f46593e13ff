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
HAPPENING_COLOR = "#fab005"
"""The ring round a place where a happening (a party) is going on."""
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


def _moods(group: Any) -> list[Any]:
    """Each person's mood (``cognition.moods``), or None where the frame has none."""
    return list(group["mood"]) if "mood" in group else [None] * len(group)


def town_map(places: pd.DataFrame, paths: pd.DataFrame, states: pd.DataFrame,
             links: Links | None = None, height: int = 720,
             happening: list[tuple[str, str, str]] | None = None) -> go.Figure:
    """Places at their map positions, walking paths, every agent beside its place labelled with
    name and action, a curved link between two people in a conversation, and a ring round the
    place of each ``happening`` (fact id, place id, its window as text) while it goes on."""
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
    rings = [(fid, at[place], window) for fid, place, window in happening or [] if place in at]
    if rings:
        fig.add_trace(go.Scatter(
            x=[r[1][0] for r in rings], y=[r[1][1] for r in rings], mode="markers+text", name="happening now",
            marker={"symbol": "circle-open", "size": 44, "line": {"width": 4, "color": HAPPENING_COLOR}},
            text=[f"<b>{fid}</b> {window}" for fid, _, window in rings], textposition="bottom center",
            textfont={"size": 11, "color": HAPPENING_COLOR},
            hovertemplate="%{text}: going on now<extra></extra>",
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
            text=[f"{first_name(n)}{f' ({m})' if isinstance(m, str) and m else ''} · {short(act)}"
                  for n, act, m in zip(group["name"], group["action"], _moods(group), strict=True)],
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


def _clock(sim_time: Any) -> str:
    """'2023-02-13 07:20' -> 'Mon 07:20'."""
    moment = pd.to_datetime(sim_time, errors="coerce")
    return "" if pd.isna(moment) else moment.strftime("%a %H:%M")


def fact_awareness(curve: pd.DataFrame, learned: pd.DataFrame, n_people: int, fact_id: str) -> go.Figure:
    """How many people are aware of a fact over game time (``queries.fact_curves``, a step line),
    with each person marked where they learned it (``queries.fact_learned``)."""
    x = _times(curve)
    fig = go.Figure(go.Scatter(x=x, y=curve["aware"], mode="lines", name="aware",
                               line={"shape": "hv", "width": 3, "color": "#d6336c"}, customdata=curve["tick"],
                               hovertemplate="%{x|%a %H:%M} (tick %{customdata}): %{y} aware<extra></extra>"))
    if len(learned) and len(curve):
        by_tick = dict(zip(curve["tick"], curve["aware"], strict=True))
        fig.add_trace(go.Scatter(
            x=pd.to_datetime(learned["sim_time"], errors="coerce"),
            y=[by_tick.get(int(t), 0) for t in learned["tick"]],
            mode="markers+text", text=[first_name(n) for n in learned["name"]], textposition="top left",
            marker={"size": 9, "color": "#d6336c"}, name="learns", customdata=learned["source"],
            hovertemplate="%{text} at %{x|%a %H:%M} (%{customdata})<extra></extra>"))
    fig.update_layout(title=f"Fact “{fact_id}”: people aware over time", height=300, showlegend=False,
                      yaxis={"range": [0, max(n_people, 1) + 0.5], "dtick": 1, "title": "people"},
                      margin={"t": 40, "b": 10})
    return fig


CASCADE_TRACES = {
    "root": "first to know (a root)", "told": "told by someone", "unaware": "not aware",
    "unaware_teller": "told it before knowing it", "tellings": "told", "tellings_unaware": "told, teller not aware",
}
"""Trace names of ``fact_cascade`` (its legend)."""


def cascade_positions(places: pd.DataFrame, homes: dict[str, str | None]) -> dict[str, tuple[float, float]]:
    """Each person just below their home on the town map; people sharing a home side by side,
    people without a known home in a row under the map."""
    at = {r.place_id: (float(r.x), float(r.y)) for r in places.itertuples()
          if not (pd.isna(r.x) or pd.isna(r.y))}
    residents: dict[str, list[str]] = {}
    homeless: list[str] = []
    for agent_id in sorted(homes):
        home = homes[agent_id]
        if home in at:
            residents.setdefault(home, []).append(agent_id)
        else:
            homeless.append(agent_id)
    out: dict[str, tuple[float, float]] = {}
    for home, people in residents.items():
        x, y = at[home]
        for i, agent_id in enumerate(people):
            out[agent_id] = (x + (i - (len(people) - 1) / 2) * 7.0, y + 3.5)
    x0 = min((p[0] for p in at.values()), default=0.0)
    y_max = max((p[1] for p in at.values()), default=0.0)
    for i, agent_id in enumerate(homeless):
        out[agent_id] = (x0 + 10.0 * i, y_max + 12.0)
    return out


def fact_cascade(places: pd.DataFrame, homes: dict[str, str | None], names: dict[str, str], learned: pd.DataFrame,
                 fact_id: str, height: int = 560) -> go.Figure:
    """A fact's cascade over the town: every person at their home (the town's places faint
    behind), an arrow from teller to listener for each person told it (``learned.parent``),
    labelled with the game time; roots (learned it from the scenario or by seeing someone) as
    stars, people told as dots, people not aware grey, and a teller who was not aware when they
    told it (made it up) ringed, with a dashed arrow."""
    pos = cascade_positions(places, {a: homes.get(a) for a in names})
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=places["x"], y=places["y"], mode="markers+text", name="places", showlegend=False, opacity=0.35,
        marker={"symbol": "square", "size": 16, "line": {"width": 1, "color": "#adb5bd"},
                "color": [KIND_COLORS.get(k, "#dee2e6") for k in places["kind"]]},
        text=list(places["name"]), textposition="top center", textfont={"size": 10, "color": "#868e96"},
        hoverinfo="skip"))
    rows = {r.agent_id: r for r in learned.itertuples()}
    tellings = [r for r in learned.itertuples() if isinstance(r.parent, str) and r.parent in pos and r.agent_id in pos]
    for unaware_teller, color, dash in ((False, "#d6336c", "solid"), (True, "#e8590c", "dash")):
        group = [r for r in tellings if bool(r.teller_aware) != unaware_teller]
        xs: list[float | None] = []
        ys: list[float | None] = []
        for r in group:
            (x1, y1), (x2, y2) = pos[r.parent], pos[r.agent_id]
            xs += [x1, x2, None]
            ys += [y1, y2, None]
            fig.add_annotation(x=x2, y=y2, ax=x1, ay=y1, xref="x", yref="y", axref="x", ayref="y", text="",
                               showarrow=True, arrowhead=3, arrowsize=1.4, arrowwidth=2, arrowcolor=color,
                               standoff=9, startstandoff=9)
        if not group:
            continue
        name = CASCADE_TRACES["tellings_unaware" if unaware_teller else "tellings"]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, line={"color": color, "width": 2, "dash": dash},
                                 hoverinfo="skip", showlegend=True))
        fig.add_trace(go.Scatter(
            x=[(pos[r.parent][0] + pos[r.agent_id][0]) / 2 for r in group],
            y=[(pos[r.parent][1] + pos[r.agent_id][1]) / 2 for r in group],
            mode="text", name=f"{name}: when", showlegend=False, text=[_clock(r.sim_time) for r in group],
            textfont={"size": 10, "color": color},
            customdata=[(names.get(r.parent, r.parent), r.name, r.source, int(r.depth)) for r in group],
            hovertemplate="%{customdata[0]} → %{customdata[1]} at %{text} (%{customdata[2]}, depth %{customdata[3]})"
                          "<extra></extra>"))
    tellers_unaware = sorted({r.parent for r in tellings if not bool(r.teller_aware)})

    def hover(agent_id: str) -> str:
        r = rows.get(agent_id)
        if r is None:
            return f"<b>{names[agent_id]}</b><br>not aware"
        how = f"{r.source} at {_clock(r.sim_time)}"
        if isinstance(r.parent, str):
            how += f" from {names.get(r.parent, r.parent)}, depth {int(r.depth)}"
        elif isinstance(r.from_agent, str):
            how += f" (saw {names.get(r.from_agent, r.from_agent)})"
        return f"<b>{names[agent_id]}</b><br>{how}"

    kinds = {
        "root": [a for a in names if a in rows and not isinstance(rows[a].parent, str)],
        "told": [a for a in names if a in rows and isinstance(rows[a].parent, str)],
        "unaware": [a for a in names if a not in rows],
    }
    style = {
        "root": {"symbol": "star", "size": 22, "color": "#f59f00", "line": {"width": 1.5, "color": "#862e9c"}},
        "told": {"symbol": "circle", "size": 15, "color": "#d6336c", "line": {"width": 1, "color": "white"}},
        "unaware": {"symbol": "circle", "size": 13, "color": "#ced4da", "line": {"width": 1, "color": "#adb5bd"}},
    }
    for kind, ids in kinds.items():
        ids = [a for a in ids if a in pos]
        if not ids:
            continue
        fig.add_trace(go.Scatter(
            x=[pos[a][0] for a in ids], y=[pos[a][1] for a in ids], mode="markers+text", name=CASCADE_TRACES[kind],
            marker=style[kind], text=[first_name(names[a]) for a in ids], textposition="bottom center",
            textfont={"size": 11, "color": "#212529" if kind != "unaware" else "#868e96"},
            customdata=ids, hovertext=[hover(a) for a in ids], hoverinfo="text"))
    ringed = [a for a in tellers_unaware if a in pos]
    if ringed:
        fig.add_trace(go.Scatter(
            x=[pos[a][0] for a in ringed], y=[pos[a][1] for a in ringed], mode="markers",
            name=CASCADE_TRACES["unaware_teller"], customdata=ringed,
            marker={"symbol": "diamond-open", "size": 26, "color": "#e8590c", "line": {"width": 2.5}},
            hovertext=[f"<b>{names[a]}</b> told it before being aware of it" for a in ringed], hoverinfo="text"))
    xs_all = [p[0] for p in pos.values()] + [float(v) for v in places["x"].dropna()]
    ys_all = [p[1] for p in pos.values()] + [float(v) for v in places["y"].dropna()]
    x_lo, x_hi = (min(xs_all), max(xs_all)) if xs_all else (0.0, 100.0)
    y_lo, y_hi = (min(ys_all), max(ys_all)) if ys_all else (0.0, 100.0)
    fig.update_layout(
        title=f"Fact “{fact_id}”: who told whom (each person at their home)", height=height,
        margin={"l": 10, "r": 10, "t": 40, "b": 10}, legend={"orientation": "h", "y": -0.02},
        xaxis={"visible": False, "range": [x_lo - 8, x_hi + 8]},
        yaxis={"visible": False, "range": [y_hi + 8, y_lo - 8], "scaleanchor": "x", "scaleratio": 1},
        plot_bgcolor="#fbfbf8", hoverlabel={"align": "left"})
    return fig


VERDICT_COLORS = {
    "right": "#2b8a3e", "partial": "#8ce99a", "mixed": "#f783ac", "wrong": "#e03131", "missed": "#adb5bd",
    "honest": "#4dabf7", "invented": "#f08c00", "failed": "#495057",
}
"""Probe verdicts (``probes.verdict``, ``simulation.provenance.rules``), in the order they stack:
first for people aware of the fact, then for people not aware of it, then answers the model
failed to give."""


def probe_verdicts(frame: pd.DataFrame) -> go.Figure:
    """Probe answers about each fact by verdict (``queries.probe_verdicts``), stacked per fact."""
    fig = go.Figure()
    verdicts = list(VERDICT_COLORS) + sorted(set(frame["verdict"]) - set(VERDICT_COLORS))
    facts = sorted(set(frame["fact"]))
    for verdict in verdicts:
        rows = frame[frame["verdict"] == verdict]
        if rows.empty:
            continue
        counts = dict(zip(rows["fact"], rows["answers"], strict=True))
        fig.add_trace(go.Bar(y=facts, x=[int(counts.get(f, 0)) for f in facts], name=verdict, orientation="h",
                             marker_color=VERDICT_COLORS.get(verdict, "#868e96"),
                             hovertemplate=f"%{{y}}: %{{x}} answer(s) {verdict}<extra></extra>"))
    fig.update_layout(title="Probe answers about each fact, by verdict", barmode="stack",
                      height=140 + 40 * max(len(facts), 1), margin={"t": 40, "b": 10},
                      xaxis={"title": "answers", "dtick": 1}, legend={"orientation": "h", "y": -0.3})
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


LABELLED_UP_TO = 60
"""People shown with their names beside their dots; in a bigger town the names are on hover."""


def relationship_graph(names: dict[str, str], edges: pd.DataFrame, source: str) -> go.Figure:
    """People on a circle (stable between reloads); a pair's edge is as wide as their
    conversations and, for relationships, coloured by mean sentiment (red -1 .. green +1).
    Edges of one width and colour are one trace (broken by gaps), and each pair's hover text sits
    on a marker at its middle: a trace per pair took a second and a half to draw for a
    1,000-person town."""
    ids = sorted(names)
    n = max(len(ids), 1)
    pos = {a: (math.cos(2 * math.pi * i / n - math.pi / 2), math.sin(2 * math.pi * i / n - math.pi / 2))
           for i, a in enumerate(ids)}
    fig = go.Figure()
    pairs: dict[tuple[str, str], list[Any]] = {}
    for r in edges.itertuples():
        if r.agent_id in pos and r.other_id in pos:
            pairs.setdefault(tuple(sorted((r.agent_id, r.other_id))), []).append(r)  # type: ignore[arg-type]
    strokes: dict[tuple[float, str], tuple[list[float | None], list[float | None]]] = {}
    middles: tuple[list[float], list[float], list[str]] = ([], [], [])
    for (a, b), rows in pairs.items():
        weight = max(float(r.weight or 0) for r in rows)
        senti = [float(r.sentiment) for r in rows if r.sentiment is not None and not pd.isna(r.sentiment)]
        mean = sum(senti) / len(senti) if senti else None
        color = "#adb5bd" if mean is None else _sentiment_color(round(mean * 10) / 10)
        xs, ys = strokes.setdefault((round(1.5 + 2 * math.log1p(weight), 1), color), ([], []))
        xs += [pos[a][0], pos[b][0], None]
        ys += [pos[a][1], pos[b][1], None]
        views = "<br>".join(f"{names[r.agent_id]} → {names[r.other_id]}: {short(r.view, 80)}"
                            for r in rows if isinstance(r.view, str) and r.view)
        label = f"{names[a]} and {names[b]}: {weight:g} conversation(s)"
        if mean is not None:
            label += f", sentiment {mean:+.2f}"
        middles[0].append((pos[a][0] + pos[b][0]) / 2)
        middles[1].append((pos[a][1] + pos[b][1]) / 2)
        middles[2].append(label + (f"<br>{views}" if views else ""))
    for (width, color), (xs, ys) in sorted(strokes.items()):
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", showlegend=False, hoverinfo="skip",
                                 line={"width": width, "color": color}))
    if middles[0]:
        fig.add_trace(go.Scatter(x=middles[0], y=middles[1], mode="markers", showlegend=False, hoverinfo="text",
                                 text=middles[2], marker={"size": 8, "color": "rgba(0,0,0,0)"}))
    labelled = len(ids) <= LABELLED_UP_TO
    fig.add_trace(go.Scatter(
        x=[pos[a][0] for a in ids], y=[pos[a][1] for a in ids], mode="markers+text" if labelled else "markers",
        showlegend=False, text=[names[a] for a in ids],
        textposition=["top center" if pos[a][1] >= 0 else "bottom center" for a in ids],
        marker={"size": 16 if labelled else 6, "color": "#1c7ed6", "line": {"width": 1, "color": "white"}},
        hoverinfo="text"))
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
    """LLM calls and people aware of each of the scenario's facts per run, side by side."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("LLM calls", "people aware of each fact"))
    fig.add_trace(go.Bar(x=frame["run"], y=frame["LLM calls"], marker_color="#1c7ed6", showlegend=False), row=1, col=1)
    facts = sorted({f for aware in frame["aware"] for f in aware})
    for fact in facts:
        fig.add_trace(go.Bar(x=frame["run"], y=[aware.get(fact, 0) for aware in frame["aware"]], name=fact),
                      row=1, col=2)
    fig.update_layout(height=340, barmode="group", margin={"t": 40, "b": 10})
    return fig


def fork_vs_parent(parent: dict[str, pd.DataFrame], fork: dict[str, pd.DataFrame], fork_tick: int,
                   labels: tuple[str, str] = ("parent", "fork")) -> go.Figure:
    """People aware of each fact over game time in a fork (solid) and its parent (dotted), one
    colour per fact, with a line where they part: before it the two are the same run, so the
    curves lie on each other; after it, the gap is what the intervention did (``queries.fact_curves``)."""
    fig = go.Figure()
    facts = sorted(set(parent) | set(fork))
    for i, fact in enumerate(facts):
        color = CONVERSATION_COLORS[i % len(CONVERSATION_COLORS)]
        for curves, label, dash in ((parent, labels[0], "dot"), (fork, labels[1], "solid")):
            curve = curves.get(fact)
            if curve is None or not len(curve):
                continue
            fig.add_trace(go.Scatter(
                x=_times(curve), y=curve["aware"], mode="lines", name=f"{fact}: {label}",
                line={"shape": "hv", "width": 3 if dash == "solid" else 2, "dash": dash, "color": color},
                customdata=curve["tick"], hovertemplate=f"{fact}, {label}: " + "%{y} aware at %{x|%a %H:%M} "
                "(tick %{customdata})<extra></extra>"))
    at = next((c.loc[c["tick"] == fork_tick, "sim_time"] for c in fork.values() if len(c)), None)
    if at is not None and len(at):
        moment = pd.to_datetime(at.iloc[0], errors="coerce")
        if not pd.isna(moment):
            fig.add_vline(x=moment, line={"color": "#495057", "dash": "dash", "width": 1})
            fig.add_annotation(x=moment, y=1, yref="paper", text=f"they part: tick {fork_tick}", showarrow=False,
                               xanchor="left", yanchor="bottom")
    fig.update_layout(title="People aware of each fact: the fork beside its parent", height=320,
                      yaxis={"title": "people", "rangemode": "tozero"}, margin={"t": 50, "b": 10})
    return fig


def evolve_rounds(rows: list[dict[str, Any]], cols: int = 4) -> go.Figure:
    """Each reward dimension and prosocial measure across the rounds of an evolve loop: the mean
    over the held-out seeds with its 95 % interval (``lineage.round_table`` rows); a measure
    flagged *traded away* (it fell while the reward rose) is drawn red."""
    shown = [r for r in rows if r["metric"].startswith("reward.") or r["prosocial"]]
    if not shown:
        return _empty("no reward dimension or prosocial measure recorded")
    n_rows = (len(shown) + cols - 1) // cols
    fig = make_subplots(rows=n_rows, cols=cols, subplot_titles=[r["metric"] for r in shown],
                        vertical_spacing=min(0.12, 0.9 / max(1, n_rows)))
    for i, row in enumerate(shown):
        points = [(k, e) for k, e in enumerate(row["rounds"]) if e.mean is not None]
        color = "#e03131" if row["traded"] else "#1c7ed6"
        fig.add_trace(go.Scatter(
            x=[k for k, _ in points], y=[e.mean for _, e in points], mode="lines+markers", showlegend=False,
            name=row["metric"], line={"color": color},
            error_y={"type": "data", "symmetric": False,
                     "array": [(e.high if e.high is not None else e.mean) - e.mean for _, e in points],
                     "arrayminus": [e.mean - (e.low if e.low is not None else e.mean) for _, e in points]},
            hovertemplate="round %{x}: %{y:.3g}<extra></extra>"), row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(dtick=1, title_text=None)
    fig.update_annotations(font_size=11)
    fig.update_layout(height=max(260, 220 * n_rows), margin={"t": 40, "b": 10})
    return fig
