"""``tmasim report``: one folder for a design review, around a self-contained ``index.html``.

The page carries the scenario, its summary, the binding term of the bound in one sentence
(:func:`explain`), the sweep's figures when fields are varied, the base scenario's timeline
(Gantt chart, slot occupancy, bandwidth), and the table the figures came from. Figures are
embedded as base64 PNG and the style is inline, so the file opens anywhere, offline, and can
be mailed as one attachment; the same PNGs and the tables (CSV) are written beside it.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import TmasimError
from tmasim.units import format_bytes, format_rate, format_time

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from tmasim.results import Result

KEY_FIGURES = ("makespan_ns", "serial_ns", "closed_form_ns", "bound_ns", "interval_bound_ns", "binding",
               "littles_law_bytes_per_s", "littles_law_binding", "achieved_flops_per_s", "achieved_bytes_per_s",
               "efficiency", "consumer_wait_full_ns", "producer_wait_empty_ns", "copy_utilization",
               "compute_utilization", "hbm_utilization", "l2_utilization", "smem_per_cta_bytes", "ctas_per_sm",
               "residency_limit", "ctas", "sms_used", "waves", "races", "cluster", "multicast", "clusters_resident",
               "idle_sms", "aggregation")
SWEEP_COLUMNS = ("status", "makespan_ns", "binding", "bound_ns", "interval_bound_ns", "achieved_flops_per_s",
                 "achieved_bytes_per_s", "smem_per_cta_bytes", "ctas_per_sm", "error")


# ------------------------------------------------------------------------------- explanation


def explain(stats: Mapping[str, Any]) -> str:
    """The binding term of the bound, in one sentence a reviewer can repeat."""
    kind = stats.get("workload")
    if kind == "gemm":
        return _explain_gemm(stats)
    if kind == "stream":
        return _explain_stream(stats)
    return _explain_tiles(stats)


def _t(ns: Any) -> str:
    return format_time(float(ns) * 1000, 4)


def _explain_tiles(s: Mapping[str, Any]) -> str:
    copy, compute, interval = _t(s["copy_term_ns"]), _t(s["compute_term_ns"]), _t(s["interval_bound_ns"])
    binding, stages = s["binding"], int(s["stages"])
    if binding == "compute":
        return (f"The tensor core binds: each tile computes in {compute} and loads in {copy} (means), so the "
                f"pipeline delivers at best one tile every {interval}, a bound more stages cannot lower.")
    if binding == "copy":
        return (f"The copy engine binds: each tile takes {copy} to load and {compute} to compute (means), so the "
                f"pipeline delivers at best one tile every {interval}, a bound a faster copy would lower and more "
                "stages would not.")
    if binding == "issue":
        return (f"TMA issue binds: issuing each copy costs {_t(s['issue_term_ns'])}, more than its load ({copy}) "
                f"or compute ({compute}), so at best one tile every {interval}.")
    round_trip = float(s["latency_term_ns"]) * stages
    needed = math.ceil(round_trip / max(float(s["copy_term_ns"]), float(s["compute_term_ns"]),
                                        float(s.get("issue_term_ns") or 0.0), 1e-9) - 1e-9)
    return (f"The slot round trip binds: one slot cycles in {_t(round_trip)} (copy latency, load, compute and "
            f"barrier overheads), so {stages} stage(s) deliver at best one tile every {interval}; about "
            f"{needed} stages would hide it.")


def _explain_gemm(s: Mapping[str, Any]) -> str:
    binding, compute = s["binding"], _t(s["compute_bound_ns"])
    if binding == "compute":
        others = ", ".join(f"{name} {_t(s[f'{key}_bound_ns'])}" for key, name in
                           (("l2", "L2"), ("hbm", "HBM"), ("port", "SM port"), ("latency", "latency")))
        return (f"Compute binds: the busiest SM needs {compute} of tensor-core time, more than any memory path "
                f"needs ({others}).")
    if binding in ("l2", "hbm"):
        link = binding.upper() if binding == "hbm" else "L2"
        nbytes = _link_bytes(s, binding)
        supply = nbytes / (float(s[f"{binding}_bound_ns"]) * 1e-9)
        demand = nbytes / (float(s["compute_bound_ns"]) * 1e-9)
        what = "box data" if binding == "l2" else "DRAM traffic"
        return (f"{link} bandwidth binds: to keep the tensor cores busy the SMs together would ask for "
                f"{format_rate(demand)} of {what}, and {link} supplies {format_rate(supply)}, so moving "
                f"{format_bytes(nbytes)} takes at least {_t(s[f'{binding}_bound_ns'])}.")
    if binding == "port":
        return (f"The SMs' L2 ports bind: the busiest SM needs {_t(s['port_bound_ns'])} just to take in its "
                f"operands through its one port, more than its {compute} of tensor-core time; bigger tiles "
                "(more reuse per byte) would help.")
    return (f"Latency binds: with {s['stages']} stages x {s['ctas_per_sm']} CTA(s) per SM in flight, the busiest "
            f"SM's slot round trips add up to at least {_t(s['latency_bound_ns'])}, more than its {compute} of "
            "compute; more stages, if shared memory allows, would hide it.")


def _link_bytes(s: Mapping[str, Any], link: str) -> float:
    """What the bound moved over the link: carried bytes where recorded, else the model's count."""
    for key in ((f"{link}_carried_bytes", "memory_bytes") if link == "l2" else ("model_hbm_bytes", "hbm_bytes")):
        value = s.get(key)
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return float(value)
    return 0.0


