"""The pipe probes' host arithmetic on known fake timings (no GPU, no simulator needed)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from tmasim.gpu import pipe_probes as pp  # noqa: E402


def _rec(c0: int, cycles: int, t0: int, ns: int, sm: int) -> list[int]:
    return [c0, c0 + cycles, t0, t0 + ns, sm]


def test_per_sm_groups_blocks_by_smid() -> None:
    # SM 3: two blocks overlapping, span 1000..3000 cycles over 1250 ns; SM 7: 1000 cycles / 500 ns
    rec = [_rec(1000, 1500, 0, 900, 3), _rec(2000, 1000, 600, 650, 3), _rec(50, 1000, 100, 500, 7)]
    r = pp.per_sm(rec, {"packs": [3000, 1000, 4000]})
    assert r["sms"] == 2
    assert r["mhz"] == {"min": 1600.0, "median": 1800.0, "max": 2000.0}
    assert r["per_clk_per_sm"]["packs"] == {"min": 2.0, "median": 3.0, "max": 4.0}
    assert r["cycles"]["median"] == 1500.0 and r["duration_ns"] == 1250


def test_per_sm_refuses_a_record_that_ends_before_it_starts() -> None:
    with pytest.raises(ValueError, match=r"records\[1\].*end after start"):
        pp.per_sm([_rec(0, 10, 0, 10, 0), [50, 40, 0, 10, 1]], {"x": 1})


def test_shared_pipe_index_between_overlap_and_serial() -> None:
    assert pp.shared_pipe_index(100.0, 60.0, 100.0) == 0.0
    assert pp.shared_pipe_index(100.0, 60.0, 160.0) == 1.0
    assert pp.shared_pipe_index(100.0, 60.0, 130.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="alone times > 0"):
        pp.shared_pipe_index(0.0, 60.0, 10.0)


def _runs(pack: float, exp: float, mixed_cycles: float) -> dict:
    def run(packs: float, exps: float, cycles: float) -> dict:
        return {"cycles": {"median": cycles}, "per_clk_per_sm": {
            "packs": {"median": packs}, "exps": {"median": exps}}}

    return {"pack": run(pack, 0.0, 1.0), "exp": run(0.0, exp, 1.0),
            "mixed": run(0.0, 0.0, mixed_cycles)}


def test_conversion_summary_tells_one_pipe_from_two() -> None:
    # 1024 threads per SM, 100 steps of (4 packs, 8 exps): 409600 packs and 819200 exps per SM
    ops = {"mixed": (400, 800)}
    alu = pp.summarize_conversions(_runs(64.0, 16.0, 51200.0), ops, 1024)
    assert alu["separate_pipes_cycles"] == 51200.0 and alu["one_pipe_cycles"] == 57600.0
    assert alu["shared_pipe_index"] == 0.0
    xu = pp.summarize_conversions(_runs(16.0, 16.0, 76800.0), ops, 1024)
    assert xu["separate_pipes_cycles"] == 51200.0 and xu["shared_pipe_index"] == 1.0


def _wg_flat(mode: int, cycles: tuple[int, int], ctas: int = 2) -> np.ndarray:
    roles = pp.MODE_ROLES[mode]
    rows = []
    for cta in range(ctas):
        for wg in (0, 1):
            c = cycles[wg] if roles[wg] else 1
            rows.append([100, 100 + c, 0, round(c / 1.5), cta, roles[wg], 0, 0])
    return np.array(rows, dtype=np.uint64).reshape(-1)


def test_wgmma_records_count_flop_and_exps_per_sm() -> None:
    r = pp.wgmma_records(_wg_flat(0, (1024, 0)), 0, iters=2, batch=8, exps=64)
    assert r["sms"] == 2 and r["per_clk_per_sm"]["flop"]["median"] == 2 * 8 * 262144 / 1024
    r = pp.wgmma_records(_wg_flat(3, (1024, 2048)), 3, iters=2, batch=8, exps=64)
    assert r["cycles"]["median"] == 2048  # the SM's span covers both warpgroups
    assert r["per_clk_per_sm"]["exps"]["median"] == 2 * 64 * 128 / 2048
    with pytest.raises(ValueError, match="rule: mode 3"):
        pp.wgmma_records(_wg_flat(0, (1024, 0)), 3, iters=2, batch=8, exps=64)


def test_wgmma_summary_indexes_each_overlap() -> None:
    iters, batch, exps = 2, 8, 64
    runs = {0: pp.wgmma_records(_wg_flat(0, (1024, 0)), 0, iters, batch, exps),
            1: pp.wgmma_records(_wg_flat(1, (1024, 0)), 1, iters, batch, exps),
            2: pp.wgmma_records(_wg_flat(2, (2048, 0)), 2, iters, batch, exps),
            3: pp.wgmma_records(_wg_flat(3, (1024, 1536)), 3, iters, batch, exps)}
    s = pp.summarize_wgmma(runs)
    assert s["same_warpgroup_index"] == 1.0 and s["same_warpgroup_tensor_fraction"] == 0.5
    assert s["other_warpgroup_index"] == 0.5 and s["other_warpgroup_tensor_fraction"] == 1.0
    assert s["flop_per_clk_per_sm"]["mma_alone"] == 4096.0
    assert s["exp_per_clk_per_sm"]["exp_alone"] == 16.0


def test_pack_reference_puts_a_in_the_upper_half() -> None:
    got = pp.pack_ref(np.array([1.0, -2.0], dtype=np.float32), 0.5).view(np.uint32)
    assert got.tolist() == [0x3C00_3800, 0xC000_3800]


def test_convert_reference_chains_stay_finite() -> None:
    from tmasim.gpu.pipe_kernels import MODE_MIXED

    v = pp.convert_reference(64, MODE_MIXED, 50, 0.75)
    assert np.isfinite(v).all() and (v > 0).all()
    assert np.array_equal(v[:, 4:8], pp.convert_reference(64, MODE_MIXED, 0, 0.75)[:, 4:8])
