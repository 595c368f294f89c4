"""``tmasim validate`` and ``tmasim calibrate``: options, the run, a short report.

Imports nothing heavy at module level (``tmasim --help`` registers these subcommands).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tmasim.errors import ScenarioError, TmasimError

MAP_HELP = """column maps (--map COLUMN=FIELD[:UNIT], repeatable):
  The value in COLUMN becomes scenario field FIELD (a dotted name, as --set takes it) in that
  row's scenario; UNIT is appended to quantities: a cell 250 under --map latency_ns=workload.latency:ns
  sets workload.latency = "250 ns". Without a unit a cell is read as --set reads a value (a
  number, a TOML list such as "[64, 64]", else a string). GPU fields work too:
  --map l2_ns=gpu.copy_latency:ns. Rows whose mapped columns are equal are repeats of one
  point: their median is compared. Units: ns, us, ms, ps, cycles, B, KiB, MiB, GB/s, TB/s, ...

the backend's files (measured_runs.csv of validation/device_check.py, recognised by their
columns; --backend insists):
  each verified TMA run becomes a stream workload on the preset of the device in meta.json
  (h100-sxm, h200, b200; else give --set gpu=PRESET): a persistent grid of `ctas` CTAs
  (ceil(ctas / SMs) per SM), `stages` slots, `tiles_per_cta` float32 boxes of
  [tile_bytes / 256, 64] each, compute_per_byte = compute_iters x PS_PER_ITER_BYTE x 4 /
  consumer_warps. Measured: kernel_ns (median of repeats) against the simulated makespan_ns;
  --measure gbps --predict achieved_bytes_per_s compares bandwidths (units converted).
  sync_ld_st runs (no TMA) and failed runs are left out, with a note."""

VALIDATE_EPILOG = f"""examples:
  tmasim validate public          # the model on every public whole-pipeline table, against the baseline
  tmasim validate cutlass-profiler report.gemm.csv --gpu h100-sxm --set gpu.clock="1.755 GHz" --out joined.csv
                                  # cutlass_profiler --output's rows: error per kernel, the fastest picked?
  tmasim validate out/measured_runs.csv --out out/validation
  tmasim validate out/measured_runs.csv --measure gbps --predict achieved_bytes_per_s --where ctas=132
  tmasim validate times.csv --scenario reference --map stages=pipeline.stages \\
      --map load_us=workload.load:us --map compute_us=workload.compute:us --measure total_ns

{MAP_HELP}"""

CALIBRATE_EPILOG = f"""examples:
  tmasim calibrate out/measured_runs.csv --fit copy_latency,sm_port_bandwidth --out my-h100.toml
  tmasim calibrate out/measured_runs.csv --fit copy_latency,hbm_bandwidth,ps_per_iter_byte \\
      --holdout 0.3 --seed 1 --max-evals 60 --jobs 4 --out my-h200.toml
  then: tmasim validate out/measured_runs.csv --set gpu=my-h100.toml