def _explain_stream(s: Mapping[str, Any]) -> str:
    sms, in_flight, trip = int(s["sms_used"]), float(s["bytes_in_flight_per_sm"]), float(s["round_trip_ns"])
    offered = sms * in_flight / (trip * 1e-9)
    achieved = f" (the run achieves {format_rate(s['achieved_bytes_per_s'])})" if s.get("achieved_bytes_per_s") else ""
    binding = s["littles_law_binding"]
    flight = f"{sms} SMs x {format_bytes(in_flight)} in flight over a {_t(trip)} round trip"
    if binding == "bytes in flight":
        return (f"Little's law binds: {flight} move at most {format_rate(offered)}, less than the memory links "
                f"supply; more stages or bigger boxes would help{achieved}.")
    return (f"{binding} bandwidth binds: {flight} could move {format_rate(offered)}, but {binding} supplies "
            f"{format_rate(s['littles_law_bytes_per_s'])}, so more stages would only queue{achieved}.")


# ---------------------------------------------------------------------------------- building


@dataclass
class Page:
    """What index.html shows, gathered before any HTML is written."""

    title: str
    description: str
    verdict: str
    scenario_text: str
    summary_rows: list[tuple[str, str]]
    figures: list[tuple[str, str, Path]] = field(default_factory=list)  # (section, caption, png)
    table_html: str = ""
    table_file: str = ""
    command: str = ""


def build_report(scenario: str | Path | None, overrides: Sequence[str] = (), vary: Sequence[str] = (),
                 out: str | Path = "report", *, jobs: int = 1, first_tiles: int | None = None) -> Path:
    """Simulate the scenario (records on), sweep it if fields vary, and write ``out/index.html``."""
    from tmasim import scenario as scenarios
    from tmasim.simulation import simulate

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise TmasimError(f"--out: {str(out)!r} exists and is not a directory")
    shown = scenarios.load(scenario, overrides)
    result = simulate(scenarios.load(scenario, [*overrides, "run.records=true"]), record_bandwidth=True)
    table = _sweep(scenario, overrides, vary, jobs) if vary else None
    (out / "figures").mkdir(parents=True, exist_ok=True)
    page = Page(title=f"{shown.name}: design review", description=shown.description,
                verdict=_verdict(result.stats), scenario_text=scenario_toml(shown.to_dict()),
                summary_rows=summary_rows(result.stats), command=_command(scenario, overrides, vary))
    result.summary.to_csv(out / "summary.csv", index=False)
    if table is not None:
        table.to_csv(out / "sweep.csv", index=False)
        page.figures += _sweep_figures(table, out)
        page.table_html, page.table_file = sweep_table_html(table), "sweep.csv"
    else:
        page.figures.append(("Where the time went", "The run's makespan cut into the layers of its bounds.",
                             _save(_stalls(result.summary), out, "stalls")))
        page.table_html, page.table_file = summary_table_html(summary_rows(result.stats, every=True)), "summary.csv"
    page.figures += _timeline_figures(result, out, first_tiles)
    index = out / "index.html"
    index.write_text(render(page), encoding="utf-8")
    return index


