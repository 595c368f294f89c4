"""How far a run's estimate (tmasim/budget.py) holds: estimated against measured time and peak
memory on a grid of runs, each in a fresh child process, as ``tmasim run`` does it.

The child runs ``simulate`` with ``budget.check`` replaced by a spy, so the estimate compared is
the very one the run would be refused or noted with (the last one checked: the plan's own, or
the run's once planned). Measured: the CPU seconds of ``simulate`` and the child's peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``, which the child reports as it ends: its own, where
``RUSAGE_CHILDREN`` in this process would give the largest child's so far). The estimate counts the whole
process (the interpreter and its imports included), so it is compared with the peak RSS itself.

Ratios are estimate / measured: 2.0 is twice too high, 0.5 twice too low (memory ratios for runs
that peak above :data:`MEMORY_FLOOR`). Cases marked "estimate only" are too large to
run here: the script checks that their estimate is over the refusal line and quick to make
(under :data:`QUICK_SECONDS`), and says whether it came before the plan was built.

    python benchmarks/bench_estimates.py [--only WORD] [--json FILE]

The grid takes about 3 CPU minutes on the 2-core development machine; each point is capped at
:data:`CAP_SECONDS` and :data:`CAP_BYTES`.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CAP_SECONDS = 120
CAP_BYTES = 3 * 2**30
MEMORY_FLOOR = 0  # the estimate counts the interpreter too, so every run is compared
QUICK_SECONDS = 5.0

CHILD = """
import json, resource, sys, time  # run with cwd = this checkout: its tmasim comes first on sys.path
from tmasim import budget, simulation
from tmasim.scenario import load
name, sets, only = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
seen = []
budget.check = lambda estimate, limits: seen.append(estimate)
scenario = load(name, sets)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the interpreter and its imports
start = time.process_time()
if only:
    guess = simulation.estimate(scenario)
    print(json.dumps({"seconds": guess.seconds, "memory": guess.memory, "steps": guess.steps or guess.plan_steps,
                      "records": guess.records, "skipped": guess.skipped, "too_large": guess.too_large,
                      "before_plan": not guess.steps, "took": time.process_time() - start}))
    raise SystemExit
