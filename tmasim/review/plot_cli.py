"""The ``tmasim plot`` and ``tmasim report`` subcommands: options, and reading a result back.

Imports nothing heavy at module level (``tmasim --help`` must stay fast). Errors a user can
cause (a kind that does not fit the result, a missing column, a run without records) are
:class:`~tmasim.errors.TmasimError`: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import TmasimError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

KINDS = ("stage-sweep", "gantt", "slots", "bandwidth", "stalls", "heatmap")
SWEEP_KINDS = ("stage-sweep", "heatmap")
RUN_KINDS = ("gantt", "slots", "bandwidth")
MAX_GANTT_SPANS = 20_000  # a Gantt of the whole run past this many spans is zoomed to its first tiles (_zoom)

PLOT_EPILOG = """examples:
  tmasim sweep latency-hidden --vary pipeline.stages=1,2,4,6,8 --out lat.parquet
  tmasim plot lat.parquet --kind stage-sweep                  # -> lat-stage-sweep.png
  tmasim plot lat.parquet --kind stalls --out stalls.svg
  tmasim run gemm-h100 --set run.records=true --out out/gemm
  tmasim plot out/gemm --kind gantt --first-tiles 12          # -> out/gemm/gantt.png
  tmasim plot out/gemm --kind gantt --window "0 us..5 us"     # or --from "0 us" --to "5 us"
  tmasim plot out/gemm --kind bandwidth"""

REPORT_EPILOG = """examples:
  tmasim report reference --vary pipeline.stages=1,2,3,4 --out review/
  tmasim report gemm-h100 --vary pipeline.stages=2,3,4 --vary 'workload.tile=[128,128,64],[128,256,64]' \\
      --out review-gemm --jobs 4"""


def tile_count(text: str) -> int:
    """``--first-tiles N``: a whole number >= 1 (0 or -3 tiles is no zoom at all)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number of tiles") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1 (the first N tiles of every CTA)")
    return value


def register(subparsers: Any) -> None:
    """Add ``plot`` and ``report`` to the ``tmasim`` command's subparsers."""
    register_plot(subparsers)
    register_report(subparsers)


