"""How well the model did on the validated cases closest to a scenario, from the harness's
committed results (``validation/public/results/pipelines.json``). Reads a file, runs nothing, so
the review side (summary, reports) can quote it without reaching the engine."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BASELINE = Path(__file__).resolve().parents[2] / "validation" / "public" / "results" / "pipelines.json"
# The figures' keys before the stage answer had its own name (a baseline or --json output written then).
OLD_KEYS = {"stage_answer_right": "knee_right", "stage_answer_within_one": "knee_within_one",
            "stage_answers": "knees", "stages_measured": "knee_measured", "stages_predicted": "knee_predicted"}


def figure(figures: Mapping[str, Any], key: str) -> Any:
    """One of a table's figures (:func:`tmasim.validation.pipelines.figures`), from figures written
    under today's keys or the old ones."""
    return figures[key] if key in figures or key not in OLD_KEYS else figures[OLD_KEYS[key]]


def baseline() -> dict[str, Any]:
    """The committed figures (``validation/public/results/pipelines.json``), or {} before any.
    Read once per version of the file (every summary and every sweep row asks for it); every
    caller only reads it, and must not change it (the next caller gets the same object)."""
    try:
        stamp = BASELINE.stat().st_mtime_ns
    except OSError:
        return {}
    return _read_baseline(stamp)


@functools.lru_cache(maxsize=2)
def _read_baseline(stamp: int) -> dict[str, Any]:
    return json.loads(BASELINE.read_text())


def trust_for(scenario: Any) -> str:
    """How well the model did on the validated cases closest to ``scenario`` (from the committed
    results), or that nothing close to it was validated against a measured pipeline."""
    kind = getattr(scenario.workload, "kind", "")
    units = getattr(scenario.workload, "units", 0)
    if kind == "attention":
        w = scenario.workload
        return attention_line(scenario.gpu.name, {"causal": w.causal, "head_dim": w.head_dim})
    if kind == "gemm" and scenario.gpu.name == "b200" and units > 1:
        w, p = scenario.workload, scenario.pipeline
        line = wholechip_line((w.m, w.n, w.k), (w.tile[0], w.tile[1]), tuple(p.cluster), p.mma_cta_group == 2)
        if line:
            return line
    return trust(kind, scenario.gpu.name, units)


def shape_class(m: int, n: int, k: int) -> str:
    """Short kernels (K, M or N of 512 or less: what a launch costs outside the mainloop shows)
    or large ones: the classes of the whole-chip table's cases."""
    return "short" if min(m, n, k) <= 512 else "large"


def case(shape: tuple[int, int, int], tile: tuple[int, int], cluster: tuple[int, int]) -> str:
    """The key of a (shape class, tile, cluster) case in the whole-chip table's committed figures."""
    return f"{shape_class(*shape)} {tile[0]}x{tile[1]} ({cluster[0]},{cluster[1]})"


def wholechip_line(shape: tuple[int, int, int], tile: tuple[int, int], cluster: tuple[int, ...],
                   pair: bool) -> str | None:
    """The B200 whole-chip table's error on the cases nearest a GEMM: its shape class, tile and
    cluster where the table has them (2-SM pairs only), else its shape class."""
    result = baseline().get("b200-wholechip")
    if not result or "cases" not in result:
        return None
    cases, near = result["cases"], case(shape, tile, (cluster[0], cluster[1]))
    key = near if pair and near in cases else shape_class(*shape)
    if key not in cases:
        return None
    c, every = cases[key], result["all"]
    parts = key.split()
    what = (f"{parts[0]} shapes, {parts[1]} tiles, cluster {parts[2]}" if key == near
            else f"{key} shapes, all tiles and clusters")
    lean = "optimistic" if c["bias"] < 0 else "pessimistic"
    return (f"B200 whole-chip GEMMs at 1.3 GHz (2-SM pairs), nearest cases ({what}): mean error "
            f"{c['mean_error']:.0%} over {c['runs']} runs, {lean} on average; all {every['points']} runs "
            f"{every['mean_error']:.0%} (tmasim validate public)")


