"""The marginals figure (marginals.html): a sample's shares against the spec's, and its Big Five histograms.

plotly is imported when a figure is drawn, so sampling and loading never pay for it.
"""

from __future__ import annotations

from typing import Any

from simulation.population.marginals import expected_marginals, observed_marginals, truncated_cdf
from simulation.population.sampler import Sampled
from simulation.population.spec import FACTORS, PopulationSpec

__all__ = ["marginals_figure"]


def marginals_figure(spec: PopulationSpec, people: list[Sampled]) -> Any:
    """Observed vs expected shares (age bins, occupations, households) and Big Five histograms."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    expected, observed = expected_marginals(spec), observed_marginals(spec, people)
    n = max(1, len(people))
    fig = make_subplots(rows=3, cols=5, specs=[[{"colspan": 5}, None, None, None, None],
                                                [{"colspan": 5}, None, None, None, None],
                                                [{}, {}, {}, {}, {}]],
                        subplot_titles=["age and household", "occupation", *FACTORS], vertical_spacing=0.12)
    for row, keys in ((1, ("age", "household")), (2, ("occupation",))):
        cats = [f"{k}: {c}" for k in keys for c in expected[k]]
        exp = [expected[k][c] for k in keys for c in expected[k]]
        obs = [observed[k].get(c, 0) / n for k in keys for c in expected[k]]
        fig.add_trace(go.Bar(x=cats, y=exp, name="expected", marker_color="#bbb", showlegend=row == 1), row=row, col=1)
        fig.add_trace(go.Bar(x=cats, y=obs, name="sampled", marker_color="#3366cc", showlegend=row == 1),
                      row=row, col=1)
    for col, f in enumerate(FACTORS, start=1):
        dist = getattr(spec.big_five, f)
        edges = [i / 10 for i in range(11)]
        exp = [truncated_cdf(b, dist) - truncated_cdf(a, dist) for a, b in zip(edges, edges[1:])]
        vals = [getattr(s.persona.big_five, f) for s in people]
        obs = [sum(a <= v < b or (b == 1.0 and v == 1.0) for v in vals) / n for a, b in zip(edges, edges[1:])]
        mids = [round(a + 0.05, 2) for a in edges[:-1]]
        fig.add_trace(go.Bar(x=mids, y=obs, marker_color="#3366cc", showlegend=False), row=3, col=col)
        fig.add_trace(go.Scatter(x=mids, y=exp, mode="lines+markers", line={"color": "#444"}, showlegend=False),
                      row=3, col=col)
    fig.update_layout(title=f"Population '{spec.name}': {len(people)} sampled people vs the spec's marginals",
                      barmode="group", template="plotly_white", height=1100)
    return fig
