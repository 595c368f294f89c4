"""One run's per-tile timeline, measured and simulated, as one tidy table.

Columns: ``source`` (measured / simulated), ``tile`` (the CTA's k-th tile), ``issue_ns`` (the
producer issues the copy), ``ready_ns`` (the consumer passes the full barrier), and
``compute_start_ns`` / ``compute_end_ns``. Measured times are the backend's ``%globaltimer``
stamps of the run's first recorded CTA, relative to the run's first stamp; simulated times are
the simulator's spans of CTA 0, from launch. In the simulator the consumer computes as soon as
it passes the full barrier, so its ``ready_ns`` is its compute start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tmasim.errors import TmasimError

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("source", "cta", "tile", "issue_ns", "ready_ns", "compute_start_ns", "compute_end_ns")
_MEASURED = {"t_issue_ns": "issue_ns", "t_ready_ns": "ready_ns", "t_compute_start_ns": "compute_start_ns",
             "t_compute_end_ns": "compute_end_ns"}
MATCH_COLUMNS = ("variant", "stages", "tile_bytes", "compute_iters", "ctas", "tiles_per_cta", "consumer_warps")


def measured_tiles(tiles: pd.DataFrame, run_id: int) -> pd.DataFrame:
    """The first recorded CTA of run ``run_id``, one row per tile."""
    run = tiles[tiles["run_id"] == run_id]
    if run.empty:
        raise TmasimError(f"--timeline-run: run {run_id} has no rows in the tiles table")
    first = run[run["cta"] == run["cta"].min()].sort_values("tile")
    frame = first[["cta", "tile", *_MEASURED]].rename(columns=_MEASURED)
    frame.insert(0, "source", "measured")
    return frame.reset_index(drop=True)


def simulated_tiles(spans: pd.DataFrame) -> pd.DataFrame:
    """CTA 0 of a simulation with records: per tile, issue (slot fill start) and compute span."""
    import pandas as pd

    mine = spans[(spans["sm"] == 0) & (spans["cta"] == 0)]
    fill = mine[(mine["lane"] == "slot") & (mine["kind"] == "fill")].set_index("tile")["start_ps"]
    compute = mine[mine["kind"] == "compute"].groupby("tile").agg(start=("start_ps", "min"), end=("end_ps", "max"))
    frame = pd.DataFrame({"issue_ns": fill / 1000, "ready_ns": compute["start"] / 1000,
                          "compute_start_ns": compute["start"] / 1000, "compute_end_ns": compute["end"] / 1000})
    frame = frame.sort_index().reset_index(drop=True)
    frame.insert(0, "tile", range(len(frame)))
    frame.insert(0, "cta", 0)
    frame.insert(0, "source", "simulated")
    return frame


def candidate_runs(tiles: pd.DataFrame, points: pd.DataFrame, keys: Sequence[str]) -> dict[int, int]:
    """Each recorded run's point (run_id -> point), for points that were simulated."""
    match = [c for c in MATCH_COLUMNS if c in keys and c in tiles.columns]
    ok = points[points["status"] == "ok"]
    if "instrumented" in ok.columns:
        ok = ok[ok["instrumented"].astype(str) == "True"]
    runs = tiles.drop_duplicates("run_id")[["run_id", *match]]
    merged = runs.merge(ok[["point", *match]], on=match, how="inner", sort=False)
    return {int(r): int(p) for r, p in zip(merged["run_id"], merged["point"], strict=True)}


def default_run(runs: dict[int, int], points: pd.DataFrame) -> int | None:
    """The run whose overlay shows most: a pipeline (stages > 1) with compute, on the most CTAs;
    the first such in the file."""
    def score(run: int) -> tuple[bool, bool, int, int]:
        row = points.loc[points["point"] == runs[run]].iloc[0]
        return (int(row.get("stages", 1)) > 1, float(row.get("compute_iters", 0)) > 0, int(row.get("ctas", 1)), -run)

    return max(runs, key=score) if runs else None
