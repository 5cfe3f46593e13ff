"""Writing a run down: run.db's one writer and the rows a tick records.

``store`` (``RunStore``: run.db's table layout, every row checked against it, one transaction
per tick; ``TickBuffer``, the rows a tick collects before its commit) and ``recorder``
(``Recorder``: event, plan, schedule and LLM-call rows stamped with the tick). Reading a run
back is ``simulation.rundb``'s, which imports nothing of this package.
"""

from simulation.record.recorder import Recorder
from simulation.record.store import SCHEMA_VERSION, TABLES, RunStore, TickBuffer, dumps, now_iso, sim_iso

__all__ = ["SCHEMA_VERSION", "TABLES", "Recorder", "RunStore", "TickBuffer", "dumps", "now_iso", "sim_iso"]
