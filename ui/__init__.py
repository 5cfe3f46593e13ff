"""Agora's viewer: a Streamlit app that reads a run's run.db (never the engine's internals).

`agora ui` starts it; ``ui/app.py`` is the entry script, ``ui/views/`` holds its pages,
``ui/db.py`` and ``ui/queries.py`` the read-only SQL, ``ui/inbox.py`` its one write
(whispers), ``ui/charts.py`` the plotly figures. See docs/ui.md.

Of the engine's package it imports ``simulation.rundb`` alone (opening run.db read-only and
the metrics the CLI summary shares with it), which loads nothing of the simulation, so the
viewer starts fast and can show a run whatever the engine is doing.
"""