def register_plot(subparsers: Any) -> argparse.ArgumentParser:
    plot = subparsers.add_parser("plot", help="draw one figure from a sweep file or a `tmasim run --out` folder",
                                 epilog=PLOT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    plot.add_argument("result", type=Path, help="a sweep file (.parquet or .csv) or a `tmasim run --out` folder")
    plot.add_argument("--kind", choices=KINDS, help="which figure (default: the natural one for RESULT: gantt for a "
                                                    "run folder with records, else stalls; stage-sweep for a sweep of "
                                                    "one field, heatmap for two)")
    plot.add_argument("--x", help="stage-sweep, heatmap: the varied field across (default pipeline.stages / "
                                  "the first varied field)")
    plot.add_argument("--y", help="stage-sweep: the column up the axis (default makespan_ns; a throughput such as "
                                  "achieved_flops_per_s works too); heatmap: the second varied field")
    plot.add_argument("--value", default="makespan_ns", help="heatmap: the column coloured (default makespan_ns)")
    plot.add_argument("--window", metavar="START..END", help="gantt: zoom to this time range, each end with its "
                                                             "unit (\"0 us..5 us\")")
    plot.add_argument("--from", dest="start", metavar="TIME", help="gantt: zoom from this time (\"2 us\"; default 0)")
    plot.add_argument("--to", dest="end", metavar="TIME", help="gantt: zoom to this time (\"5 us\")")
    plot.add_argument("--first-tiles", type=tile_count, metavar="N",
                      help="gantt: zoom to the first N tiles of every CTA")
    plot.add_argument("--shares", action="store_true", help="stalls: percent of each makespan instead of time")
    plot.add_argument("--title", default="", help="replace the figure's title")
    plot.add_argument("--out", type=Path, help="figure file, .png or .svg (default: beside RESULT, named by kind)")
    plot.add_argument("--svg", action="store_true", help="also write an SVG beside the PNG")
    plot.add_argument("--yes", action="store_true",
                      help="draw it even if reading RESULT is estimated (from its files' sizes) to take long or "
                           "much memory (see Resource limits in the sweeps guide); without it such a plot is refused "
                           "before it reads anything")
    plot.set_defaults(handler=handle_plot)
    return plot


def register_report(subparsers: Any) -> argparse.ArgumentParser:
    report = subparsers.add_parser("report", help="write a self-contained HTML design review of a scenario",
                                   epilog=REPORT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    from tmasim.sweep.command import add_sweep_options

    add_sweep_options(report)  # every option of `tmasim sweep`, for the sweep the report runs (--vary)
    report.add_argument("--out", type=Path, required=True, help="folder for index.html, its tables and figures")
    report.add_argument("--sweep-out", type=Path, metavar="FILE",
                        help="also keep the sweep's table in FILE (.parquet or .csv), resumable as `tmasim sweep "
                             "--out` (the report's folder holds a copy either way)")
    report.add_argument("--first-tiles", type=tile_count, default=None, metavar="N",
                        help="zoom the Gantt chart to the first N tiles of every CTA (default: automatic)")
    report.set_defaults(handler=handle_report)
    return report


# ------------------------------------------------------------------------------------- plot


@dataclass(frozen=True)
class LoadedResult:
    """A result read back from disk: a sweep table, or a run's tables (summary as a one-row table)."""

    path: Path
    is_sweep: bool
    table: pd.DataFrame
    spans: pd.DataFrame | None = None
    events: pd.DataFrame | None = None
    bandwidth: pd.DataFrame | None = None


def handle_plot(args: argparse.Namespace) -> int:
    out = args.out
    if out is not None and out.suffix.lower() not in ("", ".png", ".svg"):
        raise TmasimError(f"--out: {str(out)!r} must end in .png or .svg (or have no suffix: .png is added)")
    check_title(args.title)
    if out is not None:
        check_figure_paths(out, svg=args.svg)
    check_cost(args.result, args.kind, yes=args.yes)
    result = load_result(args.result)
    if args.kind is None:
        args.kind = default_kind(result, args)
        print(f"no --kind: drawing {args.kind}, the default for {str(args.result)!r} (others: --kind "
              f"{', '.join(k for k in kinds_for(result) if k != args.kind) or 'none'})", file=sys.stderr)
    check_kind(args.kind, result)
    if out is None:
        out = default_out(result, args.kind)
        check_figure_paths(out, svg=args.svg)
    fig = build_figure(args, result)
    from tmasim.review import plots

    try:
        written = plots.save(fig, out, svg=args.svg, trust=table_trust(result.table))
    except OSError as err:
        raise TmasimError(f"--out: cannot write {str(out)!r} ({err.strerror or err})") from None
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0


def check_cost(path: Path, kind: str | None, *, yes: bool) -> None:
    """A run folder's plot, estimated from its files' sizes before any is read (a folder of
    300,000 tiles holds 2.7 million rows): past :mod:`tmasim.estimates.budget`'s limits it is refused unless
    ``yes``, and a large one is noted first. Sweep tables are a row per point, held to the sweep's
    own limits."""
    from tmasim.estimates import budget

    if not path.is_dir():
        return
    names = ("spans.csv", "events.csv", "bandwidth.csv")
    sizes = {name: (path / name).stat().st_size for name in names if (path / name).is_file()}
    if not sizes:
        return
    rows = sum(sizes.values()) // budget.CSV_ROW_BYTES
    estimate = budget.plot_estimate(rows, kind or "gantt", files=" and ".join(sizes))
    budget.check(estimate, budget.command_line(yes, what="plot"))


def check_figure_paths(out: Path, *, svg: bool) -> None:
    """Before the figure is drawn: the PNG (or SVG) and, with --svg, the SVG beside it."""
    from tmasim.output.paths import check_file

    if not out.name or out.name in (".", "..") or out.is_dir():
        check_file("--out", out)  # a folder, refused as every --out refuses one
        raise TmasimError(f"--out: {str(out)!r} is a directory: name the figure's file (e.g. {out / 'figure.png'})")
    out = out if out.suffix else out.with_name(out.name + ".png")
    check_file("--out", out)
    if svg and out.suffix.lower() != ".svg":
        check_file("--out", out.with_suffix(".svg"))


def check_title(title: str) -> None:
    """Math text (``$...$``) that matplotlib cannot parse would fail only when the figure is
    saved, with the parser's traceback: refused first, in one line."""
    from matplotlib import cbook

    if not title or not cbook.is_math_text(title):
        return
    from matplotlib.mathtext import MathTextParser

    try:
        MathTextParser("path").parse(title, 72)
    except ValueError as err:
        lines = str(err).splitlines()
        where = f" (at {lines[1].strip()[:40]!r})" if len(lines) > 1 and lines[1].strip() else ""
        raise TmasimError(f"--title: {title[:80]!r} has math text matplotlib cannot draw{where}; fix the $...$ part "
                          "or write a plain dollar sign as \\$") from None


def load_result(path: Path) -> LoadedResult:
    """A sweep file by its suffix, a run folder by its summary.csv; anything else is refused."""
    import pandas as pd

    from tmasim.review.columns import read_csv, varied_fields

    if path.is_dir():
        summary = path / "summary.csv"
        if not summary.exists():
            raise TmasimError(f"RESULT: {str(path)!r} is a folder without summary.csv; give a `tmasim run --out` "
                              "folder or a sweep file")
        try:
            loaded = LoadedResult(path, False, read_csv(summary), _optional_csv(path / "spans.csv"),
                                  _optional_csv(path / "events.csv"), _optional_csv(path / "bandwidth.csv"))
        except (OSError, ValueError) as err:
            raise TmasimError(f"RESULT: {str(path)!r} cannot be read ({' '.join(str(err).split())})") from None
        _check_run_tables(loaded)
        return loaded
    if not path.exists():
        raise TmasimError(f"RESULT: {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise TmasimError(f"RESULT: {str(path)!r} is neither a sweep file (.parquet, .csv) nor a run folder")
    try:
        table = pd.read_parquet(path) if suffix == ".parquet" else read_csv(path)
    except (OSError, ValueError) as err:
        raise TmasimError(f"RESULT: {str(path)!r} cannot be read ({err})") from None
    for column in varied_fields(table):  # list columns come back as arrays: tuples group and label
        if table[column].map(lambda v: getattr(v, "ndim", 0) > 0).any():
            table[column] = table[column].map(lambda v: tuple(v.tolist()) if getattr(v, "ndim", 0) > 0 else v)
    if "status" not in table.columns:
        raise TmasimError(f"RESULT: {str(path)!r} is not a tmasim sweep table (no status column)")
    _check_table(table, path, sweep=True)
    if not (table["status"] == "ok").any():
        counts = ", ".join(f"{n} {status}" for status, n in table["status"].value_counts().items()) or "no points"
        raise TmasimError(f"RESULT: no point of {str(path)!r} ran ({counts}); there is nothing to plot")
    if "makespan_ns" not in table.columns:
        raise TmasimError(f"RESULT: {str(path)!r} is not a tmasim sweep table (no makespan_ns column)")
    return LoadedResult(path, True, table)


def _check_run_tables(result: LoadedResult) -> None:
    """Each table of a run folder, row by row: a damaged one is refused with its file and line."""
    tables = {"summary.csv": result.table, "spans.csv": result.spans, "events.csv": result.events,
              "bandwidth.csv": result.bandwidth}
    for name, frame in tables.items():
        if frame is not None:
            _check_table(frame, result.path / name, sweep=False)


def _check_table(frame: pd.DataFrame, path: Path, *, sweep: bool) -> None:
    from tmasim.output.read_back import check_table

    try:
        check_table(frame, path, sweep=sweep)
    except ValueError as err:
        raise TmasimError(f"RESULT: {str(path)!r} is damaged at {err}; tmasim draws nothing from it") from None


def _optional_csv(path: Path) -> pd.DataFrame | None:
    import pandas as pd

    if not path.exists():
        return None
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ValueError(f"{path.name}: {err}") from None


def kinds_for(result: LoadedResult) -> list[str]:
    """The figures this result can give."""
    if result.is_sweep:
        return ["stage-sweep", "stalls", "heatmap"]
    records = result.spans is not None and not result.spans.empty
    has_bandwidth = result.bandwidth is not None and not result.bandwidth.empty
    return [*(["gantt", "slots"] if records else []), *(["bandwidth"] if has_bandwidth else []), "stalls"]


def default_kind(result: LoadedResult, args: argparse.Namespace) -> str:
    """The natural figure for a result given without --kind: a run's Gantt (its stalls without
    records); a sweep's curve over its one varied field, or its heatmap over two. Where none is
    natural, a one-line error lists the kinds."""
    if not result.is_sweep:
        return kinds_for(result)[0]
    from tmasim.review.columns import varied_fields

    varied = varied_fields(result.table)
    if len(varied) == 1:
        args.x = args.x or varied[0]
        return "stage-sweep"
    if len(varied) == 2:
        return "heatmap"
    if "pipeline.stages" in varied:
        return "stage-sweep"
    raise TmasimError(f"--kind: {str(result.path)!r} varies {len(varied)} fields ({', '.join(varied) or 'none'}), "
                      f"so no figure is the natural one; give --kind {' or '.join(kinds_for(result))} (with --x)")


def check_kind(kind: str, result: LoadedResult) -> None:
    """Refuse, in one line, a figure the result cannot give."""
    what = "a sweep table" if result.is_sweep else "a single run"
    if kind in SWEEP_KINDS and not result.is_sweep:
        raise TmasimError(f"--kind {kind} needs a sweep file (tmasim sweep ... --out FILE); RESULT is {what}")
    if kind in RUN_KINDS and result.is_sweep:
        raise TmasimError(f"--kind {kind} needs a `tmasim run --out` folder; RESULT is {what} (sweeps keep no "
                          "per-event records)")
    if kind in ("gantt", "slots") and (result.spans is None or result.spans.empty):
        raise TmasimError(f"--kind {kind}: {str(result.path)!r} has no per-event records; run it again with "
                          "--set run.records=true")
    if kind == "bandwidth" and (result.bandwidth is None or result.bandwidth.empty):
        raise TmasimError(f"--kind bandwidth: {str(result.path)!r} has no bandwidth.csv (written by `tmasim run "
                          "--out` for gemm and stream workloads, whose copies share L2, HBM and SM ports)")


def table_trust(table: pd.DataFrame) -> str | None:
    """The trust line of a result read back: its rows' ``validated`` lines (one per distinct line,
    joined), or, for a table written before that column, what the rows' workload and preset give."""
    from tmasim.output.trust import trust_for_row

    rows = table[table["status"] == "ok"] if "status" in table.columns else table
    if "validated" in rows.columns:
        lines = [str(v) for v in rows["validated"].dropna().unique()]
    else:
        lines = list(dict.fromkeys(line for line in (trust_for_row(r) for r in rows.to_dict("records")) if line))
    return _joined(lines) or None


def _joined(lines: list[str]) -> str:
    """Distinct trust lines joined; a last clause they all end with (the table's error over all its
    runs, say) said once, at the end."""
    tails = {line.rpartition("; ")[2] for line in lines}
    if len(lines) < 2 or len(tails) != 1 or not all("; " in line for line in lines):
        return "; ".join(lines)
    return "; ".join(line.rpartition("; ")[0] for line in lines) + "; " + tails.pop()


def build_figure(args: argparse.Namespace, result: LoadedResult) -> Figure:
    """The figure for ``args.kind``; a named column that is missing is a one-line error."""
    from tmasim.review import plots

    table = result.table
    try:
        if args.kind == "stage-sweep":
            y = args.y or "makespan_ns"
            _numeric(table, y, "--y")
            return plots.stage_sweep(table, x=args.x or "pipeline.stages", y=y, title=args.title)
        if args.kind == "heatmap":
            x, y = _heatmap_axes(table, args.x, args.y)
            _numeric(table, args.value, "--value")
            return plots.heatmap(table, x, y, args.value, title=args.title)
        if args.kind == "stalls":
            return plots.stall_breakdown(table, title=args.title, shares=args.shares)
        return _timeline(args, result)
    except KeyError as err:
        raise TmasimError(f"--kind {args.kind}: {err.args[0] if err.args else err}") from None
    except (ValueError, TypeError) as err:  # a column of the wrong kind in a hand-edited file
        raise TmasimError(f"--kind {args.kind}: cannot draw {str(result.path)!r} "
                          f"({' '.join(str(err).split())[:200]})") from None


def _numeric(table: pd.DataFrame, column: str, option: str) -> None:
    """A plotted value must be a number: ``--y status`` is refused, naming numeric columns."""
    import pandas as pd

    if column in table.columns and not pd.api.types.is_numeric_dtype(table[column].dtype) \
            or column in table.columns and pd.api.types.is_bool_dtype(table[column].dtype):
        numeric = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c].dtype)
                   and not pd.api.types.is_bool_dtype(table[c].dtype) and c.endswith(("_ns", "_per_s"))]
        raise TmasimError(f"{option}: column {column!r} is not numeric (it holds "
                          f"{', '.join(map(str, table[column].dropna().unique()[:3]))}); "
                          f"choose one of {', '.join(numeric[:6])}")


