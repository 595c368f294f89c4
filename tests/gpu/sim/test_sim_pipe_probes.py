"""The pipe probes end to end under numba's CUDA simulator (stand-ins for the PTX)."""

from __future__ import annotations

import numpy as np
import pytest

from tmasim.gpu import pipe_probes as pp
from tmasim.gpu import sim_primitives as sp


def test_conversion_probe_checks_its_chains_and_counts_ops() -> None:
    r = pp.conversion_probe(1, simulate=True)
    assert set(r["runs"]) == {"pack", "exp", "mixed"} and r["sass"] == "simulator"
    # the simulator's clock follows the host's (a loaded machine moves it), but counts per SM are
    # exact and both rates of a run share its cycles: FA3's ratio, one pack per two exponentials
    mixed = r["runs"]["mixed"]
    assert mixed["sms"] == 2
    rates = mixed["per_clk_per_sm"]
    assert rates["packs"]["median"] > 0
    assert rates["packs"]["median"] == pytest.approx(rates["exps"]["median"] / 2, rel=1e-9)
    assert np.isfinite(r["shared_pipe_index"])


def test_wgmma_probe_records_the_stand_in_timings() -> None:
    r = pp.wgmma_overlap(1, simulate=True)
    # stand-in: 64 cycles per wgmma (4096 FLOP/clk) and 8 per exp per thread (16/clk)
    assert r["flop_per_clk_per_sm"]["mma_alone"] == 4096.0
    assert r["flop_per_clk_per_sm"]["mma_two_warpgroups"] == 8192.0
    assert r["exp_per_clk_per_sm"]["exp_alone"] == 16.0
    assert r["same_warpgroup_index"] == 0.0 and r["other_warpgroup_index"] == 0.0
    assert r["runs"]["other_warpgroup"]["mhz"]["median"] == pytest.approx(sp.SIM_CLOCK_GHZ * 1e3, rel=1e-3)


def test_clock_under_load_reports_mhz_per_segment() -> None:
    r = pp.clock_under_load(1, simulate=True)
    wg = r["wgmma_exp"]
    assert len(wg["segment_median_mhz"]) == 2 and wg["sms"] == 2
    assert wg["mhz"]["median"] == pytest.approx(1500.0, rel=1e-3)
    assert r["ffma_exp"]["mhz"]["median"] > 0 and r["ffma_exp"]["load_s"] > 0
