"""Teaching: narrated runs (explain), lessons a learner can break, a quiz and a glossary.

Each composes :func:`tmasim.simulation.simulate` with its own job; every number it shows comes
from a run made here, never from a table.
"""

from __future__ import annotations

from tmasim.teach.command import register

__all__ = ["register"]
