"""What-ifs: a scenario's variant simulated just now, and the line that says what it changed."""

from __future__ import annotations

import copy
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import ModelError, ResourceError, ScenarioError
from tmasim.inputs import scenario as scenarios
from tmasim.inputs.scenario import Scenario
from tmasim.values import format as fmt

if TYPE_CHECKING:
    from tmasim.estimates.budget import Limits

# The limits every what-if runs under (``tmasim explain --yes`` lifts them; a large one is noted
# before it starts): set by the caller around the what-ifs, the package's defaults otherwise.
LIMITS: ContextVar[Limits | None] = ContextVar("what_if_limits", default=None)


@dataclass(frozen=True)
class WhatIf:
    """One variant of a scenario, simulated: what changed and what it did to the time."""

    label: str
    overrides: dict[str, Any]
    makespan_ps: int | None
    error: str | None = None


def variant(scenario: Scenario, changes: dict[str, Any], base_dir: Path | None = None) -> Scenario:
    """The scenario with dotted fields set to Python values (not parsed strings)."""
    raw = copy.deepcopy(dict(scenario.raw))
    for dotted, value in changes.items():
        scenarios.set_field(raw, dotted, value)
    return scenarios.from_dict(raw, base_dir)


def run_what_if(scenario: Scenario, label: str, changes: dict[str, Any],
                base_dir: Path | None = None) -> WhatIf:
    from tmasim.simulation import simulate

    try:
        changed = variant(scenario, {**changes, "run.records": False}, base_dir)
        result = simulate(changed, limits=LIMITS.get())
    except (ScenarioError, ModelError, ResourceError) as err:
        return WhatIf(label, changes, None, str(err))
    return WhatIf(label, changes, result.makespan_ps)


def what_if_line(base_ps: int, w: WhatIf, unchanged: str) -> str:
    if w.makespan_ps is None:
        return f"{w.label}: cannot run ({w.error})"
    delta = base_ps - w.makespan_ps
    t = fmt.time(w.makespan_ps, 4)
    if delta == 0:
        return f"{w.label}: {t}, no change: {unchanged}"
    verb = "saves" if delta > 0 else "costs"
    return f"{w.label}: {t}, {verb} {fmt.time(abs(delta), 4)} ({abs(delta) / base_ps:.0%})"
