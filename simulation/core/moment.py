"""The tick being stepped and its game time, shared by every part that writes rows or reasons about
time (the model, the recorder, conversations, cognition's ``Mind``): one object, moved on once
per tick by the model, so no part keeps a copy that could fall behind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass
class Moment:
    tick: int
    now: datetime
