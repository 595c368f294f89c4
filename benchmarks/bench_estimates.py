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

A second grid, :data:`COMMANDS`, runs the commands around ``run`` whole (``tmasim.cli.main`` in a
fresh child with ``--yes``, in a temporary folder): ``run --trace`` and ``--out`` at the sizes that
were misjudged (10^6 tiles traced, 2*10^6 written), runs with records, ``report`` and ``plot`` of
300,000 tiles, an animation, a sweep of 10,000 tiny points, one over a million-entry per-tile list,
and a drifting cluster run. Compared: the estimate each command checks before its work (the last of
each kind, summed: a report's run and its sweep) against the command's CPU seconds and peak RSS,
with "yes" where both are within 2x. It takes about 15 CPU minutes (the 10^6-tile trace 4, and 11 GB
of memory; the cluster run 6).

    python benchmarks/bench_estimates.py [--grid runs|commands|all] [--only WORD] [--json FILE]

The run grid takes about 3 CPU minutes on the 2-core development machine; each point is capped at
:data:`CAP_SECONDS` and :data:`CAP_BYTES` (a command at its own caps).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
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


# The commands around `run`, each run whole in a fresh child (its working folder a temporary one),
# with --yes so that it runs past the limits: compared are what the command checks before its work
# (the last estimate of each kind it checks, summed: a report's runs and its sweep) and the CPU seconds
# and peak RSS of the command itself (cli.main, the interpreter's start-up left out).
CHILD_COMMAND = """
import json, resource, sys, time
from tmasim import budget
from tmasim.sweep import estimate as sweep_estimate
seen = {}
real_check = budget.check
def spy(estimate, limits):
    if "sweep" in seen and limits.what == "run":  # a sweep's points, checked as they run: not its estimate
        return real_check(estimate, limits)
    seen[limits.what] = {"seconds": estimate.seconds, "memory": estimate.memory, "too_large": estimate.too_large,
                         "text": estimate.text()}
    real_check(estimate, limits)
budget.check = spy
real_sample = sweep_estimate._sample
def sample(*args, **kwargs):
    seconds, sampled, slow = real_sample(*args, **kwargs)
    seen["sweep"] = {"seconds": seconds, "memory": None, "too_large": seconds >= sweep_estimate.LIMIT_SECONDS,
                     "text": f"sweep {seconds:.1f} s"}
    return seconds, sampled, slow
sweep_estimate._sample = sample
from tmasim.cli import main
start = time.process_time()
code = main(json.loads(sys.argv[2]))
took = time.process_time() - start
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "took": took, "seen": seen,
               "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}, out)
"""

# Files the command cases need, made first in the child's folder: (name, tmasim command)
SETUP = {
    "folder300k": ["run", "reference", "--set", "workload.tiles=300000", "--set", "run.records=true",
                   "--out", "o300k", "--yes"],
}
# (label, tmasim arguments, setup it needs, CPU cap in seconds, memory cap in bytes)
GIB = 2**30
TINY_SEEDS = ",".join(str(i) for i in range(100))
TINY_TILES = ",".join(str(i) for i in range(1, 101))
COMMANDS: list[tuple[str, list[str], str | None, int, int]] = [
    ("run records 1M tiles", ["run", "reference", "--set", "workload.tiles=1000000", "--set", "run.records=true",
                              "--set", "run.fast_forward=false"], None, 300, 3 * GIB),
    ("run --trace 1M tiles", ["run", "reference", "--set", "workload.tiles=1000000", "--set", "run.records=true",
                              "--trace", "t.json.gz"], None, 900, 16 * GIB),
    ("run --trace 100k tiles", ["run", "reference", "--set", "workload.tiles=100000", "--set", "run.records=true",
                                "--trace", "t.json.gz"], None, 300, 4 * GIB),
    ("run --out 2M tiles", ["run", "reference", "--set", "workload.tiles=2000000", "--set", "run.records=true",
                            "--out", "o2m"], None, 600, 8 * GIB),
    ("run --out gemm-h100 records", ["run", "gemm-h100", "--set", "run.records=true", "--out", "og"], None, 300,
     4 * GIB),
    ("report 300k tiles", ["report", "reference", "--set", "workload.tiles=300000", "--out", "rep"], None, 600,
     8 * GIB),
    ("plot slots, 300k-tile folder", ["plot", "o300k", "--kind", "slots", "--out", "s.png"], "folder300k", 300,
     6 * GIB),
    ("plot gantt, 300k-tile folder", ["plot", "o300k", "--kind", "gantt", "--out", "g.png"], "folder300k", 300,
     6 * GIB),
    ("animate 2k tiles", ["animate", "reference", "--set", "workload.tiles=2000", "--out", "a.html"], None, 300,
     4 * GIB),
    ("sweep 10,000 tiny points", ["sweep", "reference", "--vary", f"run.seed={TINY_SEEDS}", "--vary",
                                  f"workload.tiles={TINY_TILES}", "--jobs", "1", "--quiet", "--out", "tiny.csv"],
     None, 300, 4 * GIB),
    ("sweep gemm-h100, 5 stage counts", ["sweep", "gemm-h100", "--vary", "pipeline.stages=2,3,4,5,6", "--jobs", "1",
                                         "--quiet", "--out", "gemm.csv"], None, 300, 4 * GIB),
    ("sweep, million-entry per-tile list", ["sweep", "heavy.toml", "--vary", "pipeline.stages=2,3", "--jobs", "1",
                                            "--quiet", "--out", "heavy.csv"], "heavy", 600, 6 * GIB),
    ("run gemm-h100-cluster drift (8k^3)", ["run", "gemm-h100-cluster", "--set", DRIFT], None, 900, 3 * GIB),
]


def _heavy_scenario(folder: Path) -> None:
    """A scenario whose per-tile list has a million entries (load times drawn from four values)."""
    import random

    rng = random.Random(1)
    loads = ", ".join(f'"{rng.choice([2.5, 3, 3.5, 4])} us"' for _ in range(1_000_000))
    (folder / "heavy.toml").write_text(
        'name = "heavy"\ndescription = "a million tiles, each its own load time"\ngpu = "ideal"\n[workload]\n'
        f'kind = "tiles"\ntiles = 1000000\nload = [{loads}]\ncompute = "3 us"\n[pipeline]\nstages = 2\n'
        '[run]\nrecords = false\n')


def _caps(seconds: int, memory: int):
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return cap


def measure_command(args: list[str], folder: Path, seconds: int, memory: int) -> dict:
    report = folder / "measured.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", CHILD_COMMAND, str(report), json.dumps([*args, "--yes"])],
                         capture_output=True, text=True, cwd=folder, env=env, preexec_fn=_caps(seconds, memory),
                         timeout=4 * seconds)
    if out.returncode or not report.exists():
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1][:90]}
    row = json.loads(report.read_text())
    report.unlink()
    seen = row.pop("seen")
    row["seconds"] = sum(e["seconds"] for e in seen.values())
    memories = [e["memory"] for e in seen.values() if e["memory"] is not None]
    row["memory"] = max(memories) if memories else None
    row["estimates"] = seen
    return row


