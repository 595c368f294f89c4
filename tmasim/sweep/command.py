"""The ``tmasim sweep`` subcommand: options, the run, and a short summary.

Imports nothing heavy at module level: ``tmasim --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

EPILOG = """examples:
  tmasim sweep reference --vary pipeline.stages=1,2,3 --vary 'workload.load=1 us,3 us,7 us'
  tmasim sweep jitter --vary run.seed=1,2,3,4 --jobs 2 --out jitter.csv
  tmasim sweep reference --zip --vary workload.tiles=2,3 --vary 'workload.load=["3 us","3 us"],["3 us","3 us","3 us"]'

Running the same command again resumes: finished points are read from --out, not recomputed.
A second sweep on the same --out while one runs is refused (FILE.lock holds the owner's pid)."""
BIG_SWEEP = 10_000


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sweep`` to the ``tmasim`` command's subparsers; returns its parser."""
    sweep = subparsers.add_parser("sweep", help="simulate a scenario over a grid of field values, one row per point",
                                  epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sweep.add_argument("scenario", help="a scenario file, or the name of a bundled one")
    sweep.add_argument("--vary", action="append", default=[], metavar="FIELD=V1,V2,...",
                       help="a field and its values, split on commas outside [], {} and quotes; repeat for a grid")
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                       help="override a field of the base scenario, as in `tmasim run`")
    sweep.add_argument("--zip", action="store_true", help="pair the i-th values of every --vary instead of a grid")
    sweep.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="worker processes, here or in the local Dask cluster (without --scheduler); default 1")
    sweep.add_argument("--out", type=Path, help="result file, .parquet or .csv (default sweep-<name>.parquet)")
    sweep.add_argument("--executor", choices=("local", "dask"), default="local", help="where points run")
    sweep.add_argument("--scheduler", metavar="ADDRESS",
                       help="Dask scheduler address (default: start a local Dask cluster)")
    sweep.add_argument("--search", action="store_true",
                       help="per problem, simulate points in order of their lower bound and stop where no point "
                            "left can change the answer (the same answer; the others are 'pruned' rows)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.add_argument("--yes", action="store_true",
                       help=f"run a sweep of more than {BIG_SWEEP:,} points or estimated to take over 15 min, and "
                            "points past a run's limits (without it, such a sweep is refused with its estimate)")
    sweep.set_defaults(handler=handle)
    return sweep


def handle(args: argparse.Namespace) -> int:
    from tmasim import budget
    from tmasim.sweep import estimate
    from tmasim.sweep.runner import default_out, run_sweep

    out = args.out if args.out is not None else default_out(args.scenario, args.overrides)
    start = time.perf_counter()
    try:
        frame = run_sweep(args.scenario, args.overrides, args.vary, zip_=args.zip, jobs=args.jobs, out=out,
                          executor=args.executor, scheduler=args.scheduler, progress=not args.quiet,
                          max_points=None if args.yes else BIG_SWEEP,
                          max_seconds=None if args.yes else estimate.LIMIT_SECONDS, allow_large=args.yes,
                          notify=budget.command_line(args.yes).notify, search=args.search)
    except KeyboardInterrupt:
        if out.exists():
            print(f"tmasim: finished points are in {out}; run the same command again to resume", file=sys.stderr)
        raise
    print(summary(frame, time.perf_counter() - start))
    print(answer_text(frame))
    return 0


def answer_text(frame: Any) -> str:
    """The short table and the answer: best point, knee, what binds there, the next step's cost."""
    from tmasim.sweep import answer

    return answer.summary(frame)


def summary(frame: Any, seconds: float) -> str:
    """Counts by status, time, and where the table went."""
    info = frame.attrs.get("sweep", {})
    counts = frame["status"].value_counts()
    by_status = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "invalid", "error"))
    if counts.get("pruned", 0):
        by_status += f", {counts['pruned']} pruned by their bounds"
    lines = [f"sweep of {info.get('source')}: {len(frame)} points ({by_status}) in {seconds:.1f} s"]
    if info.get("resumed"):
        lines.append(f"  {info['resumed']} read from an earlier run, {info['computed']} computed now")
    skipped = info.get("journal_lines_skipped") or []
    if skipped:
        shown = ", ".join(map(str, skipped[:5])) + (", ..." if len(skipped) > 5 else "")
        lines.append(f"  {len(skipped)} journal line(s) did not parse and were skipped (line {shown}); "
                     "their points ran again")
    failed = frame[~frame["status"].isin(["ok", "pruned"])]
    if len(failed):
        first = failed.iloc[0]
        lines.append(f"  first failure, point {first['point']}: {first['error']}")
    out = info.get("out")
    lines.append(f"  wrote {out}" if info.get("written") else f"  nothing new: {out} is unchanged")
    return "\n".join(lines)
