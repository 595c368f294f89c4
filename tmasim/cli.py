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

from tmasim import format as fmt
from tmasim.errors import ModelError, TmasimError


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
        self.exit(2, f"tmasim: error: {message}{_suggestion(message)}\n")


def _suggestion(message: str) -> str:
    """argparse names a mistyped choice (a subcommand, a --kind) but not the one meant."""
    import re

    from tmasim.suggest import did_you_mean

    match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if match is None:
        return ""
    return did_you_mean(match.group(1), re.findall(r"'([^']*)'", match.group(2)) or match.group(2).split(", "))


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tmasim", description="Simulate TMA load/compute pipelines on Hopper and Blackwell GPUs.",
                     epilog="Start with `tmasim run` (the reference scenario); `tmasim COMMAND --help` for more.")
    from tmasim.version import __version__

    parser.add_argument("--version", action="version", version=f"tmasim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="simulate one scenario and print its summary",
                         epilog="Run switches (--set): run.records=false keeps the summary only; run.aggregate=false "
                                "simulates every SM; run.fast_forward=false simulates the repeated periods of a "
                                "steady state too (on by default: skipped exactly, with records off); run.seed=N.")
    run.add_argument("scenario", nargs="?", help="a scenario file, or the name of a bundled one (default: reference)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                     help="override a field; VALUE is read as TOML (3, \"3 us\", [1, 2]) or else as a plain string")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    run.add_argument("--out", type=Path, metavar="DIR",
                     help="write summary, spans, events (CSV) and a Gantt chart (PNG) here")
    run.add_argument("--trace", type=Path, metavar="FILE.json",
                     help="write the timeline as a Chrome trace for ui.perfetto.dev or chrome://tracing "
                          "(gzip-compressed if FILE ends in .gz)")
    run.add_argument("--explain", action="store_true",
                     help="then explain the run in words: the closed form, what binds, stalls, what-ifs")
    run.add_argument("--yes", action="store_true",
                     help="run it even if its estimated time or memory is past the limits (see the README's "
                          "Resource limits); without it such a run is refused before it starts")
    run.set_defaults(handler=_run)

    scenarios = sub.add_parser("scenarios", help="list the bundled scenarios, or print one as TOML",
                               epilog="`tmasim scenarios reference > my-kernel.toml` starts a scenario of your own.")
    scenarios.add_argument("name", nargs="?", help="print this bundled scenario's file (TOML, with its comments)")
    scenarios.set_defaults(handler=_scenarios)

    presets = sub.add_parser("presets", help="list the GPU presets with their key figures")
    presets.add_argument("name", nargs="?", help="show every value of one preset, with its source")
    presets.set_defaults(handler=_presets)

    from tmasim import sweep, validation

    sweep.register(sub)
    validation.register(sub)
    from tmasim.review import plot_cli

    plot_cli.register(sub)
    from tmasim import teach

    teach.register(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    from tmasim import budget
    from tmasim import scenario as scenarios
    from tmasim.outputs import check_file, check_folder
    from tmasim.simulation import simulate

    scenario = scenarios.load(args.scenario, args.overrides)
    frames = args.out is not None or args.trace is not None
    limits = budget.command_line(args.yes, extra_record_bytes=budget.FRAME_BYTES_PER_RECORD if frames else 0)
    if args.out is not None:
        check_folder("--out", args.out)
    if args.trace is not None:
        check_file("--trace", args.trace)
    if args.trace is not None and not scenario.run.records:
        raise TmasimError("--trace: this scenario keeps no per-event records (run.records = false); "
                          "add --set run.records=true")
    try:
        result = simulate(scenario, record_bandwidth=frames, limits=limits)
    except ModelError as err:
        if args.explain:
            from tmasim.teach.explain_broken import explain_failure

            print(explain_failure(scenario, err))
        raise
    if args.json:
        print(result.to_json())
    else:
        from tmasim.summary import describe

        print(describe(result.stats, scenario))
    if result.races:
        _warn_races(result)
    if args.explain:
        from tmasim.teach.explain import explain_result

        print("\n" + explain_result(result, base_dir=scenarios.read_raw(args.scenario)[1]))
    if args.out is not None:
        _write_outputs(result, args.out)
    if args.trace is not None:
        _write_trace(result, args.trace)
    return 0


def _write_trace(result: Any, path: Path) -> None:
    from tmasim.review.trace import write_chrome_trace

    bandwidth = result.bandwidth
    counters = bandwidth.assign(name=bandwidth["link"] + " GB/s", value=bandwidth["gbytes_per_s"])[
        ["time_ps", "name", "value"]] if len(bandwidth) else None
    try:
        print(f"wrote {write_chrome_trace(result, path, counters=counters)}", file=sys.stderr)
    except OSError as err:
        raise TmasimError(f"--trace: cannot write {str(path)!r}: {err.strerror}") from None


def _write_outputs(result: Any, out: Path) -> None:
    try:
        _write_tables_and_chart(result, out)
    except OSError as err:
        raise TmasimError(f"--out: cannot write {str(out)[:100]!r} ({err.strerror or err})") from None


def _write_tables_and_chart(result: Any, out: Path) -> None:
    from tmasim.review import plots
    from tmasim.summary_rows import plural

    written = result.save(out)
    if result.recorder is None:
        print("tmasim: note: no per-event records (run.records = false), so no spans, events or Gantt chart; "
              "--set run.records=true to record them", file=sys.stderr)
    else:
        stats = result.stats
        serial = stats.get("serial_ns")
        no_overlap = f" (no overlap: {fmt.time_ns(serial, unicode=True)})" if serial is not None else ""
        took = (("INVALID RUN (races)", "") if stats.get("valid") is False
                else (fmt.time(result.makespan_ps, unicode=True), no_overlap))
        title = f"{stats['scenario']}: {took[0]} with {plural(stats['stages'], 'stage')}{took[1]} on {stats['gpu']}"
        gantt = plots.gantt(result.spans, result.events, title=title, tiles=plots.suggested_tiles(result.spans),
                            note=plots.representatives_note(stats))
        written += plots.save(gantt, out / "gantt.png")
    print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)


def _warn_races(result: Any) -> None:
    races = result.races
    first = races[0]
    landed = ("before its copy was issued" if first.landed_ps is None
              else f"before it landed at {fmt.time(first.landed_ps)}")
    print(f"tmasim: warning: {len(races)} read-before-ready race(s): the consumer read tile {first.tile} "
          f"from slot {first.stage} at {fmt.time(first.read_ps)}, {landed} (pipeline.consumer_waits_full = false)",
          file=sys.stderr)


def _scenarios(args: argparse.Namespace) -> int:
    from tmasim import scenario as scenarios

    if args.name:
        text = scenarios.bundled_text(args.name)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    for name in scenarios.bundled_names():
        raw, _ = scenarios.read_raw(name)
        print(f"{name:<28} {raw.get('description', '')}")
    return 0


def _presets(args: argparse.Namespace) -> int:
    from tmasim import hardware

    if args.name:
        gpu = hardware.load_gpu(args.name)
        print(f"{gpu.name}: {gpu.description}")
        raw = hardware.raw_preset(args.name)
        for key, text in hardware.field_descriptions().items():
            if key in ("name", "description"):
                continue
            entry = raw.get(key)
            value, source = entry, ""
            if isinstance(entry, dict) and "value" in entry:
                value, source = entry["value"], entry.get("source", "")
            print(f"  {key:<24} {_preset_value(key, value, gpu):<22} {text}" + (f"  [{source}]" if source else ""))
        for line in hardware.describe_mma(gpu):
            print(f"  {line}")
        return 0
    rows = [_preset_row(name) for name in hardware.preset_names()]
    columns = [c for c in rows[0] if c != "description"]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  ".join(f"{c:<{widths[c]}}" for c in columns).rstrip())
    for row in rows:
        print("  ".join(f"{row[c]:<{widths[c]}}" for c in columns).rstrip())
    return 0


def _preset_row(name: str) -> dict[str, str]:
    """A preset's key figures, its copy latency in the unit the preset gives it (cycles)."""
    from tmasim import hardware

    gpu = hardware.load_gpu(name)
    row = hardware.describe(gpu)
    entry = hardware.raw_preset(name).get("copy_latency")
    value = entry.get("value") if isinstance(entry, dict) else entry
    row["copy latency"] = _preset_value("copy_latency", value, gpu)
    return row


def _preset_value(key: str, value: Any, gpu: Any) -> str:
    """As the preset writes it, made readable: ``520 cycles (262.6 ns)``, a row of rates per dtype,
    ``none`` for a zero latency and ``unlimited`` where 0 means no limit."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if key.startswith("tma_max") and str(value).split()[0] in ("0", "0.0"):
        return f"{value} (unlimited)"
    ps = getattr(gpu, key, None)
    if isinstance(value, str) and "cycle" in value and isinstance(ps, int):
        return f"{value} ({fmt.time(ps)})"
    if isinstance(ps, int) and ps == 0 and key in ("copy_latency", "copy_latency_per_kib", "hbm_latency",
                                                    "tma_issue", "barrier_wake"):
        return "none"
    return str(value)


if __name__ == "__main__":
    raise SystemExit(main())
