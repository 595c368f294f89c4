"""The validation harness for whole pipelines: the model against public tables that time a
complete TMA -> mbarrier -> MMA pipeline, per point and per stage sweep.

The first table is the training half of a CUTLASS SM100 mainloop sweep on a B200
(``validation/public/b200/cutlass_mainloop_train.csv``): ONE CTA alone on the chip, one output
tile of TILE_M x TILE_N, K = 131072, stages 2-8. Each tile configuration is a stage sweep; its
*stage answer* (:data:`tmasim.names.TERMS`) is the fewest stages within 2% of the sweep's best
time (what "how many stages?" asks), measured against predicted. It is not the sweeps' *knee*
(the cheapest point within 1% of the best): the wider margin keeps a measurement's run-to-run
noise from deciding it.

The tile configurations are split once, by a fixed seed (``SPLIT_SEED``), into a fitted part and a
held-out part (``HOLDOUT`` of them): mechanism values may be fitted on the first only, and the
figures of both are reported apart. Whole-chip kernel results are never fitted to (they are
checks of shape; DESIGN §10).

``tmasim validate public`` prints these figures; ``validation/public/results/pipelines.json`` is the
committed baseline that CI's ratchet (tests/test_validate_public.py) compares with: a change may
improve the figures and commit the new baseline, never worsen them silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmasim import names

REPO = Path(__file__).resolve().parents[2]
PUBLIC = REPO / "validation" / "public"
BASELINE = PUBLIC / "results" / "pipelines.json"
STAGE_ANSWER_TOLERANCE = names.STAGE_ANSWER_TOLERANCE  # the stage answer: the fewest stages within 2% of the best
SPLIT_SEED = 0
HOLDOUT = 0.25  # share of the tile configurations held out of any fit
DTYPES = {"BF16": "bf16", "FP8_E4M3": "fp8"}
MAINLOOP_SOURCE = ("SemiAnalysisAI/microbench-blackwell, commit 9a068d8, cutlass_gemm_mainloop/results.csv "
                   "(training half; the other half is kept blind)")


@dataclass(frozen=True)
class Point:
    """One measured point of a stage sweep: ``config`` names its tile configuration."""

    config: str
    stages: int
    measured: float  # seconds
    overrides: tuple[str, ...]
    predicted: float | None = None


@dataclass(frozen=True)
class Table:
    """A public table of whole-pipeline measurements and how each row becomes a scenario."""

    name: str
    title: str
    source: str
    scenario: str
    points: Callable[[], list[Point]]


def mainloop_points(path: Path | None = None) -> list[Point]:
    """The mainloop table's rows with a stage count (``STAGES = 0`` is CUTLASS's automatic
    choice, not a point of the sweep), each as the overrides of a one-CTA ``gemm-b200`` run."""
    import pandas as pd

    frame = pd.read_csv(path or PUBLIC / "b200" / "cutlass_mainloop_train.csv")
    frame = frame[frame.STAGES >= 2]
    points = []
    for row in frame.itertuples(index=False):
        dtype = DTYPES[row.dtype]
        tile = f"[{row.TILE_M},{row.TILE_N},{row.TILE_K}]"
        config = f"{dtype} {row.TILE_M}x{row.TILE_N}x{row.TILE_K}"
        overrides = (f"workload.m={row.M}", f"workload.n={row.N}", f"workload.k={row.K}", f"workload.dtype={dtype}",
                     f"workload.tile={tile}", f"pipeline.stages={row.STAGES}", "pipeline.consumers=1",
                     # NoSmemWarpSpecialized1Sm: the epilogue stages nothing; a warm-up run fills L2
                     "workload.epilogue_smem=0 B", "workload.warm_l2=true")
        points.append(Point(config, int(row.STAGES), float(row.time_ms) / 1e3, overrides))
    return points


TABLES = (
    Table("b200-mainloop", "B200 one-CTA mainloop (CUTLASS SM100, training half)", MAINLOOP_SOURCE, "gemm-b200",
          mainloop_points),
)


def shape_checks() -> dict[str, Any]:
    """Whole-kernel results handed over as checks of shape (never fitted to): per row, measured
    against predicted, and the mean and worst error."""
    from tmasim.validation.attention_check import TABLES, fa3_rows, fa4_pipe_rows

    checks = {}
    for head_dim, path in TABLES.items():
        rows = fa3_rows(path)
        errors = [abs(r["error"]) for r in rows]
        checks[f"fa3-d{head_dim}"] = {
            "title": f"H100 SXM FlashAttention-3 forward, head dim {head_dim}, fp16, non-causal, 1830 MHz (TFLOP/s)",
            "source": "Dao-AILab/flash-attention assets/flash3_fp16_fwd.png, bar labels; clock: FA3 paper App. C.1",
            "mean_error": sum(errors) / len(errors), "max_error": max(errors), "rows": rows}
    rows = fa4_pipe_rows()
    errors = [abs(r["error"]) for r in rows]
    checks["fa4-pipes"] = {
        "title": ("B200 FlashAttention-4 forward, bf16: tensor and exponential pipe utilization at once "
                  "(share of the run)"),
        "source": "Dao-AILab/flash-attention issue #2701 (Nsight Compute); the run's shape not stated: attention-b200",
        "mean_error": sum(errors) / len(errors), "max_error": max(errors), "rows": rows}
    return checks


def held_out(configs: Iterable[str], seed: int = SPLIT_SEED, share: float = HOLDOUT) -> set[str]:
    """The tile configurations held out of fitting: a fixed-seed draw of ``share`` of them."""
    import numpy as np

    names = sorted(set(configs))
    count = round(share * len(names))
    picks = np.random.default_rng(seed).choice(len(names), size=count, replace=False)
    return {names[i] for i in picks}


def predict(table: Table, points: Sequence[Point], jobs: int = 1, extra: Sequence[str] = ()) -> list[Point]:
    """Each point with the model's predicted time (seconds); an invalid point predicts ``inf``.
    ``extra``: overrides added to every point (``gpu.tma_issue=80 cycles``, for a study or a fit)."""
    overrides = [p.overrides + tuple(extra) for p in points]
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs) as pool:
            times = list(pool.map(predicted_seconds, [table.scenario] * len(points), overrides, chunksize=4))
    else:
        times = [predicted_seconds(table.scenario, o) for o in overrides]
    return [Point(p.config, p.stages, p.measured, p.overrides, t) for p, t in zip(points, times, strict=True)]


def predicted_seconds(scenario: str, overrides: Sequence[str]) -> float:
    """The model's time for one table row (the scenario with its overrides); ``inf`` where the
    model refuses the row (a scenario error)."""
    from tmasim.errors import ScenarioError
    from tmasim.inputs.scenario import load
    from tmasim.simulation import simulate

    try:
        return float(simulate(load(scenario, overrides)).stats["makespan_ns"]) * 1e-9
    except ScenarioError:
        return math.inf


def stage_answer(times: dict[int, float], tolerance: float = STAGE_ANSWER_TOLERANCE) -> int:
    """The fewest stages whose time is within ``tolerance`` of the sweep's best."""
    best = min(times.values())
    return min(s for s, t in times.items() if t <= best * (1 + tolerance))


