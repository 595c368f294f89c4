"""Budgets and estimates made before a run: its cost and the limits past it (``budget``), the steps
fast-forward will skip (``skip_forecast``), and derived durations checked against the engine's
range (``ranges``)."""
