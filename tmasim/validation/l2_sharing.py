"""Implicit L2 sharing inside a cluster, checked against the B200 multicast table.

``validation/public/b200/tma_mcast.csv`` (SemiAnalysisAI/microbench-blackwell, commit 9a068d8,
``tma2dmcast`` sweep; Nsight Compute counters): every CTA (one per SM) loads fp32 tiles with
TMA, each tile wanted by a group of CTAs, in four modes: ``implicit_l2_intra`` (the group is
one cluster; each CTA issues its own load of the same address), ``explicit_mcast`` (one CTA
multicasts it to the cluster), ``no_sharing`` (every CTA its own tile) and
``implicit_l2_cross`` (the group is ``sharing_group`` CTAs adjacent in launch order, no cluster).
The measured L2 reads (``lts_sectors_read``) of a row, over those of the same tile shape read
by one CTA alone, say how many times L2 served each shared tile: about once inside a cluster,
with or without multicast (the GPC coalesces the cluster's same-address loads), and once per
CTA, less at large groups, across clusters (only L2 hits: DRAM reads do not change).

The model's count comes from the simulator: a GEMM on ``b200`` whose ``group`` CTAs share the B
box (one output tile column), in one cluster of that size with ``multicast = "none"`` or
``"b"``, or without clusters for the cross-cluster rows; its L2 bytes less the unshared A
boxes, over one B stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tmasim.scenario import from_dict
from tmasim.simulation import simulate

if TYPE_CHECKING:
    import pandas as pd

TABLE = "b200/tma_mcast.csv"
TILE = (128, 128, 64)
K = 4096
MODES = {"implicit_l2_intra": "none", "explicit_mcast": "b", "no_sharing": None, "implicit_l2_cross": None}


def model_reads_per_tile(mode: str, group: int) -> float:
    """How many times the simulated L2 serves each shared tile (B box) for ``group`` sharers."""
    if mode == "no_sharing" or group == 1:
        return 1.0
    bm, bn, bk = TILE
    cluster = [group, 1] if mode != "implicit_l2_cross" else [1, 1]
    workload = {"kind": "gemm", "m": bm * group, "n": bn, "k": K, "tile": list(TILE), "epilogue_smem": 0}
    if mode != "implicit_l2_cross":
        workload["multicast"] = MODES[mode]
    raw = {"gpu": "b200", "workload": workload, "pipeline": {"stages": 4, "consumers": 1, "cluster": cluster},
           "run": {"records": False, "aggregate": False}}
    stats = simulate(from_dict(raw)).stats
    box = bn * bk * 2  # one B box, bf16
    a_bytes = group * bm * bk * 2 * (K // bk)
    return (float(stats["l2_bytes"]) - a_bytes - group * bm * bn * 2) / (box * (K // bk))


def check(root: Path) -> pd.DataFrame:
    """Per row: measured L2 reads per shared tile against the model's, and the error (%)."""
    import pandas as pd

    frame = pd.read_csv(root / TABLE)
    frame["group"] = frame["sharing_group"].where(frame["mode_name"] == "implicit_l2_cross", frame["cluster_size"])
    alone = frame[(frame["mode_name"] == "implicit_l2_intra") & (frame["cluster_size"] == 1)]
    base = alone.set_index(["smem_width", "smem_height"])["lts_sectors_read"]
    rows = frame.drop(alone.index).reset_index(drop=True)
    rows["measured"] = [r.lts_sectors_read / base[(r.smem_width, r.smem_height)] for r in rows.itertuples()]
    cache = {key: model_reads_per_tile(*key) for key in set(zip(rows["mode_name"], rows["group"], strict=True))}
    rows["predicted"] = [cache[(m, g)] for m, g in zip(rows["mode_name"], rows["group"], strict=True)]
    rows["error_pct"] = (rows["predicted"] / rows["measured"] - 1) * 100
    return rows[["mode_name", "cluster_size", "sharing_group", "group", "smem_width", "smem_height", "tile_bytes",
                 "gpu_time_ns", "measured", "predicted", "error_pct"]]


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per mode and group: rows, mean measured and predicted reads per tile, MAPE (%)."""
    grouped = table.groupby(["mode_name", "group"])
    return grouped.agg(rows=("measured", "size"), measured=("measured", "mean"), predicted=("predicted", "mean"),
                       mape=("error_pct", lambda e: e.abs().mean())).reset_index()