def _heatmap_axes(table: pd.DataFrame, x: str | None, y: str | None) -> tuple[str, str]:
    from tmasim.review.columns import varied_fields

    varied = varied_fields(table)
    rest = [f for f in varied if f not in (x, y)]
    x = x or (rest.pop(0) if rest else None)
    y = y or (rest.pop(0) if rest else None)
    if x is None or y is None:
        raise TmasimError(f"--kind heatmap needs two varied fields; this sweep varies {', '.join(varied) or 'none'} "
                          "(sweep a grid: --vary A=... --vary B=...)")
    return x, y


def _timeline(args: argparse.Namespace, result: LoadedResult) -> Figure:
    from tmasim.review import plots

    title = args.title or _run_title(result.table)
    if args.kind == "bandwidth":
        assert result.bandwidth is not None
        return plots.bandwidth(result.bandwidth, title=title)
    assert result.spans is not None
    if args.kind == "slots":
        scenario = str(result.table.iloc[0].get("scenario", ""))
        return plots.slot_occupancy(result.spans, title=args.title, scenario=scenario)
    events = result.events if result.events is not None else result.spans.iloc[0:0]
    window = _window(args)
    note = plots.representatives_note(result.table.iloc[0].to_dict())
    tiles = args.first_tiles if window is not None or args.first_tiles is not None else _zoom(result.spans)
    return plots.gantt(result.spans, events, title=title, window=window, tiles=tiles, note=note)