def trust_for_row(row: Mapping[str, Any]) -> str | None:
    """:func:`trust_for` from a run's stats or a sweep's row: the line its run wrote (``validated``,
    from the whole scenario: a whole-chip B200 GEMM's nearest cases by shape, tile and cluster),
    else from its workload, gpu and work units; None for a row that says neither."""
    written = row.get("validated")
    if isinstance(written, str) and written:
        return written
    if not row.get("gpu") or not row.get("workload"):
        return None
    units = row.get("tiles")
    if row.get("workload") == "attention":
        return attention_line(str(row.get("gpu", "")), row)
    return trust(str(row.get("workload", "")), str(row.get("gpu", "")), int(units) if units == units and units else 0)


FA3_HEAD_DIMS = (128, 64)  # the FlashAttention-3 checks: non-causal rows of these head dims, at 1830 MHz


def attention_line(gpu: str, problem: Mapping[str, Any]) -> str:
    """The FlashAttention-3 check's figures for a run one covers (H100, non-causal, head dim 128
    or 64); for any other attention run, that nothing measured covers it, naming the check nearest
    it. A row that does not say its mask or head dim (a table from an older tmasim) gets the head
    dim 128 check with its scope in the line."""
    found = baseline()
    if gpu != "h100-sxm" or not all(f"fa3-d{d}" in found for d in FA3_HEAD_DIMS):
        return trust("attention", gpu, 0)
    causal, head_dim = problem.get("causal"), problem.get("head_dim")
    dim = int(head_dim) if head_dim is not None else 128
    nearest = min(FA3_HEAD_DIMS, key=lambda d: (abs(d - dim), -d))
    check = found[f"fa3-d{nearest}"]
    figures = f"mean error {check['mean_error']:.0%}, worst {check['max_error']:.0%}, optimistic on every row"
    name = f"FlashAttention-3 forward at 1830 MHz (d{nearest}, non-causal, a check of shape)"
    if not causal and dim == nearest:
        return f"H100 {name}: {figures}"
    what = ", ".join(["causal" if causal else "non-causal", f"head dim {dim}"])
    return (f"H100 attention forward ({what}): not validated against a measured pipeline; the nearest check, "
            f"{name}, has {figures}")


def trust(kind: str, gpu: str, units: int) -> str:
    """The trust line for a workload kind on a preset with that many work units."""
    if kind == "tiles":
        return ("tiles of given load and compute times: exact against the closed forms and the max-plus "
                "recurrence (the test suite); the times are the scenario's, not a measurement")
    if kind == "gemm" and gpu == "b200" and units == 1:
        line = trust_line("b200-mainloop")
        if line:
            return line
    if kind == "gemm" and gpu == "b200" and units > 1:
        whole = baseline().get("b200-wholechip")
        if whole:  # a sweep's row: no shape or tile to find the nearest cases by
            return (f"B200 whole-chip GEMMs at 1.3 GHz (2-SM pairs): mean error {whole['all']['mean_error']:.0%} over "
                    f"{whole['all']['points']} runs (tmasim validate public names the nearest cases)")
    if not BASELINE.exists():  # an installed package: the results ship with the repository
        return ("the validation results are not installed (they ship with the repository: "
                "validation/public/results/pipelines.json)")
    what = {"gemm": "GEMM", "attention": "attention", "stream": "TMA stream"}.get(kind, kind)
    scope = "one-CTA" if units == 1 else "whole-chip"
    return f"{gpu} {scope} {what}: not validated against a measured pipeline (tmasim validate public lists what is)"


def trust_line(table_name: str) -> str | None:
    """One line on how well the model did on a validated table, from the committed results."""
    result = baseline().get(table_name)
    if not result:
        return None
    from tmasim import names

    part = result["all"]
    title = result["title"].split(" (")[0]
    return (f"{title}: {names.term('stage answer')} right on {figure(part, 'stage_answer_right')} of "
            f"{part['sweeps']} tiles "
            f"(within one stage on {figure(part, 'stage_answer_within_one')}), mean error {part['mean_error']:.0%}")
