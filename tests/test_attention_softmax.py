"""The softmax as instructions on the SM's pipes (tmasim.workloads.attention_softmax): the counts
per block, the pipes they land on, the lead's chains, the two F2FP readings, FA4's emulated
exponentials, and the checks of shape that use them."""

from __future__ import annotations

import pytest

from tmasim.errors import ScenarioError
from tmasim.hardware import load_gpu
from tmasim.workloads.attention_config import AttentionConfig
from tmasim.workloads.attention_softmax import convert_work, multiplies, softmax_work


def _h100(**changes):
    return load_gpu({"preset": "h100-sxm", "clock": "1 GHz", **changes})  # 1 GHz: a cycle is 1000 ps


def test_fa3_head_dim_64_block_in_cycles():
    """64 rows x 128 keys: 8192 exponentials + 256 rescale factors (each of a row's four threads)
    at 16 a clock = 528 cycles on the XU; issue: 8192 FFMA + 8192 FADD + 256 + 768 scalars + 8448
    EX2 = 25856 thread instructions at 128 = 202 cycles; the FMA pipe (17408 at 128 = 136) is left
    to the issue slots, which dominate it. The lead: the row max, 32 dependent FMNMX (4 cycles
    each = 128) or 8704 FMNMX at 64 a clock (136), two shuffle rounds of 30, the scaled max and
    the last add (2 x 4) and the last exponential (18): 222 cycles."""
    gpu = _h100()
    work = softmax_work(gpu, 1.0, 64, 128, convert=False)
    assert (work.xu, work.fma, work.alu, work.issue, work.lead) == (528_000, 0, 0, 202_000, 222_000)
    # the conversion after P·V: 4096 F2FP at 64 a clock on the ALU, and their issue slots
    assert convert_work(gpu, 1.0, 64, 128).pipes == (0, 0, 64_000, 32_000)
    # the rescale of O: 4096 FMUL, issue-bound at 128 a clock
    assert multiplies(gpu, 1.0, 64 * 64).pipes == (0, 0, 0, 32_000)


def test_the_other_f2fp_reading_puts_the_conversion_beside_the_exponentials():
    gpu = _h100(convert_per_clock=16, convert_pipe="xu")
    assert convert_work(gpu, 1.0, 64, 128).pipes == (256_000, 0, 0, 32_000)
    assert softmax_work(gpu, 1.0, 64, 128).xu == 528_000 + 256_000


def test_without_an_issue_limit_the_fma_pipe_is_charged():
    gpu = _h100(issue_per_clock=0)
    work = softmax_work(gpu, 1.0, 64, 128, convert=False)
    assert work.issue == 0 and work.fma == 136_000  # 2 x 8192 + 256 + 768 FMA-pipe results at 128


def test_a_slower_alu_or_longer_latencies_lengthen_the_lead():
    base = softmax_work(_h100(), 1.0, 64, 128).lead
    assert softmax_work(_h100(minmax_latency="8 cycles"), 1.0, 64, 128).lead == base - 136_000 + 256_000
    assert softmax_work(_h100(shuffle_latency="40 cycles"), 1.0, 64, 128).lead == base + 20_000


def test_fa4_rows_need_no_shuffle_and_emulate_a_share_of_the_exponentials():
    gpu = load_gpu({"preset": "b200", "clock": "1 GHz"})
    plain = softmax_work(gpu, 1.0, 128, 128)
    emulated = softmax_work(gpu, 1.0, 128, 128, emulated=0.25)
    # 16384 scores + 128 rescale factors (one thread a row) at 16 a clock; a quarter moved off the XU
    assert plain.xu == (16384 + 128) * 1000 // 16
    assert emulated.xu == (16384 * 0.75 + 128) * 1000 // 16
    assert emulated.alu == 3 * 4096 * 1000 // 128 + 8192 * 1000 // 64  # emulation's ALU + the conversion
    # the lead: 128 keys a thread in four three-input chains (16 + 2 steps of 4 cycles), no shuffle
    assert plain.lead == max(18 * 4000, (16384 // 2) * 1000 // 128) + 2 * 4000 + 18_000


@pytest.mark.parametrize("value", [-0.1, 1.5, "a lot", True])
def test_exp_emulated_is_a_share(value):
    with pytest.raises(ScenarioError, match="workload.exp_emulated"):
        AttentionConfig(batch=1, heads=1, seqlen_q=128, head_dim=128, tile=(128, 128), exp_emulated=value)


def test_fa4_emulates_by_default_and_fa3_does_not():
    config = AttentionConfig(batch=1, heads=1, seqlen_q=128, head_dim=128, tile=(128, 128))
    assert (config.emulated_share(True), config.emulated_share(False)) == (0.2, 0.0)


def test_the_conversion_pipe_is_checked():
    with pytest.raises(ScenarioError, match="gpu.convert_pipe"):
        _h100(convert_pipe="tensor")


def test_the_fa3_head_dim_64_row_is_a_second_check_at_the_stated_clock():
    from tmasim.validation import pipelines
    from tmasim.validation.attention_check import CLOCK, TABLES, read_table, scenario_for

    assert CLOCK == "1.83 GHz"
    rows = read_table(TABLES[64])
    assert [r["tflops"] for r in rows] == [333, 392, 460, 476, 496, 497]
    assert all(r["heads"] * r["head_dim"] == 2048 for r in rows)
    assert scenario_for(rows[0]).gpu.clock_hz == 1.83e9
    assert {"fa3-d128", "fa3-d64", "fa4-pipes"} <= set(pipelines.baseline())


def test_fa4s_pipes_are_both_busy_at_once_as_measured():
    """A check of shape: the tensor pipe the busier, both above half the run."""
    from tmasim.validation.attention_check import fa4_pipe_rows

    tensor, exponential = fa4_pipe_rows()
    assert tensor["predicted"] > exponential["predicted"] > 0.5
    assert abs(tensor["error"]) < 0.1 and abs(exponential["error"]) < 0.1