def _zoom(spans: pd.DataFrame) -> int | None:
    """A whole-run Gantt of more than :data:`MAX_GANTT_SPANS` bars is drawn zoomed to the first
    tiles of each CTA (as ``run --out`` draws it), said on stderr: a million bars are a smear a
    minute long to draw, wider than the figure has pixels."""
    from tmasim.review import plots

    tiles = plots.suggested_tiles(spans) if len(spans) > MAX_GANTT_SPANS else None
    if tiles is not None:
        print(f"tmasim: note: {len(spans):,} spans are too many to draw one by one; drawing the first {tiles} "
              f"{plots.step_noun(spans)} of each CTA (--first-tiles N or --window START..END to choose)",
              file=sys.stderr)
    return tiles


def _run_title(summary: pd.DataFrame) -> str:
    from tmasim.values import format as fmt
    from tmasim.workloads.summary_rows import plural

    row = summary.iloc[0]
    return (f"{row.get('scenario', 'run')}: {fmt.time_ns(row['makespan_ns'], unicode=True)} "
            f"with {plural(row['stages'], 'stage') if 'stages' in row else '? stages'} on {row.get('gpu', '?')}")


def _window(args: argparse.Namespace) -> tuple[float, float] | None:
    if args.window and (args.start or args.end):
        raise TmasimError("--window: give either --window START..END or --from/--to, not both")
    if args.window:
        return parse_window(args.window)
    if args.start or args.end:
        return window_from(args.start, args.end)
    return None


