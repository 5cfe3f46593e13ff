"""Agora's viewer: a Streamlit app that reads a run's run.db (never the engine's internals).

`agora ui` starts it; ``ui/app.py`` is the entry script, ``ui/views/`` holds its pages,
``ui/db.py`` and ``ui/queries.py`` the read-only SQL, ``ui/inbox.py`` its one write
(whispers), ``ui/charts.py`` the plotly figures. See docs/ui.md.
"""
