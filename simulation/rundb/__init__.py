"""Reading a recorded run: run.db opened read-only, and the numbers every reader reports.

The CLI summary (``summary``), the viewer (``ui/``), `agora eval` and `agora rewards` all read
a run.db that the engine wrote (or is still writing). This package is the one place that opens it for
reading (``connect``) and the one place each shared number is defined (``metrics``; the spread
of facts in ``facts``; the behaviour report in ``behaviour``; who was in the town when, the
denominator of every per-person number, in ``presence``), so the summary printed after a
run and the page showing it cannot disagree.

It imports only the standard library and, of the engine, only ``simulation.provenance.rules``
(the definitions awareness rests on, standard library too): the viewer may import it
without loading the simulation (and its model, embedding and vector-index libraries), and
``import simulation.rundb`` stays cheap wherever a run is merely read.
"""

from simulation.rundb.connect import RunDB, RunUnreadable, connect_ro, db_path, table_names

__all__ = ["RunDB", "RunUnreadable", "connect_ro", "db_path", "table_names"]