fittable: copy_latency, copy_latency_per_kib, hbm_latency, tma_issue, tma_request_time,
cluster_arrive_latency, barrier_wake,
hbm_bandwidth, l2_bandwidth, sm_port_bandwidth, smem_bandwidth, l2_fit_size, l2_miss_scale
(GPU preset fields) and
ps_per_iter_byte (the backend map's compute constant). Each is fitted as its logarithm, to
minimize the squared log ratio of predicted to measured (a relative error), by
scipy's least_squares (trust region); one evaluation simulates every training point, a Jacobian takes one
per fitted field. An interrupted calibration resumes from OUT.simulations.jsonl.

{MAP_HELP}"""


def register(subparsers: Any) -> None:
    """Add ``validate`` and ``calibrate`` to the ``tmasim`` command's subparsers."""
    validate = subparsers.add_parser("validate", help="compare the simulator with a measured table: error per "
                                     "point and MAPE", epilog=VALIDATE_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _mapping_options(validate)
    validate.add_argument("profiler_csv", nargs="?", metavar="FILE.csv",
                          help="validate cutlass-profiler: the CUTLASS profiler's CSV (cutlass_profiler --output)")
    validate.add_argument("--gpu", metavar="PRESET",
                          help="validate cutlass-profiler: the GPU it ran on (default: sm90 h100-sxm, sm100 b200)")
    validate.add_argument("--out", type=Path, metavar="DIR",
                          help="folder for validation.csv/.json and the figures (default validate-<file stem>); "
                               "validate cutlass-profiler: the joined table to write (FILE.csv)")
    validate.add_argument("--tiles", type=Path, metavar="FILE",
                          help="the backend's per-tile table (default: measured_tiles.csv beside MEASURED)")
    validate.add_argument("--timeline-run", type=int, metavar="RUN_ID",
                          help="the recorded run to overlay (default: a pipelined run with compute, most CTAs)")
    validate.add_argument("--json", action="store_true",
                          help="validate public: print the figures as JSON")
    validate.add_argument("--ci-subset", action="store_true",
                          help="validate public: the whole-chip table's CI subset only (288 of its 576 runs, the "
                               "shapes quickest to simulate), as the test suite runs it")
    validate.add_argument("--update-baseline", action="store_true",
                          help="validate public: commit these figures as the new baseline "
                               "(validation/public/results/pipelines.json)")
    validate.set_defaults(handler=handle_validate)

    calibrate = subparsers.add_parser("calibrate", help="fit GPU preset parameters to a measured table; write a "
                                      "preset", epilog=CALIBRATE_EPILOG,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
    _mapping_options(calibrate)
    calibrate.add_argument("--fit", required=True, metavar="FIELD,FIELD...",
                           help="the fields to fit, comma-separated (e.g. copy_latency,sm_port_bandwidth)")
    calibrate.add_argument("--holdout", type=float, default=0.25, metavar="FRACTION",
                           help="fraction of the points held out of the fit to test it (default 0.25)")
    calibrate.add_argument("--seed", type=int, default=0, help="seed of the holdout's random choice (default 0)")
    calibrate.add_argument("--max-evals", type=int, default=40, metavar="N",
                           help="at most N evaluations, each simulating every training point (default 40)")
    calibrate.add_argument("--out", type=Path, required=True, metavar="PRESET.toml",
                           help="the calibrated preset to write (use it as gpu = \"PRESET.toml\")")
    calibrate.set_defaults(handler=handle_calibrate)


def _mapping_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("measured", metavar="MEASURED", help="a measured table (.csv, .csv.gz, .parquet)")
    parser.add_argument("--scenario", metavar="BASE",
                        help="base scenario, file or bundled name (default: the backend's stream scenario for "
                             "the backend's files, else reference)")
    parser.add_argument("--map", dest="maps", action="append", default=[], metavar="COLUMN=FIELD[:UNIT]",
                        help="set FIELD from COLUMN in each row's scenario (see below); repeatable")
    parser.add_argument("--measure", metavar="COLUMN[:UNIT]",
                        help="the measured column (backend default kernel_ns); a unit converts it to --predict's")
    parser.add_argument("--predict", default="makespan_ns", metavar="STAT",
                        help="the simulated summary figure to compare (default makespan_ns)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a field of the base scenario, as in `tmasim run` (e.g. gpu=h200)")
    parser.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                        help="keep only rows whose COLUMN equals VALUE; repeatable")
    parser.add_argument("--backend", action="store_true", default=None,
                        help="insist that MEASURED is the backend's measured_runs.csv (else detected)")
    parser.add_argument("--ps-per-iter-byte", default=None, metavar="TIME",
                        help="backend map: time per FMA iteration per byte at 4 consumer warps (default 3.95 ps)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def options_from(args: argparse.Namespace) -> Any:
    from tmasim.validation.mapping import DEFAULT_PS_PER_ITER_BYTE
    from tmasim.validation.study import Options

    per_iter = DEFAULT_PS_PER_ITER_BYTE
    if args.ps_per_iter_byte is not None:
        from tmasim.values import fields

        per_iter = fields.quantity("--ps-per-iter-byte", args.ps_per_iter_byte, "time")
    return Options(scenario=args.scenario, maps=args.maps, measure=args.measure, predict=args.predict,
                   overrides=args.overrides, where=args.where, backend=args.backend, ps_per_iter_byte=per_iter)


def handle_validate(args: argparse.Namespace) -> int:
    from tmasim.validation.compare import validate

    if str(args.measured) == "cutlass-profiler" and not Path("cutlass-profiler").exists():
        return handle_cutlass_profiler(args)
    if args.profiler_csv is not None or args.gpu is not None:
        raise TmasimError(f"validate: {args.profiler_csv or '--gpu'}: a second file and --gpu are for "
                          "`tmasim validate cutlass-profiler FILE.csv --gpu PRESET`")
    if str(args.measured) == "public" and not Path("public").exists():
        from tmasim.validation import public_command

        return public_command.handle(args)
    out = args.out if args.out is not None else Path(f"validate-{_stem(args.measured)}")
    if out.exists() and not out.is_dir():
        raise TmasimError(f"--out: {str(out)!r} exists and is not a directory")
    from tmasim.output.paths import check_folder

    check_folder("--out", out)  # before any simulation: a folder that cannot be written is one line
    journal = out / "simulations.jsonl"
    result = validate(args.measured, options_from(args), jobs=args.jobs, tiles=args.tiles,
                      timeline_run=args.timeline_run, journal=journal, progress=not args.quiet)
    print(result.text())
    written = result.save(out)
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def handle_cutlass_profiler(args: argparse.Namespace) -> int:
    from tmasim.output.paths import check_file, check_suffix
    from tmasim.validation import cutlass_profiler as profiler

    if args.profiler_csv is None:
        raise TmasimError("validate cutlass-profiler: give the profiler's CSV: tmasim validate cutlass-profiler "
                          "FILE.csv [--gpu PRESET] [--set gpu.clock=...] [--out JOINED.csv]")
    if args.out is not None:
        check_suffix("--out", args.out, (".csv",))
        check_file("--out", args.out)  # before any simulation
    rows, notes = profiler.read(args.profiler_csv)
    done = []
    for i, row in enumerate(rows, start=1):
        if not args.quiet:
            print(f"\rsimulating row {i} of {len(rows)}", end="", file=sys.stderr, flush=True)
        done.append(profiler.simulate_row(row, args.gpu, args.overrides))
    if not args.quiet:
        print(file=sys.stderr)
    print(profiler.text(done, notes))
    if args.out is not None:
        print(f"wrote {profiler.write(done, args.out)}", file=sys.stderr)
    return 0


def handle_calibrate(args: argparse.Namespace) -> int:
    from tmasim.validation.calibration import calibrate, stderr_say

    if args.out.suffix != ".toml":
        raise ScenarioError("--out", str(args.out), "must be a preset file ending in .toml")
    if args.out.is_dir():
        raise TmasimError(f"--out: {str(args.out)!r} is a directory")
    from tmasim.output.paths import check_file

    check_file("--out", args.out)  # before the fit, not after it
    fit = [name.strip() for name in args.fit.split(",") if name.strip()]
    journal = args.out.with_name(f"{args.out.stem}.simulations.jsonl")
    longer = len(os.fsencode(journal.name))
    if longer > 255:  # found before the fit, not when the journal is opened
        raise TmasimError(f"--out: a name of {len(os.fsencode(args.out.name))} bytes is too long: calibrate's "
                          f"journal beside it, STEM.simulations.jsonl, would be {longer} bytes, over the 255 a file "
                          "system takes")
    result = calibrate(args.measured, fit, options_from(args), holdout=args.holdout, seed=args.seed,
                       max_evals=args.max_evals, jobs=args.jobs, journal=journal,
                       say=None if args.quiet else stderr_say)
    print(result.text())
    path = result.write_preset(args.out)
    print(f"wrote {path} (use it as gpu = \"{path}\", or --set gpu={path})", file=sys.stderr)
    return 0


def _stem(path: str) -> str:
    name = Path(path).name
    for suffix in (".csv.gz", ".csv", ".parquet"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem
