"""``tmasim report``: one folder for a design review, around a self-contained ``index.html``.

The page carries the scenario, its summary, the binding term of the bound in one sentence
(:func:`explain`), the sweep's figures when fields are varied, the base scenario's timeline
(Gantt chart, slot occupancy, bandwidth), and the table the figures came from. Figures are
embedded as base64 PNG and the style is inline, so the file opens anywhere, offline, and can
be mailed as one attachment; the same PNGs and the tables (CSV) are written beside it.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim import names
from tmasim.errors import TmasimError
from tmasim.output.trust import trust_for_row
from tmasim.review.columns import figure_label, figure_text
from tmasim.values import format as fmt
from tmasim.workloads.summary_rows import plural

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from tmasim.inputs.scenario import Scenario
    from tmasim.output.result import Result

KEY_FIGURES = ("makespan_ns", "serial_ns", "closed_form_ns", "bound_ns", "interval_bound_ns", "binding",
               "littles_law_bytes_per_s", "achieved_flops_per_s", "achieved_bytes_per_s",
               "efficiency", "consumer_wait_full_ns", "producer_wait_empty_ns", "copy_utilization",
               "compute_utilization", "l2_bytes", "l2_utilization", "hbm_bytes", "hbm_utilization",
               "smem_per_cta_bytes", "ctas_per_sm",
               "residency_limit", "ctas", "sms_used", "waves", "races", "cluster", "multicast", "clusters_resident",
               "idle_sms", "aggregation")
SWEEP_COLUMNS = ("status", "makespan_ns", "binding", "bound_ns", "interval_bound_ns", "achieved_flops_per_s",
                 "achieved_bytes_per_s", "smem_per_cta_bytes", "ctas_per_sm", "error")


# ------------------------------------------------------------------------------- explanation


def explain(stats: Mapping[str, Any]) -> str:
    """What binds and why, in one sentence a reviewer can repeat (the workload says it)."""
    from tmasim.workloads import WORKLOADS

    workload = WORKLOADS.get(str(stats.get("workload")))
    return workload.explain(stats) if workload is not None else ""


def _t(ns: Any) -> str:
    return fmt.time_ns(ns, unicode=True)


# ---------------------------------------------------------------------------------- building


@dataclass
class Page:
    """What index.html shows, gathered before any HTML is written."""

    title: str
    description: list[str]  # what ran (from the effective scenario), what changed, the file's words
    verdict: str
    scenario_text: str
    summary_rows: list[tuple[str, str]]
    answer: list[str] = field(default_factory=list)  # a sweep's best point, knee, next step
    figures: list[tuple[str, str, Path]] = field(default_factory=list)  # (section, caption, png)
    table: Table | None = None
    table_file: str = ""
    command: str = ""


@dataclass
class Table:
    """A data table as text cells; ``ok`` marks the rows that ran."""

    head: list[str]
    rows: list[list[str]]
    ok: list[bool]
    css: str


def check_out(out: str | Path) -> Path:
    """The report's folder, checked before anything runs: a file in the way is a one-line error."""
    out = Path(out)
    try:
        if out.exists() and not out.is_dir():
            raise TmasimError(f"--out: {str(out)!r} exists and is not a directory")
    except OSError as err:
        raise TmasimError(f"--out: {str(out)[:100]!r} cannot be used ({err.strerror or err})") from None
    from tmasim.output.paths import check_folder

    check_folder("--out", out, files=("index.html",))
    return out


def write_report(shown: Scenario, result: Result, table: pd.DataFrame | None, out: str | Path, *,
                 command: str = "", first_tiles: int | None = None,
                 chosen: tuple[str, Result] | None = None, written: str | None = None) -> Path:
    """Draw ``out/index.html`` from results only: the run (``result``, records on) of the scenario
    as ``shown`` (its header: what --set changed), and, for a sweep, its table and ``chosen``: the
    label and the run (records on) of the point whose timeline is drawn (the knee, see
    :func:`chosen_point`); ``written``, the scenario file as written (comments kept), shown in
    place of the scenario rewritten from its fields. Running them is the command's job
    (:func:`tmasim.review.plot_cli.build_report`)."""
    out = check_out(out)
    page = Page(title=f"{shown.name}: design review", description=_description(shown),
                verdict=_verdict(result.stats), scenario_text=written or scenario_toml(shown.to_dict()),
                summary_rows=summary_rows(result.stats), command=command)
    with _staging(out) as stage:
        _write_report(page, result, table, stage, first_tiles, chosen)
    return out / "index.html"


