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
from tmasim.units import format_bytes, format_rate, format_time


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
    parser = _Parser(prog="tmasim", description="Simulate TMA load/compute pipelines on Hopper and Blackwell GPUs.",
                     epilog="Start with `tmasim run` (the reference scenario); `tmasim COMMAND --help` for more.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="simulate one scenario and print its summary")
    run.add_argument("scenario", nargs="?", help="a scenario file, or the name of a bundled one (default: reference)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                     help="override a field; VALUE is read as TOML (3, \"3 us\", [1, 2]) or else as a plain string")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    run.add_argument("--out", type=Path, metavar="DIR",
                     help="write summary, spans, events (CSV) and a Gantt chart (PNG) here")
    run.add_argument("--trace", type=Path, metavar="FILE.json",
                     help="write the timeline as a Chrome trace for ui.perfetto.dev or chrome://tracing "
                          "(gzip-compressed if FILE ends in .gz)")
    run.set_defaults(handler=_run)

    scenarios = sub.add_parser("scenarios", help="list the bundled scenarios")
    scenarios.set_defaults(handler=_scenarios)

    presets = sub.add_parser("presets", help="list the GPU presets with their key figures")
    presets.add_argument("name", nargs="?", help="show every value of one preset, with its source")
    presets.set_defaults(handler=_presets)

    from tmasim import sweep, validation

    sweep.register(sub)
    validation.register(sub)
    from tmasim import plot_cli

    plot_cli.register(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    from tmasim import scenario as scenarios
    from tmasim.simulation import simulate

    scenario = scenarios.load(args.scenario, args.overrides)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise TmasimError(f"--out: {str(args.out)!r} exists and is not a directory")
    if args.trace is not None and not scenario.run.records:
        raise TmasimError("--trace: this scenario keeps no per-event records (run.records = false); "
                          "add --set run.records=true")
    result = simulate(scenario, record_bandwidth=args.out is not None or args.trace is not None)
    if args.json:
        print(result.to_json())
    else:
        print(describe(result.stats, scenario))
    if result.races:
        _warn_races(result)
    if args.out is not None:
        _write_outputs(result, args.out)
    if args.trace is not None:
        _write_trace(result, args.trace)
    return 0


def _write_trace(result: Any, path: Path) -> None:
    from tmasim.trace import write_chrome_trace

    bandwidth = result.bandwidth
    counters = bandwidth.assign(name=bandwidth["link"] + " GB/s", value=bandwidth["gbytes_per_s"])[
        ["time_ps", "name", "value"]] if len(bandwidth) else None
    try:
        print(f"wrote {write_chrome_trace(result, path, counters=counters)}", file=sys.stderr)
    except OSError as err:
        raise TmasimError(f"--trace: cannot write {str(path)!r}: {err.strerror}") from None


def _write_outputs(result: Any, out: Path) -> None:
    from tmasim import plots

    written = result.save(out)
    if result.recorder is None:
        print("tmasim: note: no per-event records (run.records = false), so no spans, events or Gantt chart; "
              "--set run.records=true to record them", file=sys.stderr)
    else:
        stats = result.stats
        serial = stats.get("serial_ns")
        no_overlap = f" (no overlap: {format_time(serial * 1000)})" if serial is not None else ""
        title = (f"{stats['scenario']}: {format_time(result.makespan_ps)} with {stats['stages']} stage(s)"
                 f"{no_overlap} on {stats['gpu']}")
        written += plots.save(plots.gantt(result.spans, result.events, title=title,
                                          tiles=plots.suggested_tiles(result.spans)), out / "gantt.png")
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
    """The human summary of a run: what ran, how long it took, and why."""
    lines = [f"{stats['scenario']}: {_headline(stats, scenario)}"]
    if scenario.description:
        lines.append(f"  {scenario.description}")
    kind = stats["workload"]
    rows = _tiles_rows(stats) if kind == "tiles" else _chip_rows(stats, scenario)
    several = kind != "tiles" or stats["consumers"] > 1
    per_cta = " per consumer warpgroup on average" if several else ""
    rows += [
        ("consumer stalls", f"{_t(stats['consumer_wait_full_ns'])} waiting on full barriers{per_cta}"),
        ("producer stalls", f"{_t(stats['producer_wait_empty_ns'])} waiting on "
                            f"empty barriers{' per producer on average' if kind != 'tiles' else ''}"),
        ("busy", f"copy engine{'s' if kind != 'tiles' else ''} {stats['copy_utilization']:.0%}, "
                 f"tensor core{'s' if kind != 'tiles' else ''} {stats['compute_utilization']:.0%}"),
    ]
    if stats.get("races"):
        rows.append(("races", f"{stats['races']} read(s) before data landed"))
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    return "\n".join(lines)


def _t(value_ns: float | None, digits: int = 4) -> str:
    return "-" if value_ns is None else format_time(value_ns * 1000, digits)


def _headline(stats: dict[str, Any], scenario: Any) -> str:
    w, p = scenario.workload, scenario.pipeline
    consumers = f", {p.consumers} consumer warpgroups ({p.consumer_mode})" if p.consumers > 1 else ""
    if stats["workload"] == "gemm":
        bm, bn, bk = w.tile
        what = f"{w.m}x{w.n}x{w.k} {w.dtype} GEMM, tile {bm}x{bn}x{bk}"
    elif stats["workload"] == "stream":
        what = f"stream {'x'.join(map(str, w.shape))} {w.dtype} in {'x'.join(map(str, w.box))} boxes"
    else:
        what = f"{stats['tiles']} tiles"
    return f"{what}, {stats['stages']} stage(s){consumers} on {stats['gpu']}"


def _tiles_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        ("pipelined time", _t(stats["makespan_ns"], 6)),
        ("no-overlap time", f"{_t(stats['serial_ns'], 6)}   (speedup {stats['speedup']:.2f}x)"),
        ("closed form", _t(stats["closed_form_ns"]) if stats["closed_form_ns"] is not None else "- (does not apply)"),
    ]
    if stats.get("maxplus_ns") is not None:
        rows.append(("max-plus recurrence", _t(stats["maxplus_ns"])))
    terms = ", ".join(f"{k} {_t(stats[f'{k}_term_ns'])}" for k in ("copy", "compute", "issue", "latency")
                      if stats[f"{k}_term_ns"] or k != "issue")
    rows.append(("bound per tile", f"{_t(stats['interval_bound_ns'])}, binding: {stats['binding']}   ({terms})"))
    return rows


def _chip_rows(stats: dict[str, Any], scenario: Any) -> list[tuple[str, str]]:
    gpu = scenario.gpu
    launch = getattr(scenario.workload, "launch", "persistent")
    rows = [("predicted time", _t(stats["makespan_ns"]))]
    if stats["workload"] == "gemm":
        peak = gpu.tensor_flops[scenario.workload.dtype] * 1e12
        rate = stats["achieved_flops_per_s"]
        rows[0] = ("predicted time", f"{_t(stats['makespan_ns'])}   ({rate / 1e12:.0f} TFLOP/s, "
                                     f"{rate / peak:.0%} of the {peak / 1e12:.0f} TFLOP/s peak)")
        bounds = ", ".join(f"{name} {_t(stats[f'{key}_bound_ns'])}" for key, name in
                           (("compute", "compute"), ("l2", "L2"), ("hbm", "HBM"), ("port", "SM port"),
                            ("latency", "latency")))
        rows += [
            ("bound", f"{_t(stats['bound_ns'])}, binding: {stats['binding']}   "
                      f"(the run reaches {stats['efficiency']:.0%} of it)"),
            ("bounds", bounds),
            ("no-overlap time", f"{_t(stats['serial_ns'])} on the busiest SM"),
        ]
    else:
        law = stats["littles_law_bytes_per_s"]
        rows += [
            ("achieved bandwidth", f"{format_rate(stats['achieved_bytes_per_s'])}   (Little's law: "
                                   f"{format_rate(law)}, bound by {stats['littles_law_binding']})"),
            ("bytes in flight", f"{format_bytes(stats['bytes_in_flight_per_sm'])} per SM; a slot's round trip "
                                f"{_t(stats['slot_round_trip_ns'])} (unloaded: {_t(stats['round_trip_ns'])})"),
        ]
    rows += [
        ("residency", f"{format_bytes(stats['smem_per_cta_bytes'])} SMEM per CTA, {stats['ctas_per_sm']} CTA(s) "
                      f"per SM (limited by {stats['residency_limit']}); {stats['tiles']} work units, "
                      f"{stats['ctas']} CTAs on {stats['sms_used']} SMs, "
                      + (f"persistent, up to {stats['waves']} units per CTA" if launch == "persistent"
                         else f"{stats['waves']} wave(s)")),
        ("traffic", f"HBM {format_bytes(stats['hbm_bytes'])}"
                    + (f" ({stats['hbm_utilization']:.0%} busy)" if stats["hbm_utilization"] is not None else "")
                    + f", L2 {format_bytes(stats['memory_bytes'])}"
                    + (f" ({stats['l2_utilization']:.0%} busy)" if stats["l2_utilization"] is not None else "")),
    ]
    if "cluster" in stats:
        rows += _cluster_rows(stats, scenario)
    elif stats["sm_classes"] < stats["sms_used"]:
        rows.append(("aggregation", f"{stats['sms_used']} SMs simulated as {stats['sm_classes']} class(es) "
                                    "of identical SMs (run.aggregate = false to simulate each)"))
    return rows


def _cluster_rows(stats: dict[str, Any], scenario: Any) -> list[tuple[str, str]]:
    cx, cy = scenario.pipeline.cluster
    chosen = "set" if getattr(scenario.workload, "multicast", None) is not None else "default: what the shape allows"
    shares = {"none": "no operand shared", "a": f"A split over the {cy} CTAs of a cluster row",
              "b": f"B split over the {cx} CTAs of a cluster column", "both": "A over each row, B over each column"}
    per_gpc = stats["clusters_per_gpc"]
    if stats.get("mma_cta_group") == 2:
        chosen = "2-SM MMA"
        shares["none"] = "each CTA of the pair loads its A box and half of B; the leader's MMA reads both"
    return [
        ("cluster", f"{cx}x{cy} CTAs{'' if stats['cluster_portable'] else ' (non-portable size: needs the opt-in)'}; "
                    f"multicast {stats['multicast']} ({chosen}; {shares[stats['multicast']]}); remote arrival "
                    f"{_t(stats['remote_arrive_ns'])}"),
        ("placement", f"{stats['clusters_resident']} clusters resident at once ({per_gpc} per GPC), "
                      f"{stats['idle_sms']} SM(s) idle"),
        ("aggregation", f"{stats['aggregation']}; {stats['cluster_classes']} cluster slot(s) simulated"),
    ]


def _scenarios(args: argparse.Namespace) -> int:
    from tmasim import scenario as scenarios

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
            print(f"  {key:<24} {str(value):<22} {text}" + (f"  [{source}]" if source else ""))
        return 0
    rows = [hardware.describe(hardware.load_gpu(name)) for name in hardware.preset_names()]
    columns = [c for c in rows[0] if c != "description"]
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  ".join(f"{c:<{widths[c]}}" for c in columns))
    for row in rows:
        print("  ".join(f"{row[c]:<{widths[c]}}" for c in columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
