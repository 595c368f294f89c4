"""The lab bench lessons run on: a lesson's scenario and its variants (:class:`Lab`), what
its runs found (:class:`Outcome`), and the small formatters of its tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmasim.inputs import scenario as scenarios
from tmasim.inputs.scenario import Scenario
from tmasim.output.result import Result
from tmasim.values import format as fmt
from tmasim.values.units import PS_PER_US


@dataclass
class Outcome:
    """What a lesson's runs found: the answer to its question, the evidence, and why."""

    answer: float
    table: list[str]
    why: str
    figures: list[Path] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)   # named numbers, for tests and the notebook



class Lab:
    """Runs a lesson's scenario and its variants; writes figures when given a folder."""

    def __init__(self, lesson_scenario: str, out: Path | None = None) -> None:
        self.source = lesson_scenario
        self.out = out
        self.raw, self.base_dir = scenarios.read_raw(lesson_scenario)

    def scenario(self, **changes: Any) -> Scenario:
        raw = scenarios.apply_overrides(self.raw, ())
        for dotted, value in changes.items():
            scenarios.set_field(raw, dotted.replace("__", "."), value)
        return scenarios.from_dict(raw, self.base_dir)

    def run(self, **changes: Any) -> Result:
        from tmasim.simulation import simulate

        return simulate(self.scenario(**changes))

    def figure(self, name: str, fig: Any) -> list[Path]:
        from tmasim.review import plots

        if self.out is None:
            import matplotlib.pyplot as plt

            plt.close(fig)
            return []
        from tmasim.output.trust import trust_for

        return plots.save(fig, self.out / name, trust=trust_for(self.scenario()))


def format_time(ps: float, digits: int = 4) -> str:
    return fmt.time(ps, digits)


def us(ps: float) -> float:
    return ps / PS_PER_US


def row(*cells: Any, widths: Sequence[int] = (16, 14, 14, 14, 14)) -> str:
    return "  " + "".join(f"{str(c):>{w}}" for c, w in zip(cells, widths, strict=False)).rstrip()


def left(label: str, value: str) -> str:
    return f"  {label:<30}{value}"


def gantt(lab: Lab, result: Result, name: str, title: str) -> list[Path]:
    from tmasim.review import plots

    if lab.out is None or result.recorder is None:
        return []
    return lab.figure(name, plots.gantt(result.spans, result.events, title=title))