def chosen_point(table: pd.DataFrame) -> tuple[str, list[str]] | None:
    """The sweep point a review looks at: the knee (:func:`tmasim.names.term`; it may be the
    best itself), as its label and its ``--set`` overrides; None when no point
    ran to a valid time or nothing varies."""
    from tmasim.sweep import answer

    found = answer.find(table)
    if found is None or not found.fields:
        return None
    row, fields = found.knee, (*(f for f, _ in found.problem), *found.fields)
    text = answer.point_text(row, fields)
    same = answer.point_text(found.best, fields) == text
    label = f"the knee point, also the best ({text})" if same else f"the knee point ({text})"
    plain = [row[f].tolist() if hasattr(row[f], "tolist") else row[f] for f in fields]
    return label, [f"{f}={_set_value(v)}" for f, v in zip(fields, plain, strict=True)]


def _set_value(value: Any) -> str:
    """A value as ``--set`` reads it: TOML, on one line (tomli-w writes arrays over several)."""
    import tomli_w

    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_set_value(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).removeprefix("v = ").removesuffix("\n")


def _write_report(page: Page, result: Result, table: pd.DataFrame | None, out: Path,
                  first_tiles: int | None, chosen: tuple[str, Result] | None = None) -> None:
    (out / "figures").mkdir(parents=True, exist_ok=True)
    result.summary.to_csv(out / "summary.csv", index=False)
    if table is not None:
        table.to_csv(out / "sweep.csv", index=False)
        if (table["status"] == "ok").any():
            page.figures += _sweep_figures(table, out, result.validated)
        else:
            counts = ", ".join(f"{n} {status}" for status, n in table["status"].value_counts().items())
            page.verdict += f" No point of the sweep ran ({counts}): the table below says why, point by point."
        page.table, page.table_file = sweep_table(table), "sweep.csv"
        said = explain(result.stats)  # the verdict says it already: not twice
        page.answer = [line for line in _answer(table) if line != f"binding there: {said}"]
        headline = _headline(table)
        if headline:
            page.verdict = f"{headline} The base scenario: {page.verdict[0].lower()}{page.verdict[1:]}"
    else:
        page.figures.append(("Where the time went", "The run's makespan cut into the layers of its bounds.",
                             _save(_stalls(result.summary), out, "stalls", result.validated)))
        every = summary_rows(result.stats, every=True)
        page.table = Table([], [[k, v] for k, v in every], [True] * len(every), "summary")
        page.table_file = "summary.csv"
    label, shown = chosen if chosen is not None else ("the base scenario", result)
    page.figures += _timeline_figures(shown, out, first_tiles, label)
    (out / "index.html").write_text(render(page), encoding="utf-8")