def _setup(name: str, folder: Path) -> None:
    if name == "heavy":
        if not (folder / "heavy.toml").exists():
            _heavy_scenario(folder)
        return
    if not (folder / "o300k" / "spans.csv").exists():
        measure_command(SETUP[name], folder, 600, 6 * GIB)


def run_commands(only: str | None, rows: list[dict]) -> None:
    print(f"\n{'command':38} {'est.':>8} {'meas.':>8} {'time':>6} {'est.MB':>7} {'RSS MB':>7} {'mem':>6}  within 2x")
    with tempfile.TemporaryDirectory(prefix="bench-estimates-") as tmp:
        folder = Path(tmp)
        for label, args, setup, seconds, memory in COMMANDS:
            if only and only not in label:
                continue
            if setup:
                _setup(setup, folder)
            row = measure_command(args, folder, seconds, memory)
            row["case"] = label
            rows.append(row)
            if "error" in row:
                print(f"{label:38} error: {row['error']}")
                continue
            t_ratio = row["seconds"] / max(row["took"], 1e-3)
            m_ratio = row["memory"] / row["peak"] if row["memory"] else None
            within = 0.5 <= t_ratio <= 2 and (m_ratio is None or 0.5 <= m_ratio <= 2)
            est_mb = f"{row['memory'] / 2**20:7.0f}" if row["memory"] else f"{'-':>7}"  # a sweep: time only
            print(f"{label:38} {row['seconds']:7.1f}s {row['took']:7.1f}s {t_ratio:5.2f}x "
                  f"{est_mb} {row['peak'] / 2**20:7.0f} "
                  f"{f'{m_ratio:5.2f}x' if m_ratio else '-':>6}  {'yes' if within else 'NO'}", flush=True)


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
    parser.add_argument("--grid", choices=("runs", "commands", "all"), default="all",
                        help="the runs (simulate alone), the commands around them (run --trace/--out, report, plot, "
                             "animate, sweeps), or both (default)")
    args = parser.parse_args()
    rows: list[dict] = []
    if args.grid != "runs":
        run_commands(args.only, rows)
    if args.grid != "commands":
        run_grid(args.only, rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def run_grid(only: str | None, rows: list[dict]) -> None:
    print(f"{'case':36} {'est.':>8} {'meas.':>8} {'time':>6} {'est.MB':>7} {'RSS MB':>7} {'mem':>6} "
          f"{'steps':>11} {'skipped':>11} {'records':>11}")
    worst: dict[str, list[tuple[float, str]]] = {"time": [], "memory": []}
    for label, name, sets, estimate_only in CASES:
        if only and only not in label:
            continue
        row = measure(name, sets, estimate_only)
        row["case"] = label
        rows.append(row)
        if "error" in row:
            print(f"{label:36} error: {row['error']}")
            continue
        if estimate_only:
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


if __name__ == "__main__":
    main()