result = simulation.simulate(scenario)
took = time.process_time() - start
guess = seen[-1]
rec = result.recorder
print(json.dumps({"seconds": guess.seconds, "memory": guess.memory, "steps": guess.steps, "records": guess.records,
                  "skipped": guess.skipped, "too_large": guess.too_large, "took": took,
                  "actual_steps": result.stats["simulated_steps"],
                  "actual_skipped": result.stats["fast_forward_skipped_steps"],
                  "actual_records": rec.count if rec is not None else 0,
                  "wide_records": len(rec._whole_at) if rec is not None else 0,
                  "base": base, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

DRIFT = 'run.drift={start="200 ns", latency_cv=0.05}'
SMALL = ["workload.m=2048", "workload.n=2048"]
# (label, scenario, --set values, estimate only)
CASES: list[tuple[str, str, list[str], bool]] = [
    ("tiles 1M, records, skipped", "reference", ["workload.tiles=1000000", "run.records=true"], False),
    ("tiles 300k, records, no skip", "reference",
     ["workload.tiles=300000", "run.records=true", "run.fast_forward=false"], False),
    ("tiles 300k, no records, no skip", "reference",
     ["workload.tiles=300000", "run.records=false", "run.fast_forward=false"], False),
    ("tiles in ms, 300k, records", "reference",
     ["workload.tiles=300000", 'workload.load="3 ms"', 'workload.compute="5 ms"', "run.records=true",
      "run.fast_forward=false"], False),
    ("tiles in s, 300k, records", "reference",
     ["workload.tiles=300000", 'workload.load="0.3 s"', 'workload.compute="1 s"', "run.records=true",
      "run.fast_forward=false"], False),
    ("tiles in s, 1M, records, skipped", "reference",
     ["workload.tiles=1000000", 'workload.load="0.3 s"', 'workload.compute="1 s"', "run.records=true"], False),
    ("jitter 200k, records", "jitter", ["workload.tiles=200000", "run.records=true"], False),
    ("jitter 300k, no records", "jitter", ["workload.tiles=300000", "run.records=false"], False),
    ("gemm-h100", "gemm-h100", [], False),
    ("gemm-h100 short K 512", "gemm-h100", ["workload.k=512"], False),
    ("gemm-h100 long K 65536, 2k x 2k", "gemm-h100", [*SMALL, "workload.k=65536"], False),
    ("gemm-h100 records", "gemm-h100", ["run.records=true"], False),
    ("gemm-h100 ragged 128x192", "gemm-h100", ["workload.tile=[128,192,64]"], False),
    ("gemm-h100 grid launch", "gemm-h100", ["workload.launch=grid"], False),
    ("gemm-h100 every SM, 4k", "gemm-h100", ["workload.m=4096", "workload.n=4096", "run.aggregate=false"], False),
    ("gemm-h100 drift, 2k x 2k x 2k", "gemm-h100", [*SMALL, "workload.k=2048", DRIFT], False),
    ("gemm-h100-cluster drift, 2k^3", "gemm-h100-cluster", [*SMALL, "workload.k=2048", DRIFT], False),
    ("gemm-h100-cluster every SM, 4k", "gemm-h100-cluster",
     ["workload.m=4096", "workload.n=4096", "workload.k=4096", "run.aggregate=false"], False),
    # the sweep's point that skips 5 % where the lanes' forecast says 48 % (skip_forecast's doc)
    ("gemm-h100-cluster 256x128, K 4096", "gemm-h100-cluster", ["workload.tile=[256,128,64]", "workload.k=4096"],
     False),
    ("gemm-h100 jitter (latency_cv)", "gemm-h100", [*SMALL, 'run.drift={latency_cv=0.1}'], False),
    ("gemm-b200-2sm", "gemm-b200-2sm", [], False),
    ("gemm-b200-2sm 128x128x64", "gemm-b200-2sm", ["workload.tile=[128,128,64]"], False),
    ("gemm-b200-2sm 128x128x64 records", "gemm-b200-2sm", ["workload.tile=[128,128,64]", "run.records=true"],
     False),
    ("stream-h100", "stream-h100", [], False),
    ("stream-h100 narrow 8x256 boxes", "stream-h100", ["workload.box=[8,256]"], False),
    ("stream-h100 narrow 256x8 boxes", "stream-h100", ["workload.box=[256,8]"], False),
    ("stream-h100 small 16x16 boxes", "stream-h100", ["workload.box=[16,16]"], False),
    ("stream-h100 narrow 64x8, every SM", "stream-h100", ["workload.box=[64,8]", "run.aggregate=false"], False),
    ("stream-h100 records", "stream-h100", ["run.records=true"], False),
    ("attention-h100", "attention-h100", [], False),
    ("attention-h100 seqlen_kv 65536", "attention-h100", ["workload.batch=1", "workload.seqlen_kv=65536"], False),
    ("attention-h100 grid launch", "attention-h100", ["workload.launch=grid"], False),
    ("attention-h100 records", "attention-h100", ["workload.batch=1", "run.records=true"], False),
    ("attention-b200-2sm", "attention-b200-2sm", [], False),
    # Too large to run here: the estimate must be over the refusal line (the first four before planning).
    ("attention seqlen_kv 2^24", "attention-h100", ["workload.seqlen_kv=16777216"], True),
    ("attention seqlen_q 10^6", "attention-h100", ["workload.seqlen_q=1000000"], True),
    ("tiles 80M, no skip", "reference", ["workload.tiles=80000000", "run.records=false", "run.fast_forward=false"],
     True),
    ("gemm-h100-cluster drift, 8k^3 K 16k", "gemm-h100-cluster", ["workload.k=16384", DRIFT], True),
    ("gemm 64k^3 every SM", "gemm-h100",
     ["workload.m=65536", "workload.n=65536", "workload.k=65536", "run.aggregate=false"], True),
]


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CAP_SECONDS, CAP_SECONDS + 5))
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def measure(name: str, sets: list[str], only: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, name, json.dumps(sets), "1" if only else "0"],
                         capture_output=True, text=True, cwd=REPO, preexec_fn=_cap, timeout=3 * CAP_SECONDS)
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1][:90]}
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="the cases whose label contains this text")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    print(f"{'case':36} {'est.':>8} {'meas.':>8} {'time':>6} {'est.MB':>7} {'RSS MB':>7} {'mem':>6} "
          f"{'steps':>11} {'skipped':>11} {'records':>11}")
    worst: dict[str, list[tuple[float, str]]] = {"time": [], "memory": []}
    for label, name, sets, only in CASES:
        if args.only and args.only not in label:
            continue
        row = measure(name, sets, only)
        row["case"] = label
        rows.append(row)
        if "error" in row:
            print(f"{label:36} error: {row['error']}")
            continue
        if only:
            when = "before planning" if row["before_plan"] else "once planned"
            verdict = f"refused {when}" if row["too_large"] and row["took"] < QUICK_SECONDS else "NOT REFUSED"
            print(f"{label:36} {row['seconds']:7.0f}s {'-':>8} {'-':>6} {row['memory'] / 2**20:7.0f} {'-':>7} "
                  f"{'-':>6} {row['steps']:11,} estimate only: {verdict} ({row['took']:.2f} s to estimate)")
            continue
        t_ratio = row["seconds"] / max(row["took"], 1e-3)
        peak = row["peak"]
        m_ratio = row["memory"] / peak if peak and peak >= MEMORY_FLOOR else None
        print(f"{label:36} {row['seconds']:7.2f}s {row['took']:7.2f}s {t_ratio:5.2f}x {row['memory'] / 2**20:7.0f} "
              f"{(peak or 0) / 2**20:7.0f} {f'{m_ratio:5.2f}x' if m_ratio else '-':>6} {row['actual_steps']:11,} "
              f"{row['actual_skipped']:11,} {row['actual_records']:11,}"
              + (f" ({row['wide_records']:,} wide)" if row["wide_records"] else "")
              + (f"  [skip forecast {row['skipped']:,}]" if row["skipped"] else ""))
        if row["took"] >= 0.25:  # shorter runs: the clock's and the interpreter's noise
            worst["time"].append((t_ratio, label))
            if m_ratio is not None:
                worst["memory"].append((m_ratio, label))
    for what, ratios in worst.items():
        if ratios:
            high, low = max(ratios), min(ratios)
            print(f"{what}: highest {high[0]:.2f}x ({high[1]}), lowest {low[0]:.2f}x ({low[1]})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