@contextlib.contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """Write into a hidden folder beside ``out``, then move the files in: a report that fails
    half-way leaves ``out`` as it was, never a folder without index.html."""
    import os
    import shutil
    import tempfile

    from tmasim.output.paths import check_moves, remove_stale_stages, stage_prefix

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_stages(out)
        stage = Path(tempfile.mkdtemp(prefix=stage_prefix(out.name), dir=out.parent))
    except OSError as err:
        raise TmasimError(f"--out: cannot write in {str(out.parent)!r} ({err.strerror or err})") from None
    try:
        yield stage
        out.mkdir(exist_ok=True)
        moves = sorted(stage.rglob("*"), key=lambda p: len(p.parts))
        check_moves(moves, stage, out)
        for path in moves:
            target = out / path.relative_to(stage)
            if path.is_dir():
                target.mkdir(exist_ok=True)
            elif path.name != "index.html":
                os.replace(path, target)
        os.replace(stage / "index.html", out / "index.html")  # last: its presence means the rest is there
    except OSError as err:
        raise TmasimError(f"--out: cannot write {str(out)!r} ({err.strerror or err})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _description(scenario: Any) -> list[str]:
    """The run's header (see :mod:`tmasim.summary`) without the scenario's name: what ran, what
    --set changed, and the file's description, labelled as the file's once something changed."""
    from tmasim.output.summary import header

    first, *rest = header(scenario, unicode=True)
    return [first.split(": ", 1)[1], *(line.strip() for line in rest)]


def _answer(table: pd.DataFrame) -> list[str]:
    from tmasim.sweep import answer

    if answer.find(table) is None:
        return ["No point of the sweep ran to a valid time."]
    return answer.answer_lines(table)


def _headline(table: pd.DataFrame) -> str:
    """The sweep's best and knee points in one sentence (its first problem's, where it varies the problem)."""
    from tmasim.sweep import answer

    found = answer.find(table)
    if found is None or not found.fields:
        return ""
    fields = found.fields
    best, knee = answer.point_text(found.best, fields), answer.point_text(found.knee, fields)
    text = f"Best point: {best}, {_t(found.best['makespan_ns'])}; "
    if knee == best:
        return text + f"it is also the {names.term('knee')}."
    return text + f"{names.term('knee')}: {knee}, {_t(found.knee['makespan_ns'])}."


def _verdict(stats: Mapping[str, Any]) -> str:
    if stats.get("valid") is False:
        return f"INVALID RUN: {stats['invalid_reason']}. No time is reported for it; the timeline shows the races."
    races = (f" It has {plural(stats['races'], 'read')} of a slot before its data landed: a race."
             if stats.get("races") else "")
    return f"Takes {_t(stats['makespan_ns'])}. {explain(stats)}{races}{_trust(stats)}"


def _trust(stats: Mapping[str, Any]) -> str:
    trust = trust_for_row(stats)
    return f" Validated: {trust}." if trust else ""


def command_line(scenario: Any, overrides: Iterable[str], vary: Iterable[str],
                 zip_: bool | Sequence[str] = False) -> str:
    """The command that makes this report, as a reader would type it."""
    import shlex

    parts = ["tmasim", "report", str(scenario or "reference")]
    parts += [f"--set={o}" for o in overrides] + [f"--vary={v}" for v in vary]
    if vary and zip_:
        parts.append("--zip" if zip_ is True else f"--zip={','.join(zip_)}")
    return " ".join(shlex.quote(p) for p in parts)


def _save(fig: Figure, out: Path, name: str, trust: str | None = None) -> Path:
    from tmasim.review import plots

    return plots.save(fig, out / "figures" / f"{name}.png", trust=trust)[0]


def _stalls(table: pd.DataFrame) -> Figure:
    from tmasim.review import plots

    return plots.stall_breakdown(table)


def _sweep_figures(table: pd.DataFrame, out: Path, trust: str | None = None) -> list[tuple[str, str, Path]]:
    """The sweep against its main field, where the time went per point, and a heatmap for two fields;
    each with ``trust``, the base scenario's validated line."""
    from tmasim.review import plots
    from tmasim.review.columns import varied_fields

    fields = varied_fields(table)
    x = "pipeline.stages" if "pipeline.stages" in fields else fields[0]
    figures = [("Sweep", f"Time to finish against {x}: simulated (solid), bound (dashed), and where more stops "
                         "helping (ring); below, what each point costs in shared memory and residency.",
                _save(plots.stage_sweep(table, x=x), out, "sweep", trust))]
    if len(fields) >= 2:
        y = next(f for f in fields if f != x)
        figures.append(("Sweep", f"Time to finish over {x} and {y}; the best point outlined.",
                        _save(plots.heatmap(table, x, y), out, "heatmap", trust)))
    figures.append(("Where the time went", "Each point's makespan cut into the layers of its bounds: compute, "
                                           "the binding memory or latency term, and what no bound explains.",
                    _save(_stalls(table), out, "stalls", trust)))
    return figures


def _timeline_figures(result: Result, out: Path, first_tiles: int | None,
                      label: str = "the base scenario") -> list[tuple[str, str, Path]]:
    from tmasim.review import plots

    spans, events = result.spans, result.events
    counts = spans[spans["kind"] == "compute"].groupby(["sm", "cta"])["tile"].nunique()
    per_cta = int(counts.max()) if len(counts) else 0  # an attention run records its MMAs by phase instead
    tiles = first_tiles if first_tiles is not None else plots.suggested_tiles(spans)
    noun = plots.step_noun(spans)
    zoom = f" (zoomed to the first {tiles} {noun} of each CTA; the run has {per_cta})" if tiles else ""
    stats = result.stats
    took = "INVALID RUN (races)" if stats.get("valid") is False else _t(stats["makespan_ns"])
    title = f"{stats['scenario']}: {took} with {plural(stats['stages'], 'stage')} on {stats['gpu']}"
    if label != "the base scenario":
        title = f"{stats['scenario']}, {label.removeprefix('the ')}: {took} on {stats['gpu']}"
    section = f"Timeline of {label}"
    figures = [(section, f"Gantt chart{zoom}: copies, compute, barrier waits and phase "
                                                 "flips.", _save(plots.gantt(spans, events, title, tiles=tiles,
                                                                                  note=plots.representatives_note(stats)),
                                                                 out, "gantt", result.validated)),
               (section, "Shared-memory slots in use: copies in flight against landed data.",
                _save(plots.slot_occupancy(spans, scenario=stats["scenario"]), out, "slots", result.validated))]
    if not result.bandwidth.empty:
        figures.append((section, "Bandwidth of each shared link against its capacity.",
                        _save(plots.bandwidth(result.bandwidth, title=f"{stats['scenario']}: bandwidth"), out,
                              "bandwidth", result.validated)))
    return figures


# ------------------------------------------------------------------------------------ tables


def scenario_toml(raw: Mapping[str, Any]) -> str:
    """The scenario as TOML (written by tomli-w): top-level keys, then one [table] per section."""
    import tomli_w

    return tomli_w.dumps(dict(raw))


def summary_rows(stats: Mapping[str, Any], *, every: bool = False) -> list[tuple[str, str]]:
    """(name, value) rows: the key figures (those that say something: no zero FLOP/s for a
    workload without FLOPs), or every figure."""
    names = list(stats) if every else [k for k in KEY_FIGURES if stats.get(k) is not None and not (
        k.endswith("_per_s") and stats[k] == 0)]
    if stats.get("valid") is False:  # broken barriers: its times are not a kernel's, so none is shown
        names = ["valid", "invalid_reason", *(n for n in names if n not in ("valid", "invalid_reason")
                                              and not _is_timing(n))]
    return [(figure_label(name), figure_text(name, stats[name])) for name in names]


def _is_timing(name: str) -> bool:
    return name.endswith(("_ns", "_ps", "_per_s", "utilization")) or name in ("speedup", "efficiency")


def sweep_table(table: pd.DataFrame) -> Table:
    """The varied fields and the figures a reviewer reads first; every column is in the CSV."""
    from tmasim.review.columns import field_label, varied_fields

    columns = [*varied_fields(table), *(c for c in SWEEP_COLUMNS if c in table.columns and (
        not c.endswith("_per_s") or table[c].fillna(0).ne(0).any()))]
    fields = set(varied_fields(table))
    head = [field_label(c) if c in fields else figure_label(c) for c in columns]
    records = table[columns].to_dict("records")
    return Table(head, [[figure_text(c, row[c]) for c in columns] for row in records],
                 [row["status"] == "ok" for row in records], "sweep")


# -------------------------------------------------------------------------------------- HTML

def render(page: Page) -> str:
    """index.html: one file, no external resources (images inline as base64 PNG). The page is a
    Jinja template with autoescape on: every text from a scenario or a table is escaped."""
    import jinja2

    from tmasim.version import __version__

    env = jinja2.Environment(loader=jinja2.PackageLoader("tmasim.review", "templates"),
                             autoescape=jinja2.select_autoescape(default=True), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    sections: dict[str, list[dict[str, str]]] = {}
    for section, caption, png in page.figures:
        sections.setdefault(section, []).append({"caption": caption, "data": _png_base64(png)})
    style = (resources.files("tmasim.review") / "templates" / "report.css").read_text(encoding="utf-8")
    return env.get_template("report.html").render(page=page, sections=sections, version=__version__, style=style)


def _png_base64(png: Path) -> str:
    return base64.b64encode(png.read_bytes()).decode("ascii")
