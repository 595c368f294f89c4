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