def figures(points: Sequence[Point]) -> dict[str, Any]:
    """Mean and worst error, stage-answer agreement and within-one-stage agreement of predicted points."""
    sweeps: dict[str, list[Point]] = {}
    for p in points:
        sweeps.setdefault(p.config, []).append(p)
    errors = [abs(p.predicted - p.measured) / p.measured for p in points if p.predicted is not None]
    rows: list[dict[str, Any]] = []
    for config, sweep in sorted(sweeps.items()):
        measured = stage_answer({p.stages: p.measured for p in sweep})
        predicted = stage_answer({p.stages: p.predicted for p in sweep if p.predicted is not None})
        error = max(abs(p.predicted - p.measured) / p.measured for p in sweep if p.predicted is not None)
        rows.append({"config": config, "stages_measured": measured, "stages_predicted": predicted,
                     "worst_error": error})
    right = sum(r["stages_measured"] == r["stages_predicted"] for r in rows)
    within = sum(abs(r["stages_measured"] - r["stages_predicted"]) <= 1 for r in rows)
    worst = sorted(rows, key=lambda r: -r["worst_error"])[:5]
    return {"points": len(points), "sweeps": len(rows), "mean_error": sum(errors) / len(errors) if errors else None,
            "max_error": max(errors) if errors else None, "stage_answer_right": right,
            "stage_answer_within_one": within, "worst": worst, "stage_answers": rows}


def validate(table: Table, jobs: int = 1, configs: set[str] | None = None, extra: Sequence[str] = ()) -> dict[str, Any]:
    """The table's figures, fitted and held-out parts apart (``configs``: only these sweeps)."""
    points = [p for p in table.points() if configs is None or p.config in configs]
    predicted = predict(table, points, jobs, extra)
    out = held_out(p.config for p in table.points())
    parts = {"fitted": [p for p in predicted if p.config not in out],
             "held_out": [p for p in predicted if p.config in out]}
    result: dict[str, Any] = {"table": table.name, "title": table.title, "source": table.source,
                              "split": f"{len(out)} of {len({p.config for p in table.points()})} tile configurations "
                                       f"held out (numpy default_rng({SPLIT_SEED}))",
                              "all": figures(predicted)}
    result.update({name: figures(part) for name, part in parts.items() if part})
    result["rows"] = [{"config": p.config, "stages": p.stages, "measured_s": p.measured, "predicted_s": p.predicted,
                       "held_out": p.config in out} for p in predicted]
    return result


from tmasim.output.trust import OLD_KEYS, baseline, figure, trust_for, trust_line  # noqa: E402,F401
