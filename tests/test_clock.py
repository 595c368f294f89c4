"""The clock a run assumes: each preset says where its clock comes from, and the power-limited
clock measured for dense kernels is one keyword away where a measurement exists."""

from __future__ import annotations

import pytest

from tmasim.errors import ScenarioError
from tmasim.hardware import load_gpu


def test_h100_runs_at_its_dense_peak_clock_and_names_the_power_limited_one() -> None:
    gpu = load_gpu("h100-sxm")
    assert gpu.clock_hz == 1.83e9 and gpu.power_limited_clock == 1.575e9
    assert gpu.clock_text() == ("1.83 GHz (the clock NVIDIA's dense peak assumes; max boost 1.98 GHz; measured at "
                                "the power limit: 1.575 GHz, --set gpu.clock=power-limited)")


def test_the_power_limited_keyword_runs_at_the_measured_clock_and_says_so() -> None:
    gpu = load_gpu({"preset": "h100-sxm", "clock": "power-limited"})
    assert gpu.clock_hz == 1.575e9
    assert gpu.clock_text().startswith("1.575 GHz (power-limited; max boost 1.98 GHz)")
    # the MMA table's peak follows the clock: 132 SMs x 4096 FLOP/cycle
    assert gpu.tensor_flops["bf16"] * 1e12 == pytest.approx(132 * 4096 * 1.575e9, rel=1e-3)
    assert load_gpu({"preset": "h200", "clock": "power-limited"}).clock_hz == 1.5e9


def test_b200_states_no_power_limited_clock_and_the_keyword_is_a_one_line_error() -> None:
    gpu = load_gpu("b200")
    assert gpu.clock_hz == 1.965e9 and gpu.power_limited_clock == 0
    assert gpu.clock_text() == "1.965 GHz (measured on the validation tables' runs)"
    with pytest.raises(ScenarioError) as err:
        load_gpu({"preset": "b200", "clock": "power-limited"})
    assert str(err.value).startswith("gpu.clock: 'power-limited' needs a preset that states power_limited_clock")
    assert "\n" not in str(err.value)


def test_an_sms_own_bandwidths_given_per_cycle_follow_the_clock() -> None:
    """Hopper's shared memory serves 128 B and its port takes 64 B per SM cycle: at the
    power-limited clock they are slower in bytes per second, as the latencies in cycles are
    longer; a rate in B/s (HBM, L2) stays put."""
    peak, limited = load_gpu("h100-sxm"), load_gpu({"preset": "h100-sxm", "clock": "power-limited"})
    assert peak.smem_bandwidth == 128 * 1.83e9 / 1e12 and peak.sm_port_bandwidth == 64 * 1.83e9 / 1e12  # B/ps
    assert limited.smem_bandwidth == 128 * 1.575e9 / 1e12 and limited.sm_port_bandwidth == 64 * 1.575e9 / 1e12
    assert limited.hbm_bandwidth == peak.hbm_bandwidth and limited.l2_bandwidth == peak.l2_bandwidth
    assert load_gpu({"preset": "b200", "smem_bandwidth": "100 B/clk", "clock": "1 GHz"}).smem_bandwidth == 0.1


def test_a_per_cycle_bandwidth_that_is_not_one_is_a_one_line_error() -> None:
    with pytest.raises(ScenarioError) as err:
        load_gpu({"preset": "h100-sxm", "smem_bandwidth": "128 cycles"})
    assert str(err.value) == ("gpu.smem_bandwidth: '128 cycles' is not a bandwidth per cycle: expected a quantity "
                              "like '128 B/cycle'")
