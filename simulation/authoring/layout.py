"""Where a drafted town's places stand on the map and which paths join them.

Why not asked of the LLM: a map must be connected (everyone can walk everywhere) and its
walking times must agree with its distances, which no small model keeps straight; a layout
drawn from the pieces is right by construction. The public places stand on a ring around the
middle, each joined to its neighbours on the ring (so the ring alone connects them all); every
home stands outside the ring near the place where its first member works (or spread evenly),
joined to the nearest public place. Walking minutes are the distance at 4 map units a minute.
"""

from __future__ import annotations

import math

__all__ = ["Layout", "lay_out"]

CENTRE = (50.0, 50.0)
INNER, OUTER = 24.0, 42.0
UNITS_PER_MINUTE = 4.0

Layout = tuple[dict[str, tuple[float, float]], list[tuple[str, str, int]]]


def _at(angle: float, radius: float) -> tuple[float, float]:
    return (round(CENTRE[0] + radius * math.cos(angle), 1), round(CENTRE[1] + radius * math.sin(angle), 1))


def _minutes(a: tuple[float, float], b: tuple[float, float]) -> int:
    return max(1, round(math.dist(a, b) / UNITS_PER_MINUTE))


def lay_out(public: list[str], homes: dict[str, str | None]) -> Layout:
    """Positions of every place and the paths (a, b, minutes): ``public`` the public places in
    order, ``homes`` each home -> the public place its household works at (or None)."""
    n = len(public)
    angle = {p: 2 * math.pi * i / n for i, p in enumerate(public)}
    positions = {p: _at(angle[p], INNER) for p in public}
    paths: list[tuple[str, str, int]] = []
    for i, p in enumerate(public):
        if n > 1 and (n > 2 or i == 0):
            q = public[(i + 1) % n]
            paths.append((p, q, _minutes(positions[p], positions[q])))
    near_count: dict[str | None, int] = {}
    for k, (home, work) in enumerate(homes.items()):
        base = angle[work] if work in angle else 2 * math.pi * (k + 0.5) / max(1, len(homes))
        j = near_count.get(work, 0) if work in angle else 0
        if work in angle:
            near_count[work] = j + 1
        spread = (j + 1) // 2 * (1 if j % 2 else -1) * 0.35  # homes of one workplace fan out
        positions[home] = _at(base + spread, OUTER)
        nearest = min(public, key=lambda p: (math.dist(positions[home], positions[p]), p))
        paths.append((home, nearest, _minutes(positions[home], positions[nearest])))
    return positions, paths