def parse_window(text: str) -> tuple[float, float]:
    """``START..END``, each a time with its unit (``0 us..5 us``; a bare 0 may stand alone): a
    range that cannot be misread, unlike ``0,5 us`` (is the 0 in ps or in µs?)."""
    start, sep, end = text.partition("..")
    if not sep or not start.strip() or not end.strip():
        raise TmasimError(f"--window: {text!r} must be START..END with units, e.g. \"0 us..5 us\" "
                          "(or give --from and --to)")
    return window_from(start, end, "--window")


def window_from(start: str | None, end: str | None, where: str = "--from/--to") -> tuple[float, float]:
    """The zoom range in ps from two times with units; a missing start is 0."""
    if end is None:
        raise TmasimError(f"{where}: --to END is needed with --from (a time with its unit, e.g. --to \"5 us\")")
    lo, hi = _time(start or "0", where), _time(end, where)
    if not hi > lo >= 0:
        raise TmasimError(f"{where}: {_range_text(start or '0', end)} must have 0 <= START < END")
    return lo, hi


def _range_text(start: str, end: str) -> str:
    return f"{start.strip()!r} to {end.strip()!r}"


def _time(text: str, where: str) -> float:
    from tmasim.values.units import time_ps

    text = text.strip()
    if text in ("0", "0.0"):
        return 0.0
    try:
        float(text)
    except ValueError:
        return float(time_ps(text, where))
    raise TmasimError(f"{where}: {text!r} needs a unit (ps, ns, us, ms), so that it cannot be misread")


