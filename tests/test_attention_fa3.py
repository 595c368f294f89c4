"""FA3's published d128 non-causal forward row against the model (a check of shape, not a fit)."""

from __future__ import annotations

from tmasim.validation.attention_check import fa3_rows, read_table


def test_the_table_reads_and_every_row_runs():
    table = read_table()
    assert [row["seqlen"] for row in table] == [512, 1024, 2048, 4096, 8192, 16384]
    assert all(row["batch"] * row["seqlen"] == 16384 and row["heads"] * row["head_dim"] == 2048 for row in table)
    rows = fa3_rows()
    assert [set(row) for row in rows] == [{"name", "measured", "predicted", "error"}] * len(table)
    for row in rows:
        assert row["predicted"] > 0
        assert row["error"] == row["predicted"] / row["measured"] - 1


def test_the_ablation_order_comes_out_of_the_mechanisms():
    """FA3's two switches: ping-pong of the warpgroups and the softmax of block j under the GEMMs
    of block j + 1 inside a warpgroup. Full pipeline faster than without the intra-warpgroup
    overlap, faster than neither (cooperative warpgroups, no overlap)."""
    from tmasim.scenario import load
    from tmasim.simulation import simulate

    base = ["workload.dtype=fp16", "workload.batch=1", "workload.heads=8", "workload.seqlen_q=8192"]

    def tflops(*extra: str) -> float:
        return simulate(load("attention-h100", [*base, *extra])).stats["achieved_flops_per_s"]

    full = tflops()
    no_intra = tflops("workload.softmax_overlap=false")
    neither = tflops("workload.softmax_overlap=false", "pipeline.consumer_mode=cooperative")
    assert full > no_intra > neither