def _sweep(scenario: str | Path | None, overrides: Sequence[str], vary: Sequence[str], jobs: int) -> pd.DataFrame:
    from tmasim.sweep import run_sweep

    return run_sweep(scenario, overrides, vary, jobs=jobs, progress=False)


def _verdict(stats: Mapping[str, Any]) -> str:
    races = f" It has {stats['races']} read(s) of a slot before its data landed: a race." if stats.get("races") else ""
    return f"Takes {_t(stats['makespan_ns'])}. {explain(stats)}{races}"


def _command(scenario: Any, overrides: Iterable[str], vary: Iterable[str]) -> str:
    import shlex

    parts = ["tmasim", "report", str(scenario or "reference")]
    parts += [f"--set={o}" for o in overrides] + [f"--vary={v}" for v in vary]
    return " ".join(shlex.quote(p) for p in parts)


def _save(fig: Figure, out: Path, name: str) -> Path:
    from tmasim import plots

    return plots.save(fig, out / "figures" / f"{name}.png")[0]


def _stalls(table: pd.DataFrame) -> Figure:
    from tmasim import plots

    return plots.stall_breakdown(table)


def _sweep_figures(table: pd.DataFrame, out: Path) -> list[tuple[str, str, Path]]:
    """The sweep against its main field, where the time went per point, and a heatmap for two fields."""
    from tmasim import plots
    from tmasim.plot_tables import varied_fields

    fields = varied_fields(table)
    x = "pipeline.stages" if "pipeline.stages" in fields else fields[0]
    figures = [("Sweep", f"Time to finish against {x}: simulated (solid), bound (dashed), and where more stops "
                         "helping (ring); below, what each point costs in shared memory and residency.",
                _save(plots.stage_sweep(table, x=x), out, "sweep"))]
    if len(fields) >= 2:
        y = next(f for f in fields if f != x)
        figures.append(("Sweep", f"Time to finish over {x} and {y}; the best point outlined.",
                        _save(plots.heatmap(table, x, y), out, "heatmap")))
    figures.append(("Where the time went", "Each point's makespan cut into the layers of its bounds: compute, "
                                           "the binding memory or latency term, and what no bound explains.",
                    _save(_stalls(table), out, "stalls")))
    return figures


def _timeline_figures(result: Result, out: Path, first_tiles: int | None) -> list[tuple[str, str, Path]]:
    from tmasim import plots

    spans, events = result.spans, result.events
    per_cta = int(spans[spans["kind"] == "compute"].groupby(["sm", "cta"])["tile"].nunique().max() or 0)
    tiles = first_tiles if first_tiles is not None else plots.suggested_tiles(spans)
    zoom = f" (zoomed to the first {tiles} tiles of each CTA; the run has {per_cta})" if tiles else ""
    stats = result.stats
    title = f"{stats['scenario']}: {_t(stats['makespan_ns'])} with {stats['stages']} stage(s) on {stats['gpu']}"
    figures = [("Timeline of the base scenario", f"Gantt chart{zoom}: copies, compute, barrier waits and phase "
                                                 "flips.", _save(plots.gantt(spans, events, title, tiles=tiles),
                                                                 out, "gantt")),
               ("Timeline of the base scenario", "Shared-memory slots in use: copies in flight against landed data.",
                _save(plots.slot_occupancy(spans), out, "slots"))]
    if not result.bandwidth.empty:
        figures.append(("Timeline of the base scenario", "Bandwidth of each shared link against its capacity.",
                        _save(plots.bandwidth(result.bandwidth, title=f"{stats['scenario']}: bandwidth"), out,
                              "bandwidth")))
    return figures


# ------------------------------------------------------------------------------------ tables


def scenario_toml(raw: Mapping[str, Any]) -> str:
    """The scenario as TOML: top-level keys, then one [table] per section."""
    from tmasim.sweep.table import toml_text

    lines = [f"{key} = {toml_text(value)}" for key, value in raw.items() if not isinstance(value, Mapping)]
    for key, value in raw.items():
        if isinstance(value, Mapping):
            lines += ["", f"[{key}]", *(f"{k} = {toml_text(v)}" for k, v in value.items())]
    return "\n".join(lines)


