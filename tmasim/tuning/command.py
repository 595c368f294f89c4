"""The ``tmasim tune`` subcommand: options, the search, and what it found.

Imports nothing heavy at module level: ``tmasim --help`` must stay fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EPILOG = """examples:
  tmasim tune gemm-h100
  tmasim tune gemm-h100 --set workload.m=4096 --set workload.n=4096 --set workload.k=4096 --jobs 2 --out tune.csv
  tmasim tune attention-h100 --set workload.seqlen_q=2048

The space: tiles, stage counts that fit, clusters up to 2x2 with each multicast, 2-SM pairs on
Blackwell, rasters (GEMM; --wide adds clusters up to the GPU's limit, the launch, stream-K and
split-K); tiles, stages, consumer warpgroups and their mode, softmax overlap (attention). A field
given with --set stays as given. Running the same command again with --out resumes from the file."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``tune`` to the ``tmasim`` command's subparsers; returns its parser."""
    tune = subparsers.add_parser("tune", help="search a scenario's whole design space for its best design",
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    tune.add_argument("scenario", help="a scenario file, or the name of a bundled one (gemm or attention)")
    tune.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                      help="override a field of the scenario first (its problem: workload.m=4096 ...)")
    tune.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes; default 1")
    tune.add_argument("--out", type=Path, help="write every valid point (.parquet or .csv): simulated rows, and "
                                               "pruned ones with their bound")
    tune.add_argument("--wide", action="store_true", help="a GEMM's wide space: clusters up to the GPU's limit, "
                                                           "grid and persistent launches, stream-K and split-K")
    tune.add_argument("--quiet", action="store_true", help="no progress bar")
    tune.add_argument("--yes", action="store_true", help="run a search estimated to take over 15 min, and points "
                                                          "past a run's limits")
    tune.set_defaults(handler=handle)
    return tune


def handle(args: argparse.Namespace) -> int:
    from tmasim.estimates import budget
    from tmasim.sweep import estimate
    from tmasim.tuning.run import tune

    result = tune(args.scenario, args.overrides, jobs=args.jobs, out=args.out, progress=not args.quiet,
                  allow_large=args.yes, max_seconds=None if args.yes else estimate.LIMIT_SECONDS,
                  notify=budget.command_line(args.yes).notify, wide=args.wide)
    print(result.text())
    if args.out is not None:
        written = result.frame.attrs.get("sweep", {}).get("written")
        print(f"  wrote {args.out}" if written else f"  nothing new: {args.out} is unchanged")
    return 0
