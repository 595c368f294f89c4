"""The whole-chip validation table: CUTLASS CuTeDSL persistent GEMMs on all 148 SMs of a B200 at
a clock locked to 1.3 GHz (``validation/public/b200/wholechip_train.csv``, the training half: 18
of 40 DeepSeek-V3 shapes; the other 22 are kept blind by the team).

Each row is one kernel run: a shape (M, N, K), fp16 or fp8 in and out, a CTA tile (cta_m x cta_n)
and a cluster, (2, 1) or (2, 2). How a row becomes a ``gemm-b200`` scenario (:func:`overrides`):

- the kernel, ``examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm_persistent.py``,
  always uses the 2-SM MMA (``tcgen05.mma.cta_group::2``): a CTA pair along M computes a
  (2·cta_m) x cta_n tile, each CTA holding cta_m rows of A and half of B
  (``pipeline.mma_cta_group = 2``, ``workload.tile = [cta_m, cta_n, BK]``);
- a k-step is 4 MMA instructions deep: BK = 4 x 16 = 64 fp16 or 4 x 32 = 128 fp8 elements (128 B);
- the (2, 2) cluster is two pairs along N: they share the A box, each CTA loading half of it and
  multicasting it to its peer (the example's ``num_mcast_ctas_a = cluster_n``); B is not
  multicast beyond the pair (``num_mcast_ctas_b = cluster_m / 2 = 1``): ``workload.multicast = a``;
- stages: the example's rule (``_compute_stages``): ``pipeline.stages = "auto"``
  (:mod:`tmasim.workloads.gemm_stages`), with the epilogue's shared memory that rule leaves;
- the static persistent scheduler walks clusters along M first (``swizzle_size = 1``):
  ``workload.raster = column``;
- 1.3 GHz (``nvidia-smi -lgc 1300,1300``), a cold L2 (``use_cold_l2``: rotating workspaces), the
  output in the input's type (fp16, or e4m3 for fp8), M, N and K padded to 16 bytes.

The shapes fall in families, one per layer of the model (its forward, data-gradient and
weight-gradient GEMMs share two dimensions besides the 4096 tokens); fitting holds whole
families out (``HOLDOUT_FAMILIES``, drawn once by a fixed seed), never rows.

Figures, per part and dtype: the mean error; on how many shapes the model's best (tile, cluster)
is within 1% of the measured best; and on how many (tile) pairs whose measured (2, 1) and (2, 2)
times differ by more than 2% the model picks the faster cluster.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tmasim.output.trust import case, shape_class
from tmasim.validation.pipelines import PUBLIC, SPLIT_SEED

TABLE = PUBLIC / "b200" / "wholechip_train.csv"
SCENARIO = "gemm-b200"
CLOCK = "1.3 GHz"
HOLDOUT_FAMILIES = 2  # of the training half's 6 families
BEST_TOLERANCE = 0.01  # the model's best configuration is right when measured within 1% of the best
CLUSTER_MARGIN = 0.02  # cluster pairs whose measured times differ by more than 2%
SOURCE = ("hbarclay/gemm-model, results/dsv3_fp16.csv and results/dsv3_fp8.csv (measured CSVs at commit 822ff43): "
          "CUTLASS CuTeDSL dense_gemm_persistent on a B200 at 1.3 GHz (training half: 18 of 40 shapes; the other "
          "22 are kept blind)")
# The rows CI runs (tests/test_validate_public.py): every configuration of the shapes that take the
# least time to simulate, from every family; `tmasim validate public` runs all 576.
CI_SHAPES = ((192, 4096, 4096), (4096, 192, 4096), (4096, 4096, 192), (4096, 512, 7168), (4096, 7168, 512),
             (7168, 512, 4096), (4096, 2048, 7168), (2048, 7168, 4096), (4096, 1536, 16384))
ELEMENT_BYTES = {"fp16": 2, "fp8": 1}
OUT_DTYPES = {"fp16": "fp16", "fp8": "fp8"}  # the output in the input's type (e4m3 for fp8)


@dataclass(frozen=True)
class Row:
    """One kernel run of the table and the scenario overrides that reproduce it."""

    shape: tuple[int, int, int]
    dtype: str
    tile: tuple[int, int]
    cluster: tuple[int, int]
    measured: float  # seconds
    predicted: float | None = None

    @property
    def family(self) -> str:
        return family(self.shape)

    @property
    def config(self) -> str:
        return f"{self.tile[0]}x{self.tile[1]} ({self.cluster[0]},{self.cluster[1]})"

    @property
    def problem(self) -> str:
        return f"{self.dtype} {'x'.join(map(str, self.shape))}"


def family(shape: tuple[int, int, int]) -> str:
    """A shape's layer: its two dimensions besides one of the 4096 tokens, smaller first
    (4096 x 7168 x 512, 4096 x 512 x 7168 and 7168 x 512 x 4096 are one layer's three GEMMs)."""
    dims = list(shape)
    dims.remove(4096)
    return "x".join(map(str, sorted(dims)))


def padded(extent: int, dtype: str) -> int:
    """The benchmark pads every dimension to 16 bytes."""
    per = 16 // ELEMENT_BYTES[dtype]
    return -(-extent // per) * per


def overrides(row: Row) -> tuple[str, ...]:
    """The ``gemm-b200`` overrides that reproduce one kernel run (see the module doc)."""
    m, n, k = (padded(d, row.dtype) for d in row.shape)
    bk = 128 // ELEMENT_BYTES[row.dtype]
    sets = [f"workload.m={m}", f"workload.n={n}", f"workload.k={k}", f"workload.dtype={row.dtype}",
            f"workload.out_dtype={OUT_DTYPES[row.dtype]}", f"workload.tile=[{row.tile[0]},{row.tile[1]},{bk}]",
            "workload.raster=column", "workload.launch=persistent", "pipeline.consumers=1",
            "pipeline.mma_cta_group=2", f"pipeline.cluster=[{row.cluster[0]},{row.cluster[1]}]",
            "pipeline.stages=auto", f"gpu.clock={CLOCK}"]
    if row.cluster[1] > 1:
        sets.append("workload.multicast=a")
    return tuple(sets)


def rows(path: Path | None = None) -> list[Row]:
    import pandas as pd

    frame = pd.read_csv(path or TABLE)
    return [Row((int(r.m), int(r.n), int(r.k)), str(r.in_dtype), (int(r.cta_m), int(r.cta_n)),
                (int(r.cluster_m), int(r.cluster_n)), float(r.runtime_us) * 1e-6)
            for r in frame.itertuples(index=False)]


def held_out(families: Sequence[str], seed: int = SPLIT_SEED, count: int = HOLDOUT_FAMILIES) -> set[str]:
    """The families held out of fitting: a fixed-seed draw of ``count`` of them."""
    import numpy as np

    names = sorted(set(families))
    picks = np.random.default_rng(seed).choice(len(names), size=count, replace=False)
    return {names[i] for i in picks}


def predict(found: Sequence[Row], jobs: int = 1, extra: Sequence[str] = ()) -> list[Row]:
    """Each row with the model's time (seconds); a row the model refuses predicts ``inf``."""
    from tmasim.validation.pipelines import predicted_seconds

    sets = [overrides(r) + tuple(extra) for r in found]
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs) as pool:
            times = list(pool.map(predicted_seconds, [SCENARIO] * len(found), sets, chunksize=2))
    else:
        times = [predicted_seconds(SCENARIO, s) for s in sets]
    return [replace(r, predicted=t) for r, t in zip(found, times, strict=True)]


def _signed(row: Row) -> float:
    assert row.predicted is not None
    return (row.predicted - row.measured) / row.measured


def _error(row: Row) -> float:
    assert row.predicted is not None
    return abs(row.predicted - row.measured) / row.measured


def figures(found: Sequence[Row]) -> dict[str, Any]:
    """Mean and worst error, the best configuration per problem, the cluster choice; each also per dtype."""
    result = _figures(found)
    result["by_dtype"] = {d: _figures([r for r in found if r.dtype == d]) for d in sorted({r.dtype for r in found})}
    return result


def _figures(found: Sequence[Row]) -> dict[str, Any]:
    errors = [_error(r) for r in found if r.predicted is not None and math.isfinite(r.predicted)]
    problems: dict[str, list[Row]] = {}
    for r in found:
        problems.setdefault(r.problem, []).append(r)
    best_right, misses = 0, []
    for name, runs in sorted(problems.items()):
        fastest = min(r.measured for r in runs)
        pick = min(runs, key=lambda r: (r.predicted, r.measured))
        if pick.measured <= fastest * (1 + BEST_TOLERANCE):
            best_right += 1
        else:
            misses.append({"problem": name, "picked": pick.config, "best": min(runs, key=lambda r: r.measured).config,
                           "slower": pick.measured / fastest - 1})
    pairs = right = 0
    for runs in problems.values():
        by_tile: dict[tuple[int, int], dict[tuple[int, int], Row]] = {}
        for r in runs:
            by_tile.setdefault(r.tile, {})[r.cluster] = r
        for clusters in by_tile.values():
            if len(clusters) != 2:
                continue
            one, two = clusters.values()
            if abs(one.measured - two.measured) <= CLUSTER_MARGIN * min(one.measured, two.measured):
                continue
            pairs += 1
            assert one.predicted is not None and two.predicted is not None
            right += (one.measured < two.measured) == (one.predicted < two.predicted)
    worst = sorted(found, key=lambda r: -_error(r))[:5]
    return {"points": len(found), "problems": len(problems), "refused": len(found) - len(errors),
            "mean_error": sum(errors) / len(errors) if errors else math.nan,
            "max_error": max(errors) if errors else math.nan,
            "best_right": best_right, "cluster_pairs": pairs, "cluster_right": right, "best_missed": misses,
            "worst": [{"problem": r.problem, "config": r.config, "measured_us": r.measured * 1e6,
                       "predicted_us": (r.predicted or 0) * 1e6, "error": _error(r)} for r in worst]}


def validate(jobs: int = 1, ci_only: bool = False, extra: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """The table's figures, fitted and held-out families apart: ``b200-wholechip`` over every row
    and ``b200-wholechip-ci`` over the CI subset (``ci_only``: simulate that subset alone)."""
    table = rows()
    out = held_out([r.family for r in table])
    chosen = [r for r in table if not ci_only or r.shape in CI_SHAPES]
    predicted = predict(chosen, jobs, extra)
    results = {"b200-wholechip-ci": _result([r for r in predicted if r.shape in CI_SHAPES], out, table, ci=True)}
    if not ci_only:
        results = {"b200-wholechip": _result(predicted, out, table, ci=False), **results}
    return results


def _result(predicted: Sequence[Row], out: set[str], table: Sequence[Row], ci: bool) -> dict[str, Any]:
    parts = {"fitted": [r for r in predicted if r.family not in out],
             "held_out": [r for r in predicted if r.family in out]}
    families = sorted({r.family for r in table})
    result: dict[str, Any] = {
        "table": "b200-wholechip-ci" if ci else "b200-wholechip",
        "title": "B200 whole-chip GEMMs at 1.3 GHz (CuTeDSL persistent, 2-SM MMA, training half"
                 + (", the CI subset)" if ci else ")"),
        "source": SOURCE, "kind": "wholechip",
        "split": f"{len(out)} of {len(families)} shape families held out ({', '.join(sorted(out))}; "
                 f"numpy default_rng({SPLIT_SEED}))",
        "all": figures(predicted)}
    result.update({name: figures(part) for name, part in parts.items() if part})
    cases: dict[str, list[float]] = {}
    for r in predicted:
        cases.setdefault(case(r.shape, r.tile, r.cluster), []).append(_signed(r))
        cases.setdefault(shape_class(*r.shape), []).append(_signed(r))
    result["cases"] = {k: {"runs": len(v), "mean_error": sum(map(abs, v)) / len(v), "bias": sum(v) / len(v)}
                       for k, v in sorted(cases.items()) if all(map(math.isfinite, v))}
    result["rows"] = [{"problem": r.problem, "family": r.family, "config": r.config, "measured_s": r.measured,
                       "predicted_s": r.predicted, "held_out": r.family in out} for r in predicted]
    return result


def text(result: dict[str, Any]) -> str:
    """What ``tmasim validate public`` prints for the table."""
    lines = [f"{result['title']}  [{result['source']}]", f"  split: {result['split']}"]
    for part in ("fitted", "held_out", "all"):
        f = result.get(part)
        if not f:
            continue
        dtypes = ", ".join(f"{d} {g['mean_error']:.1%}" for d, g in f["by_dtype"].items())
        best = ", ".join(f"{d} {g['best_right']} of {g['problems']}" for d, g in f["by_dtype"].items())
        lines.append(f"  {part.replace('_', '-'):9s} {f['points']:4d} runs: mean error {f['mean_error']:.1%} "
                     f"({dtypes}; worst {f['max_error']:.1%}); best (tile, cluster) within 1% on {best} shapes; "
                     f"cluster choice right on {f['cluster_right']} of {f['cluster_pairs']} pairs")
    lines.append("  worst runs (measured / predicted):")
    for w in result["all"]["worst"]:
        lines.append(f"    {w['problem']:22s} {w['config']:15s} {w['measured_us']:8.1f} / {w['predicted_us']:8.1f} µs "
                     f"({w['error']:.1%})")
    return "\n".join(lines)