def default_out(result: LoadedResult, kind: str) -> Path:
    """Inside a run folder: KIND.png; beside a sweep file: STEM-KIND.png."""
    if result.is_sweep:
        return result.path.with_name(f"{result.path.stem}-{kind}.png")
    return result.path / f"{kind}.png"


# ----------------------------------------------------------------------------------- report


def handle_report(args: argparse.Namespace) -> int:
    sweep = SweepOptions(zip_=args.zip, executor=args.executor, scheduler=args.scheduler, search=args.search,
                         out=args.sweep_out, progress=not args.quiet)
    index = build_report(args.scenario, args.overrides, args.vary, args.out, jobs=args.jobs,
                         first_tiles=args.first_tiles, yes=args.yes, sweep=sweep)
    print(f"wrote {index}", file=sys.stderr)
    return 0


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """How a report's sweep runs: the options of ``tmasim sweep`` beyond what varies (see
    :func:`tmasim.sweep.run_sweep`); ``out`` keeps its table, resumable."""

    zip_: bool | tuple[str, ...] = False
    executor: str = "local"
    scheduler: str | None = None
    search: bool = False
    out: Path | None = None
    progress: bool = False


def build_report(scenario: str | Path | None, overrides: Sequence[str] = (), vary: Sequence[str] = (),
                 out: str | Path = "report", *, jobs: int = 1, first_tiles: int | None = None,
                 yes: bool = False, sweep: SweepOptions | None = None) -> Path:
    """Run what the report shows (the scenario with records on; the sweep if fields vary, as
    ``sweep`` says), then let :func:`tmasim.review.report.write_report` draw ``out/index.html``
    from the results.

    Under the limits of ``tmasim run`` and ``tmasim sweep`` (points, estimated time and memory),
    checked before anything runs; ``yes`` lifts them, as ``--yes`` does."""
    from tmasim.estimates import budget
    from tmasim.inputs import scenario as scenarios
    from tmasim.review import report
    from tmasim.simulation import estimate as run_estimate
    from tmasim.simulation import simulate
    from tmasim.sweep import estimate, run_sweep
    from tmasim.sweep.runner import MAX_POINTS

    report.check_out(out)  # before minutes of simulation, not after
    limits = budget.command_line(yes, what="report", **budget.after_run(report=True))
    shown = scenarios.load(scenario, overrides)
    base = scenarios.load(scenario, [*overrides, "run.records=true"])
    table, chosen, how = None, None, sweep or SweepOptions()
    if vary:  # the sweep's limits and the base run's (its figures counted), both before either runs
        budget.check(run_estimate(base, limits=limits), dataclasses.replace(limits, notify=None))
        table = run_sweep(scenario, overrides, vary, zip_=how.zip_, jobs=jobs, out=how.out, executor=how.executor,
                          scheduler=how.scheduler, progress=how.progress, search=how.search,
                          max_points=None if yes else MAX_POINTS, max_seconds=None if yes else estimate.LIMIT_SECONDS,
                          allow_large=yes, notify=limits.notify)
    result = simulate(base, record_bandwidth=True, limits=limits)
    point = report.chosen_point(table) if table is not None else None
    if point is not None:  # the timeline a review looks at: the knee's, not the base scenario's
        label, changes = point
        chosen = label, simulate(scenarios.load(scenario, [*overrides, *changes, "run.records=true"]),
                                 record_bandwidth=True, limits=limits)
    written = scenarios.source_text(scenario)
    if written is not None and overrides:
        written = "".join(f"# --set {o}\n" for o in overrides) + "# changes this file, as written:\n" + written
    return report.write_report(shown, result, table, out,
                               command=report.command_line(scenario, overrides, vary, how.zip_),
                               first_tiles=first_tiles, chosen=chosen, written=written)
