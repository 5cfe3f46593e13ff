"""Loaded by the kill tests' ``agora`` subprocesses (this folder is put on PYTHONPATH).

With ``AGORA_TEST_PAUSE_IN_COMMIT=TICK:MARKER`` the commit of tick TICK stops inside its
transaction, after every row is written and before the COMMIT, touches MARKER and sleeps, so
the test can SIGKILL the process exactly mid-transaction. Nothing else changes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_spec = os.environ.get("AGORA_TEST_PAUSE_IN_COMMIT")
if _spec:
    import sqlite_utils.db

    _tick, _marker = _spec.split(":", 1)
    _original = sqlite_utils.db.Table.update

    def _update(self, pk_values, updates=None, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = _original(self, pk_values, updates, *args, **kwargs)
        if self.name == "runs" and updates and updates.get("ticks_done") == int(_tick) + 1:
            Path(_marker).touch()
            time.sleep(600)
        return result

    sqlite_utils.db.Table.update = _update  # type: ignore[method-assign]
