"""Information provenance: which memories carry which of a scenario's facts, and how each got there.

``details`` reads a fact's details back out of a text (kept, mixed, changed, lost; standard library
only); ``conveys`` decides whether a text passes a fact on (embedding similarity, thresholds
calibrated by ``calibration`` on a labelled set); ``tracker`` tags every memory a tick forms
(``fact_memories``); ``probes`` scores answers to a probe about a fact. The metrics that
follow (awareness, cascade, distortion) are read from run.db by ``simulation.rundb``.
See docs/provenance.md.
"""
