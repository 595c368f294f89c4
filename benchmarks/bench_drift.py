"""SM drift against the B200 TMA throughput table, and what drift costs in wall time.

    python benchmarks/bench_drift.py [--boxes 48] [--rows 0,3,6,...]

Every row of ``validation/public/b200/tma2d_throughput_tma2d_tput_results.csv`` (SemiAnalysis
microbench-blackwell: all SMs streaming fp32 boxes of SmemWidth x SmemHeight through NumStages
stages) is run on the b200 preset as a ``stream`` scenario, with drift off and with drift on
(start skew U(0, 1 us) per SM, copy latency CV 0.15: the spread of the table's sister latency
table, min to max about +-35 % of the median), and compared with the measured DRAM bandwidth.
Prints each row, the MAPE of each setting and the wall time of each (drift turns aggregation
off, so it simulates every SM). ``--h800 EVERY`` does the same on the Hopper TMA box table
(H800 PCIe, one copy in flight per CTA, 1-4 CTAs per SM) through its calibration scenario.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)

from tmasim.scenario import from_dict
from tmasim.simulation import simulate

PUBLIC = Path(__file__).resolve().parent.parent / "validation" / "public"
TABLE = PUBLIC / "b200" / "tma2d_throughput_tma2d_tput_results.csv"
DRIFT = {"start": "1 us", "latency_cv": 0.15}


def predict(row: dict[str, str], boxes: int, drift: dict[str, object] | None) -> float:
    width, height, stages = int(row["SmemWidth"]), int(row["SmemHeight"]), int(row["NumStages"])
    ctas = int(row["CTAsPerSM"])
    raw = {"gpu": "b200",
           "workload": {"kind": "stream", "dtype": "fp32", "shape": [148 * ctas * boxes * height, width],
                        "box": [height, width], "ctas_per_sm": ctas},
           "pipeline": {"stages": stages}, "run": {"records": False, **({"drift": drift} if drift else {})}}
    return float(simulate(from_dict(raw)).stats["achieved_bytes_per_s"])


def h800(every: int) -> None:
    """The Hopper box table (validation/public/h800-pcie/, one copy in flight per CTA, 1-4 CTAs
    per SM) through its calibration scenario, with drift off and on (as the scenario has it)."""
    import pandas as pd

    from tmasim.scenario import load
    from tmasim.validation import public

    source = public.SOURCES["h800-tma-throughput"]
    points = source.points(pd.read_csv(PUBLIC / source.table)).iloc[::every]
    errors: dict[str, list[float]] = {"off": [], "on": []}
    walls = {"off": 0.0, "on": 0.0}
    print(f"{'CTAs/SM':>7} {'box (x,y,z)':>12} {'row B':>6} {'measured':>10} {'drift off':>10} {'drift on':>10}")
    for _, row in points.iterrows():
        base = [f"workload.box={row['box']}", f"workload.shape={row['shape']}",
                f"workload.ctas_per_sm={row['ctas_per_sm']}"]
        got = {}
        for name, extra in (("off", ["run.drift={start = \"0 ns\", latency_cv = 0}"]), ("on", [])):
            start = time.perf_counter()
            got[name] = float(simulate(load(PUBLIC / source.scenario, base + extra)).stats["achieved_bytes_per_s"])
            walls[name] += time.perf_counter() - start
            errors[name].append(abs(got[name] / 1e9 - row["slice_gbps"]) / row["slice_gbps"])
        scale = 114 / 19 / 1e12
        print(f"{row['ctas_per_sm']:>7} {str(row['x']) + ',' + str(row['y']) + ',' + str(row['z']):>12} "
              f"{row['row_bytes']:>6} {row['throughput_gbps'] / 1e3:>8.2f}TB {got['off'] * scale:>8.2f}TB "
              f"{got['on'] * scale:>8.2f}TB")
    for name in ("off", "on"):
        print(f"drift {name}: MAPE {sum(errors[name]) / len(errors[name]):.1%} over {len(points)} rows, "
              f"wall time {walls[name]:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, default=48, help="boxes each CTA streams")
    parser.add_argument("--rows", default="", help="comma-separated row numbers (default: all)")
    parser.add_argument("--h800", type=int, default=0, metavar="EVERY",
                        help="instead: the Hopper box table, every EVERY-th row (1: all)")
    args = parser.parse_args()
    if args.h800:
        h800(args.h800)
        return
    rows = list(csv.DictReader(TABLE.open()))
    if args.rows:
        rows = [rows[int(i)] for i in args.rows.split(",")]
    errors: dict[str, list[float]] = {"off": [], "on": []}
    walls = {"off": 0.0, "on": 0.0}
    print(f"{'stages':>6} {'box':>9} {'in flight':>10} {'measured':>10} {'drift off':>10} {'drift on':>10}")
    for row in rows:
        measured = float(row["DRAMBandwidthBps"])
        got = {}
        for name, drift in (("off", None), ("on", DRIFT)):
            start = time.perf_counter()
            got[name] = predict(row, args.boxes, drift)
            walls[name] += time.perf_counter() - start
            errors[name].append(abs(got[name] - measured) / measured)
        print(f"{row['NumStages']:>6} {row['SmemWidth'] + 'x' + row['SmemHeight']:>9} "
              f"{int(row['BytesInFlightPerSM']):>10} {measured / 1e12:>8.2f}TB {got['off'] / 1e12:>8.2f}TB "
              f"{got['on'] / 1e12:>8.2f}TB")
    for name in ("off", "on"):
        mape = sum(errors[name]) / len(errors[name])
        print(f"drift {name}: MAPE {mape:.1%} over {len(rows)} rows, wall time {walls[name]:.1f} s")


if __name__ == "__main__":
    main()
