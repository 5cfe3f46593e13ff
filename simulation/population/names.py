"""Names for sampled people: full names drawn without repeats, and the persona ids made from them."""

from __future__ import annotations

import re
import unicodedata

import numpy as np

__all__ = ["TooFewNames", "draw_names", "slug"]


class TooFewNames(ValueError):
    """More people were asked for than the name lists can name without repeats."""


def slug(name: str) -> str:
    """'María José Núñez' -> 'maria_jose_nunez' (a persona id)."""
    ascii_ = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    s = re.sub(r"[^a-z0-9]+", "_", ascii_.lower()).strip("_")
    s = re.sub(r"^[^a-z]+", "", s)  # an id starts with a letter
    return s[:64].rstrip("_")


def draw_names(rng: np.random.Generator, firsts: list[str], lasts: list[str], n: int,
               exclude: set[str]) -> list[tuple[str, str]]:
    """``n`` (first, last) pairs in a seeded order; no full name or id repeats, none in ``exclude`` (ids)."""
    order = rng.permutation(len(firsts) * len(lasts))
    chosen: list[tuple[str, str]] = []
    seen = set(exclude)
    seen_names: set[str] = set()
    for k in order:
        first, last = firsts[int(k) // len(lasts)], lasts[int(k) % len(lasts)]
        name = f"{first} {last}"
        pid = slug(name)
        if pid in seen or name in seen_names:
            continue
        seen.add(pid)
        seen_names.add(name)
        chosen.append((first, last))
        if len(chosen) == n:
            return chosen
    raise TooFewNames(f"the name lists give only {len(chosen)} unused names; ask for at most that many people, "
                      "or add names to the spec")
