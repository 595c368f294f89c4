"""FlashAttention-3's published forward throughput against the model: checks of *shape*.

``validation/public/h100-sxm/fa3_fwd_fp16_hdim128.csv`` and ``..._hdim64.csv`` hold FA3's
head-dim-128 and head-dim-64 non-causal rows (H100 SXM5, fp16, batch x seqlen = 16k, heads x
head_dim = 2048; the bar labels of ``assets/flash3_fp16_fwd.png`` in Dao-AILab/flash-attention).
Nothing in the model is fitted to them (DESIGN §10: a whole-kernel result is never a calibration
source); :func:`fa3_rows` runs the bundled ``attention-h100`` scenario with each row's shape at
the clock the source states (:data:`CLOCK`: FA3's appendix C.1, "we fix the GPU clock speed to
1830MHz") and reports predicted against measured, for the validation harness
(``tmasim validate public``) to plug in.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from tmasim.inputs.scenario import apply_overrides, from_dict, read_raw
from tmasim.simulation import simulate

FOLDER = Path(__file__).resolve().parents[2] / "validation" / "public" / "h100-sxm"
TABLE = FOLDER / "fa3_fwd_fp16_hdim128.csv"
TABLES = {128: TABLE, 64: FOLDER / "fa3_fwd_fp16_hdim64.csv"}  # head dim -> its row
SCENARIO = "attention-h100"
CLOCK = "1.83 GHz"  # FA3 paper, arXiv 2407.08608, appendix C.1: "we fix the GPU clock speed to 1830MHz"


def read_table(path: Path = TABLE) -> list[dict[str, Any]]:
    """The measured rows (lines starting with ``#`` are the source note)."""
    with path.open() as handle:
        lines = [line for line in handle if not line.startswith("#")]
    rows = []
    for row in csv.DictReader(lines):
        rows.append({"seqlen": int(row["seqlen"]), "batch": int(row["batch"]), "heads": int(row["heads"]),
                     "head_dim": int(row["head_dim"]), "causal": row["causal"].strip().lower() == "true",
                     "tflops": float(row["tflops"])})
    return rows


def scenario_for(row: dict[str, Any], changes: list[str] | None = None):
    """The bundled FA3 scenario with the row's problem (fp16, its batch, heads, seqlen, head dim)
    at the source's clock (:data:`CLOCK`), the tile and the number of consumer warpgroups FA3
    picks for it (:func:`~tmasim.workloads.attention_config.fa3_tile`), the rest (2 stages,
    ping-pong, softmax overlap) as the scenario."""
    raw, base = read_raw(SCENARIO)
    raw["workload"].pop("tile", None)  # FA3's own tile for the shape (hopper/tile_size.h)
    raw["pipeline"].pop("consumers", None)
    overrides = {"name": f"fa3-d{row['head_dim']}-s{row['seqlen']}", "gpu.clock": CLOCK, "workload.dtype": "fp16",
                 "workload.batch": row["batch"], "workload.heads": row["heads"], "workload.seqlen_q": row["seqlen"],
                 "workload.head_dim": row["head_dim"], "workload.causal": row["causal"]}
    return from_dict(apply_overrides(apply_overrides(raw, overrides), changes or []), base)


def fa3_rows(path: Path = TABLE, changes: list[str] | None = None) -> list[dict[str, Any]]:
    """Per measured row: ``name``, ``measured`` and ``predicted`` (TFLOP/s) and ``error``
    (predicted / measured - 1); ``changes``: ``FIELD=VALUE`` settings for every row (a what-if)."""
    out = []
    for row in read_table(path):
        scenario = scenario_for(row, changes)
        predicted = simulate(scenario).stats["achieved_flops_per_s"] / 1e12
        out.append({"name": scenario.name, "measured": row["tflops"], "predicted": predicted,
                    "error": predicted / row["tflops"] - 1})
    return out


def main(argv: list[str] | None = None) -> None:
    """``python -m tmasim.validation.attention_check [--head-dim D] [--set FIELD=VALUE ...]``: each
    row, measured against predicted, and the mean and worst error per head dim; ``--set`` studies a
    what-if (``--set gpu.convert_per_clock=16``) on every row."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tmasim.validation.attention_check")
    parser.add_argument("--head-dim", type=int, choices=sorted(TABLES), action="append")
    parser.add_argument("--set", dest="changes", action="append", default=[], metavar="FIELD=VALUE")
    args = parser.parse_args(argv)
    for head_dim in args.head_dim or sorted(TABLES, reverse=True):
        rows = fa3_rows(TABLES[head_dim], args.changes)
        for row in rows:
            print(f"{row['name']:<20} measured {row['measured']:6.1f}  predicted {row['predicted']:6.1f} TFLOP/s  "
                  f"error {100 * row['error']:+6.1f}%")
        errors = [abs(r["error"]) for r in rows]
        print(f"head dim {head_dim}: mean error {sum(errors) / len(errors):.1%} (worst {max(errors):.1%})")


if __name__ == "__main__":
    main()


# FA4 on B200 (BF16): Nsight Compute's pipe utilizations in one run, Dao-AILab/flash-attention issue #2701,
# as restated in calibration/hopper/attention-softmax.md section 4; the shape of the run is not stated there,
# so the bundled attention-b200 scenario (FA4's forward, head dim 128, long sequences) stands for it.
FA4_PIPES = {"tensor": 0.877, "exponential": 0.719}
FA4_SCENARIO = "attention-b200"


def fa4_pipe_rows() -> list[dict[str, Any]]:
    """FA4's published pipe utilizations on a B200 against the model's (a check of shape: both
    pipes busy at once, the tensor pipe the busier): per pipe ``name``, ``measured``,
    ``predicted`` (shares of the run) and ``error``."""
    from tmasim.inputs.scenario import load

    stats = simulate(load(FA4_SCENARIO)).stats
    predicted = {"tensor": stats["compute_utilization"], "exponential": stats["exp_utilization"]}
    return [{"name": f"fa4 {pipe} pipe", "measured": FA4_PIPES[pipe], "predicted": predicted[pipe],
             "error": predicted[pipe] / FA4_PIPES[pipe] - 1} for pipe in FA4_PIPES]
