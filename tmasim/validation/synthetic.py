"""Backend files the simulator itself produced: ``validate`` and ``calibrate`` without a GPU.

:func:`backend_files` simulates a grid of kernel launches through the backend's map and writes
``measured_runs.csv``, ``measured_tiles.csv`` and ``meta.json`` in the backend's layout (the
columns of ``tmasim.gpu.driver``), with ``kernel_ns`` = the simulated makespan. Validating them
gives an error of zero at every point; simulating them on a modified GPU and calibrating the
unmodified preset against them must recover the modification. Both are tests of the tools, not
of the model: only measured data says how good the model is.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.machine.hardware import load_gpu
from tmasim.validation.mapping import DEFAULT_PS_PER_ITER_BYTE, BackendMap

if TYPE_CHECKING:
    import pandas as pd

# The columns of tmasim.gpu.driver (which needs numba to import); a test keeps them in step.
RUN_COLUMNS = ("run_id", "variant", "stages", "tile_bytes", "compute_iters", "ctas",
               "tiles_per_cta", "consumer_warps", "instrumented", "repeat", "kernel_ns",
               "timing", "bytes", "gbps", "smem_bytes_per_cta", "threads_per_cta",
               "distinct_sms", "steady_interval_ns", "full_wait_ns_mean",
               "empty_wait_ns_mean", "order_violations", "status")
TILE_COLUMNS = ("run_id", "variant", "stages", "tile_bytes", "compute_iters", "ctas",
                "tiles_per_cta", "consumer_warps", "repeat", "cta", "sm", "tile", "stage",
                "t_empty_wait_ns", "t_issue_ns", "t_full_wait_ns", "t_ready_ns",
                "t_compute_start_ns", "t_compute_end_ns")


@dataclass(frozen=True)
class Grid:
    """The launches to simulate: every combination of these kernel parameters."""

    stages: Sequence[int] = (1, 2, 4)
    tile_bytes: Sequence[int] = (4096, 16384)
    compute_iters: Sequence[int] = (0, 16)
    ctas: Sequence[int] = (1,)
    tiles_per_cta: int = 16
    consumer_warps: int = 4
    variant: str = "tma_bulk_1d"


def backend_files(folder: str | Path, gpu: str | Mapping[str, Any], grid: Grid = Grid(), *,
                  device: str = "tmasim (synthetic)", ps_per_iter_byte: float = DEFAULT_PS_PER_ITER_BYTE
                  ) -> list[Path]:
    """Simulate every launch of ``grid`` on ``gpu`` and write the backend's three files."""
    runs, tiles = backend_tables(gpu, grid, ps_per_iter_byte)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "measured_runs.csv", folder / "measured_tiles.csv", folder / "meta.json"]
    runs.to_csv(paths[0], index=False)
    tiles.to_csv(paths[1], index=False)
    date = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    meta = {"probe": {"metadata": {"date_utc": date, "simulator": False, "device": {"name": device}}},
            "synthetic": {"gpu": gpu, "ps_per_iter_byte": ps_per_iter_byte},
            "rows": {paths[0].name: len(runs), paths[1].name: len(tiles)}}  # as the backend's
    paths[2].write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return paths


def backend_tables(gpu: str | Mapping[str, Any], grid: Grid = Grid(),
                   ps_per_iter_byte: float = DEFAULT_PS_PER_ITER_BYTE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, tiles) as the backend writes them, every run instrumented, one repeat each."""
    import pandas as pd

    mapping = BackendMap(load_gpu(gpu).sms, ps_per_iter_byte)
    runs, tiles = [], []
    combos = itertools.product(grid.compute_iters, grid.tile_bytes, grid.ctas, grid.stages)
    for run_id, (iters, tile, ctas, stages) in enumerate(combos):
        params = {"run_id": run_id, "variant": grid.variant, "stages": stages, "tile_bytes": tile,
                  "compute_iters": iters, "ctas": ctas, "tiles_per_cta": grid.tiles_per_cta,
                  "consumer_warps": grid.consumer_warps}
        result = _simulate(gpu, mapping, params)
        runs.append(_run_row(params, result.stats))
        tiles.append(_tile_rows(params, result.spans))
    return pd.DataFrame(runs, columns=list(RUN_COLUMNS)), pd.concat(tiles, ignore_index=True)


def _simulate(gpu: str | Mapping[str, Any], mapping: BackendMap, params: Mapping[str, Any]) -> Any:
    from tmasim.inputs.scenario import from_dict, set_field
    from tmasim.simulation import simulate

    raw: dict[str, Any] = {"name": "synthetic", "gpu": gpu, "run": {"records": True}}
    for name, value in mapping.overrides(params):
        set_field(raw, name, value)
    return simulate(from_dict(raw))


def _run_row(params: Mapping[str, Any], stats: Mapping[str, Any]) -> dict[str, Any]:
    nbytes = params["ctas"] * params["tiles_per_cta"] * params["tile_bytes"]
    kernel_ns = float(stats["makespan_ns"])
    return {**params, "instrumented": True, "repeat": 0, "kernel_ns": kernel_ns, "timing": "tmasim",
            "bytes": nbytes, "gbps": nbytes / kernel_ns, "smem_bytes_per_cta": stats["smem_per_cta_bytes"],
            "threads_per_cta": 32 * (1 + params["consumer_warps"]), "distinct_sms": stats["sms_used"],
            "steady_interval_ns": float("nan"),
            "full_wait_ns_mean": stats["consumer_wait_full_ns"] / max(1, stats["tiles"]),
            "empty_wait_ns_mean": stats["producer_wait_empty_ns"] / max(1, stats["tiles"]),
            "order_violations": 0, "status": "ok"}


def _tile_rows(params: Mapping[str, Any], spans: pd.DataFrame) -> pd.DataFrame:
    """CTA 0's spans in the backend's per-tile columns (ns from launch)."""
    from tmasim.validation.timeline import simulated_tiles

    frame = simulated_tiles(spans)
    mine = spans[(spans["sm"] == 0) & (spans["cta"] == 0)]
    order = {tile: k for k, tile in enumerate(sorted(mine.loc[mine["kind"] == "compute", "tile"].unique()))}
    waits = {kind: mine[mine["kind"] == kind].assign(k=lambda f: f["tile"].map(order)).groupby("k")["start_ps"].min()
             / 1000 for kind in ("wait_empty", "wait_full")}
    rows = {**{k: params[k] for k in TILE_COLUMNS[:8]}, "repeat": 0, "cta": 0, "sm": 0, "tile": frame["tile"],
            "stage": frame["tile"] % params["stages"],
            "t_empty_wait_ns": waits["wait_empty"].reindex(frame["tile"]).fillna(frame["issue_ns"]).to_numpy(),
            "t_issue_ns": frame["issue_ns"],
            "t_full_wait_ns": waits["wait_full"].reindex(frame["tile"]).fillna(frame["ready_ns"]).to_numpy(),
            "t_ready_ns": frame["ready_ns"], "t_compute_start_ns": frame["compute_start_ns"],
            "t_compute_end_ns": frame["compute_end_ns"]}
    import pandas as pd

    return pd.DataFrame(rows, columns=list(TILE_COLUMNS))
