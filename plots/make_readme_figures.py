"""Regenerate the README's figures into plots/:  python plots/make_readme_figures.py"""

from __future__ import annotations

from pathlib import Path

from tmasim import plots
from tmasim.scenario import load
from tmasim.simulation import simulate

HERE = Path(__file__).resolve().parent


def reference_gantt() -> Path:
    result = simulate(load("reference"))
    title = (f"Reference: 4 tiles, load 3 µs, compute 5 µs, 2 stages: {result.makespan_ps / 1e6:g} µs "
             f"(serial {result.stats['serial_ns'] / 1e3:g} µs)")
    return plots.save(plots.gantt(result.spans, result.events, title=title), HERE / "reference-gantt.png")[0]


def main() -> None:
    for path in (reference_gantt(),):
        print(f"wrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
