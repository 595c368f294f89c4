"""The ``tmasim`` command. Errors a user can cause print one or two lines, never a traceback.

Exit status: 0 success, 2 bad input (scenario, options), 3 a model that cannot run to the end
(deadlock, mbarrier misuse), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tmasim.errors import TmasimError
from tmasim.units import format_time


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except TmasimError as err:
        print(f"tmasim: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("tmasim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head`: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"tmasim: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tmasim", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="simulate one scenario and print its summary")
    run.add_argument("scenario", nargs="?", help="a scenario file, or the name of a bundled one (default: reference)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                     help="override a field; VALUE is read as TOML (3, \"3 us\", [1, 2]) or else as a plain string")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    run.add_argument("--out", type=Path, help="write summary, spans, events (CSV) and a Gantt chart (PNG) here")
    run.set_defaults(handler=_run)

    scenarios = sub.add_parser("scenarios", help="list the bundled scenarios")
    scenarios.set_defaults(handler=_scenarios)
    return parser


def _run(args: argparse.Namespace) -> int:
    from tmasim import scenario as scenarios
    from tmasim.simulation import simulate

    scenario = scenarios.load(args.scenario, args.overrides)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise TmasimError(f"--out: {str(args.out)!r} exists and is not a directory")
    result = simulate(scenario)
    if args.json:
        print(result.to_json())
    else:
        print(describe(result.stats, scenario))
    if result.races:
        _warn_races(result)
    if args.out is not None:
        _write_outputs(result, args.out)
    return 0


def _write_outputs(result: Any, out: Path) -> None:
    from tmasim import plots

    written = result.save(out)
    if result.recorder is not None:
        stats = result.stats
        title = (f"{stats['scenario']}: {format_time(result.makespan_ps)} with {stats['stages']} stage(s) "
                 f"(no overlap: {format_time(stats['serial_ns'] * 1000)}) on {stats['gpu']}")
        written += plots.save(plots.gantt(result.spans, result.events, title=title), out / "gantt.png")
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)


def _warn_races(result: Any) -> None:
    races = result.races
    first = races[0]
    landed = ("before its copy was issued" if first.landed_ps is None
              else f"before it landed at {format_time(first.landed_ps)}")
    print(f"tmasim: warning: {len(races)} read-before-ready race(s): the consumer read tile {first.tile} "
          f"from slot {first.stage} at {format_time(first.read_ps)}, {landed} (pipeline.consumer_waits_full = false)",
          file=sys.stderr)


def describe(stats: dict[str, Any], scenario: Any) -> str:
    """The human summary of a run."""
    ns = 1000

    def t(value_ns: float | None) -> str:
        return "-" if value_ns is None else format_time(value_ns * ns)

    lines = [f"{stats['scenario']}: {stats['tiles']} tiles, {stats['stages']} stage(s) on {stats['gpu']}"]
    if scenario.description:
        lines.append(f"  {scenario.description}")
    rows = [
        ("pipelined time", t(stats["makespan_ns"])),
        ("no-overlap time", f"{t(stats['serial_ns'])}   (speedup {stats['speedup']:.2f}x)"),
        ("closed form", t(stats["closed_form_ns"]) if stats["closed_form_ns"] is not None else "- (does not apply)"),
    ]
    if stats.get("maxplus_ns") is not None:
        rows.append(("max-plus recurrence", t(stats["maxplus_ns"])))
    terms = ", ".join(f"{k} {t(stats[f'{k}_term_ns'])}" for k in ("copy", "compute", "issue", "latency")
                      if stats[f"{k}_term_ns"] or k != "issue")
    rows += [
        ("bound per tile", f"{t(stats['interval_bound_ns'])}, binding: {stats['binding']}   ({terms})"),
        ("consumer stalls", f"{t(stats['consumer_wait_full_ns'])} waiting on full barriers"),
        ("producer stalls", f"{t(stats['producer_wait_empty_ns'])} waiting on empty barriers"),
        ("busy", f"copy engine {stats['copy_utilization']:.0%}, tensor core {stats['compute_utilization']:.0%}"),
    ]
    if stats.get("races"):
        rows.append(("races", f"{stats['races']} read(s) before data landed"))
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    return "\n".join(lines)


def _scenarios(args: argparse.Namespace) -> int:
    from tmasim import scenario as scenarios

    for name in scenarios.bundled_names():
        raw, _ = scenarios.read_raw(name)
        print(f"{name:<28} {raw.get('description', '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
