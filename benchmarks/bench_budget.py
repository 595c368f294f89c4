"""The run estimate (tmasim/budget.py, with the skip tmasim/skip_forecast.py forecasts) against
the measured run, each run in a fresh child process as ``tmasim run`` does it. The skip is
forecast where copies take fixed times (the tiles workload); runs whose copies flow through the
fabric are estimated in full (see tmasim/skip_forecast.py), so their ratios show how high.

For each case: the estimate's seconds and memory, the forecast and the actual skipped ring steps,
the measured seconds (simulate, CPU) and peak RSS, and the ratio estimate / measured. The
estimate is meant to be high rather than low, within about 2-3x.

    python benchmarks/bench_budget.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time  # run with cwd = this checkout: its tmasim comes first on sys.path
from tmasim.scenario import load
from tmasim.simulation import estimate, simulate
name, sets = sys.argv[1], json.loads(sys.argv[2])
scenario = load(name, sets)
guess = estimate(scenario)
start = time.process_time()
result = simulate(scenario, allow_large=True)
seconds = time.process_time() - start
print(json.dumps([guess.seconds, guess.memory, guess.skipped, result.stats["fast_forward_skipped_steps"],
                  seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]))
"""

CASES = [
    ("anchor, 10M tiles, records", "reference", ["workload.tiles=10000000", "run.records=true"]),
    ("anchor, 10M tiles, no records", "reference", ["workload.tiles=10000000", "run.records=false"]),
    ("anchor, 200k tiles, no skip", "reference", ["workload.tiles=200000", "run.fast_forward=false"]),
    ("jitter, 200k tiles", "jitter", ["workload.tiles=200000", "run.records=false"]),
    ("gemm-h100, records", "gemm-h100", ["run.records=true"]),
    ("gemm-h100, every SM", "gemm-h100", ["run.aggregate=false", "run.records=false"]),
    ("gemm-h100, ragged 128x192", "gemm-h100", ["workload.tile=[128,192,64]", "run.records=false"]),
    ("gemm-h100, raster row", "gemm-h100", ["workload.raster=row", "run.records=false"]),
    ("gemm-h100, grid launch", "gemm-h100", ["workload.launch=grid", "run.records=false"]),
    ("gemm-h100-cluster", "gemm-h100-cluster", ["run.records=false"]),
]
QUICK = {"anchor, 10M tiles, no records", "gemm-h100, records", "jitter, 200k tiles"}


def measure(name: str, sets: list[str]) -> list[float]:
    out = subprocess.run([sys.executable, "-c", CHILD, name, json.dumps(sets)], capture_output=True, text=True,
                         check=True, cwd=REPO)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three cases only")
    args = parser.parse_args()
    print(f"{'case':32} {'estimate':>9} {'measured':>9} {'ratio':>6} {'est. MB':>8} {'RSS MB':>7}"
          f" {'skip forecast':>14} {'skipped':>9}")
    for label, name, sets in CASES:
        if args.quick and label not in QUICK:
            continue
        est_s, est_b, forecast, skipped, seconds, rss = measure(name, sets)
        print(f"{label:32} {est_s:8.2f}s {seconds:8.2f}s {est_s / seconds:5.1f}x {est_b / 2**20:8.0f}"
              f" {rss / 2**20:7.0f} {forecast:14,} {skipped:9,}")


if __name__ == "__main__":
    main()
