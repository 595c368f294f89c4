"""What the writer (:mod:`~tmasim.review.trace`) and the checker
(:mod:`~tmasim.review.trace_check`) of Chrome traces share: an event's type and how Perfetto's
JSON importer turns a microsecond float into nanoseconds. Kept apart so that neither module
imports the other's internals and the checker stands alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Event = dict[str, Any]


def ns_rounded(us: np.ndarray) -> np.ndarray:
    """Nanoseconds as Perfetto's JSON importer reads a µs float now: ``llround(us * 1000)``."""
    y = np.asarray(us, dtype=np.float64) * 1000.0
    whole = np.floor(y)
    return (whole + (y - whole >= 0.5)).astype(np.int64)


def ns_truncated(us: np.ndarray) -> np.ndarray:
    """Nanoseconds as older Perfetto releases read a µs float: ``int64(us * 1000)``, truncated."""
    return np.trunc(np.asarray(us, dtype=np.float64) * 1000.0).astype(np.int64)