def format_figure(name: str, value: Any) -> str:
    """A summary figure in the unit a reader expects (µs, KiB, TB/s, %)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, str | bool):
        return str(value)
    if name.endswith("_ns"):
        return _t(value)
    if name.endswith("_bytes_per_s"):
        return format_rate(float(value))
    if name.endswith("_flops_per_s"):
        return f"{float(value) / 1e12:.4g} TFLOP/s"
    if name.endswith("_bytes") or name == "bytes":
        return format_bytes(float(value))
    if name.endswith("utilization") or name == "efficiency":
        return f"{float(value):.1%}"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def summary_rows(stats: Mapping[str, Any], *, every: bool = False) -> list[tuple[str, str]]:
    """(name, value) rows: the key figures (those that say something: no zero FLOP/s for a
    workload without FLOPs), or every figure."""
    names = list(stats) if every else [k for k in KEY_FIGURES if stats.get(k) is not None and not (
        k.endswith("_per_s") and stats[k] == 0)]
    return [(name, format_figure(name, stats[name])) for name in names]


def summary_table_html(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th scope=\"row\">{html.escape(k, quote=False)}</th><td>{html.escape(v, quote=False)}</td>"
                   "</tr>" for k, v in rows)
    return f"<table class=\"summary\"><tbody>{body}</tbody></table>"


def sweep_table_html(table: pd.DataFrame) -> str:
    """The varied fields and the figures a reviewer reads first; every column is in the CSV."""
    from tmasim.plot_tables import varied_fields

    columns = [*varied_fields(table), *(c for c in SWEEP_COLUMNS if c in table.columns and (
        not c.endswith("_per_s") or table[c].fillna(0).ne(0).any()))]
    head = "".join(f"<th scope=\"col\">{html.escape(c)}</th>" for c in columns)
    rows = []
    for _, row in table[columns].iterrows():
        cells = "".join(f"<td>{html.escape(format_figure(c, row[c]))}</td>" for c in columns)
        rows.append(f"<tr class=\"{'ok' if row['status'] == 'ok' else 'failed'}\">{cells}</tr>")
    return f"<table class=\"sweep\"><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


# -------------------------------------------------------------------------------------- HTML

STYLE = """
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 0; background: #fafafa; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 28px; margin: 8px 0 4px; } h2 { font-size: 21px; margin-top: 36px; border-bottom: 2px solid #e4e4e4; }
.lede { color: #555; margin-top: 0; }
.verdict { background: #eef3fa; border-left: 5px solid #4C72B0; padding: 12px 16px; font-size: 17px; }
pre { background: #f4f4f4; padding: 12px 16px; overflow-x: auto; font-size: 14px; }
table { border-collapse: collapse; font-size: 14px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
thead th { background: #f0f0f0; } table.summary th { font-weight: 500; color: #444; background: #f8f8f8; }
tr.failed td { color: #a33; }
figure { margin: 18px 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 14px; }
footer { color: #777; font-size: 13px; margin-top: 40px; }
.scroll { overflow-x: auto; }
"""


def render(page: Page) -> str:
    """index.html: one file, no external resources (images inline as base64 PNG)."""
    from tmasim import __version__

    def e(text: str) -> str:
        return html.escape(text, quote=False)

    sections: dict[str, list[str]] = {}
    for section, caption, png in page.figures:
        sections.setdefault(section, []).append(_figure_html(caption, png))
    figures = "".join(f"<section><h2>{e(name)}</h2>{''.join(items)}</section>" for name, items in sections.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(page.title)}</title><style>{STYLE}</style></head>
<body><main>
<h1>{e(page.title)}</h1>
<p class="lede">{e(page.description)}</p>
<p class="verdict" id="explanation">{e(page.verdict)}</p>
<section><h2>Scenario</h2><pre>{e(page.scenario_text)}</pre></section>
<section><h2>Summary</h2>{summary_table_html(page.summary_rows)}
<p>Every figure of the run: <a href="summary.csv">summary.csv</a>.</p></section>
{figures}
<section><h2>Data</h2><p>The table the figures came from (every column in
<a href="{html.escape(page.table_file)}">{e(page.table_file)}</a>):</p>
<div class="scroll">{page.table_html}</div></section>
<footer>Made by tmasim {e(__version__)}: <code>{e(page.command)}</code></footer>
</main></body></html>
"""


def _figure_html(caption: str, png: Path) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    alt = html.escape(caption, quote=True)
    return (f"<figure><img alt=\"{alt}\" src=\"data:image/png;base64,{data}\">"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")
