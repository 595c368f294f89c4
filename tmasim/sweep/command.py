"""The ``tmasim sweep`` subcommand: options, the run, and a short summary.

Imports nothing heavy at module level: ``tmasim --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from tmasim.values import format as fmt

EPILOG = """examples:
  tmasim sweep reference --vary pipeline.stages=1,2,3 --vary 'workload.load=1 us,3 us,7 us'
  tmasim sweep jitter --vary run.seed=1,2,3,4 --jobs 2 --out jitter.csv
  tmasim sweep reference --zip --vary workload.tiles=2,3 --vary 'workload.load=["3 us","3 us"],["3 us","3 us","3 us"]'
  tmasim sweep gemm-h100-cluster --vary 'pipeline.cluster=[1,1],[2,1]' --vary workload.multicast=none,b \
      --vary pipeline.stages=3,4 --zip pipeline.cluster,workload.multicast

Running the same command again resumes: finished points are read from --out, not recomputed.
A second sweep on the same --out while one runs is refused (FILE.lock holds the owner's pid)."""
BIG_SWEEP = 10_000


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sweep`` to the ``tmasim`` command's subparsers; returns its parser."""
    sweep = subparsers.add_parser("sweep", help="simulate a scenario over a grid of field values, one row per point",
                                  epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sweep_options(sweep)
    sweep.add_argument("--out", type=Path, help="result file, .parquet or .csv (default sweep-<name>.parquet)")
    sweep.set_defaults(handler=handle)
    return sweep


def zip_option(text: str) -> tuple[str, ...]:
    """``--zip A,B``: the fields to pair (checked against the --vary fields when the sweep is planned)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """The options of a sweep (the scenario, what varies, how and where it runs), for every command
    that runs one (``sweep``, ``report``): one definition, so they take the same options. The
    command adds its own ``--out``."""
    parser.add_argument("scenario", help="a scenario file, or the name of a bundled one")
    parser.add_argument("--vary", action="append", default=[], metavar="FIELD=V1,V2,...",
                        help="a field and its values, split on commas outside [], {} and quotes; repeat for a grid")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a field of the base scenario, as in `tmasim run`")
    parser.add_argument("--zip", nargs="?", const=True, default=False, type=zip_option, metavar="A,B",
                        help="pair the i-th values of every --vary instead of a grid; --zip A,B pairs only those "
                             "fields and crosses the pairs with the other --vary fields")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="worker processes, here or in the local Dask cluster (without --scheduler); default 1")
    parser.add_argument("--executor", choices=("local", "dask"), default="local", help="where points run")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="Dask scheduler address (default: start a local Dask cluster)")
    parser.add_argument("--search", action="store_true",
                        help="per problem, simulate points in order of their lower bound and stop where no point "
                             "left can change the answer (the same answer; the others are 'pruned' rows)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--yes", action="store_true",
                        help=f"run a sweep of more than {BIG_SWEEP:,} points or estimated to take over 15 min, and "
                             "points past a run's limits (without it, such a sweep is refused with its estimate)")


def handle(args: argparse.Namespace) -> int:
    from tmasim.estimates import budget
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


def failure_reason(error: Any) -> str:
    """What a failing point's message says with its numbers taken out: points that failed for the
    same reason (``pipeline.stages: N needs N KiB of shared memory...``) share it."""
    import re

    return re.sub(r"-?\d+(\.\d+)?", "N", str(error))


def failure_lines(frame: Any) -> list[str]:
    """Every failing point, grouped by reason: how many, which points, and the first one's message."""
    failed = frame[~frame["status"].isin(["ok", "pruned"])]
    if not len(failed):
        return []
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in failed.to_dict("records"):
        groups.setdefault(failure_reason(row["error"]), []).append(row)
    lines = [f"  {len(failed)} point{'s' if len(failed) != 1 else ''} did not run, by reason "
             f"({len(groups)} reason{'s' if len(groups) != 1 else ''}; the first point's message):"]
    for rows in sorted(groups.values(), key=lambda rows: (-len(rows), rows[0]["point"])):
        ids = [str(r["point"]) for r in rows]
        shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        lines.append(f"    {len(rows)} x {rows[0]['status']} (point{'s' if len(rows) != 1 else ''} {shown}): "
                     f"{rows[0]['error']}")
    return lines


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
        lines.append(f"  {fmt.plural(len(skipped), 'journal line')} did not parse and were skipped (line {shown}); "
                     "their points ran again")
    lines += failure_lines(frame)
    out = info.get("out")
    lines.append(f"  wrote {out}" if info.get("written") else f"  nothing new: {out} is unchanged")
    return "\n".join(lines)
