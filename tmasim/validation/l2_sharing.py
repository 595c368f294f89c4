"""Implicit L2 sharing, inside a cluster and across launch-order neighbours, on the B200 table.

``validation/public/b200/tma_mcast.csv`` (SemiAnalysisAI/microbench-blackwell, commit 9a068d8,
``tma2dmcast`` sweep; Nsight Compute counters): every CTA (one per SM, 4 warps each with one
box in flight) loads fp32 tiles with TMA, each tile wanted by a group of CTAs, in four modes:
``implicit_l2_intra`` (the group is one cluster; each CTA issues its own load of the same
address), ``explicit_mcast`` (one CTA multicasts it to the cluster), ``no_sharing`` (every CTA
its own tile) and ``implicit_l2_cross`` (the group is ``sharing_group`` CTAs adjacent in launch
order, no cluster). The measure is the L2's reads for the SMs (``lts_sectors_tex_read``) of a
row over those of the same tile shape read by one CTA alone: how many times L2 served each
shared tile. (The table's other L2 reads are the die-to-die traffic: half the data for one CTA,
lines homed on the other die; the model's one L2 link does not carry it, see tmasim.l2_merge.)

The model: inside a cluster, and with multicast, the simulator's GEMM whose ``group`` CTAs share
the B box (one cluster of that size, ``multicast = "none"`` or ``"b"``); its L2 bytes less the
unshared A boxes, over one B stream. Across clusters, the GPC merge of tmasim.l2_merge on the
table's own launch (the CTAs dealt over the preset's GPCs, 4 boxes in flight per CTA), with
``l2_merge_bytes`` fitted to a seeded half of the tile shapes and the other half held out.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tmasim.inputs.scenario import from_dict
from tmasim.machine.cluster import place
from tmasim.machine.hardware import GpuSpec, load_gpu
from tmasim.machine.l2_merge import deal, l2_reads, miss_fraction
from tmasim.simulation import simulate
from tmasim.validation.calibration import split

if TYPE_CHECKING:
    import pandas as pd

TABLE = "b200/tma_mcast.csv"
TILE = (128, 128, 64)
K = 4096
MODES = {"implicit_l2_intra": "none", "explicit_mcast": "b", "no_sharing": None, "implicit_l2_cross": None}
CROSS, INTRA = "implicit_l2_cross", "implicit_l2_intra"
BOXES_IN_FLIGHT = 4  # the benchmark's 4 warps, each waiting on its own box
SEED, HOLDOUT = 0, 0.5


def neighbour_reads(gpu: GpuSpec, group: int, tile_bytes: int, merge_bytes: int) -> float:
    """L2 reads per shared tile when groups of ``group`` CTAs adjacent in launch order (one per
    SM, as many whole groups as the SMs hold) load the same tiles: tmasim.l2_merge's GPC merge."""
    ctas = gpu.sms // group * group
    gpcs = deal(gpu.gpcs, ctas)
    on_gpc = [gpcs.count(g) for g in range(len(gpu.gpcs))]
    miss = [miss_fraction(merge_bytes, n * BOXES_IN_FLIGHT * tile_bytes) for n in on_gpc]
    reads, _ = l2_reads([(gpc, cta // group) for cta, gpc in enumerate(gpcs)], miss)
    return reads / (ctas // group)


def cluster_reads(gpu: GpuSpec, group: int, tile_bytes: int, merge_bytes: int) -> float:
    """L2 reads per shared tile when each cluster of ``group`` CTAs (one per SM) loads its own
    tiles, every CTA of it the same ones (implicit_l2_intra): the first wave of clusters dealt
    over the GPCs, each GPC's peers missing the merge as its bytes in flight pass the window."""
    placement = place(gpu, (group, 1), 1)
    gpcs = deal(placement.per_gpc, min(gpu.sms // group, placement.clusters))
    on_gpc = [gpcs.count(g) * group for g in range(len(gpu.gpcs))]
    miss = [miss_fraction(merge_bytes, n * BOXES_IN_FLIGHT * tile_bytes) if merge_bytes else 0.0 for n in on_gpc]
    return sum(1.0 + (group - 1) * miss[gpc] for gpc in gpcs) / len(gpcs)


PREDICT = {CROSS: neighbour_reads, INTRA: cluster_reads}
WINDOW = {CROSS: "l2_merge_bytes", INTRA: "cluster_l2_merge_bytes"}


def model_reads_per_tile(mode: str, group: int) -> float:
    """How many times the simulated L2 serves each shared tile (B box) for ``group`` sharers."""
    if mode == "no_sharing" or group == 1:
        return 1.0
    if mode in PREDICT:
        raise ValueError(f"{mode} is predicted per tile size: {PREDICT[mode].__name__}()")
    bm, bn, bk = TILE
    workload = {"kind": "gemm", "m": bm * group, "n": bn, "k": K, "tile": list(TILE), "epilogue_smem": 0,
                "multicast": MODES[mode]}
    raw = {"gpu": "b200", "workload": workload, "pipeline": {"stages": 4, "consumers": 1, "cluster": [group, 1]},
           "run": {"records": False, "aggregate": False}}
    stats = simulate(from_dict(raw)).stats
    box = bn * bk * 2  # one B box, bf16
    a_bytes = group * bm * bk * 2 * (K // bk)
    return (float(stats["l2_bytes"]) - a_bytes - group * bm * bn * 2) / (box * (K // bk))


def check(root: Path, windows: dict[str, int] | None = None) -> pd.DataFrame:
    """Per row: measured L2 reads per shared tile against the model's, the error (%) and the split
    (launch-order and implicit cluster rows: ``train`` or ``holdout`` by tile shape; multicast and
    unshared rows are checks, ``check``). ``windows``: ``l2_merge_bytes`` and
    ``cluster_l2_merge_bytes``; None: fit each on its rows' training half (``rows.attrs``)."""
    import pandas as pd

    frame = pd.read_csv(root / TABLE)
    frame["group"] = frame["sharing_group"].where(frame["mode_name"] == CROSS, frame["cluster_size"])
    alone = frame[(frame["mode_name"] == INTRA) & (frame["cluster_size"] == 1)]
    base = alone.set_index(["smem_width", "smem_height"])["lts_sectors_tex_read"]
    rows = frame.drop(alone.index).reset_index(drop=True)
    rows["measured"] = [r.lts_sectors_tex_read / base[(r.smem_width, r.smem_height)] for r in rows.itertuples()]
    shapes = sorted(set(zip(rows["smem_width"], rows["smem_height"], strict=True)))
    train, _ = split(list(range(len(shapes))), HOLDOUT, SEED)
    fitted = {shapes[i] for i in train}
    fits = rows["mode_name"].isin(list(PREDICT))
    rows["split"] = ["check" if not f else "train" if (w, h) in fitted else "holdout"
                     for f, w, h in zip(fits, rows["smem_width"], rows["smem_height"], strict=True)]
    gpu = load_gpu("b200")
    windows = dict(windows) if windows else {}
    for mode, name in WINDOW.items():
        if name not in windows:
            windows[name] = fit_window(gpu, mode, rows[(rows["split"] == "train") & (rows["mode_name"] == mode)])
    others = set(zip(rows["mode_name"][~fits], rows["group"][~fits], strict=True))
    cache = {key: model_reads_per_tile(*key) for key in others}
    rows["predicted"] = [PREDICT[m](gpu, g, t, windows[WINDOW[m]]) if m in PREDICT else cache[(m, g)]
                         for m, g, t in zip(rows["mode_name"], rows["group"], rows["tile_bytes"], strict=True)]
    rows["error_pct"] = (rows["predicted"] / rows["measured"] - 1) * 100
    rows.attrs.update(windows)
    return rows[["mode_name", "cluster_size", "sharing_group", "group", "smem_width", "smem_height", "tile_bytes",
                 "gpu_time_ns", "split", "measured", "predicted", "error_pct"]]


def fit_window(gpu: GpuSpec, mode: str, train: pd.DataFrame) -> int:
    """The merge window (bytes) that minimises the squared relative error of ``mode``'s rows."""
    from scipy.optimize import minimize_scalar

    points = list(zip(train["group"], train["tile_bytes"], train["measured"], strict=True))
    predict = PREDICT[mode]

    def cost(kib: float) -> float:
        return sum((predict(gpu, g, t, round(kib * 1024)) / m - 1) ** 2 for g, t, m in points)

    grid = [2 ** (i / 8) for i in range(48, 121)]  # 64 KiB to 32 MiB: the cost is flat where nothing misses
    best = min(grid, key=cost)
    found = minimize_scalar(cost, bounds=(best / 2 ** 0.125, best * 2 ** 0.125), method="bounded",
                            options={"xatol": 0.5})
    return round(found.x) * 1024


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per mode, group and split: rows, mean measured and predicted reads per tile, MAPE (%)."""
    grouped = table.groupby(["mode_name", "group", "split"])
    return grouped.agg(rows=("measured", "size"), measured=("measured", "mean"), predicted=("predicted", "mean"),
                       mape=("error_pct", lambda e: e.abs().mean()),
                       worst=("error_pct", lambda e: e.loc[e.abs().idxmax()])).reset_index()
