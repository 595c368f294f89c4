"""The presets against the public microbenchmarks they were fitted to (validation/public/).

Each source is re-fitted (its main parameter, from the shipped preset, a short search) on the
calibration's own split (the bandwidth sources on every other row, so the module stays fast).
The test fails if the shipped preset's error on the held-out rows exceeds the source's stated
bound, or if the re-fit moves the shipped value by more than a few percent (the preset has
drifted from its evidence). Regenerate everything with ``python validation/calibrate_public.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tmasim.hardware import load_gpu
from tmasim.validation import public, public_hopper

ROOT = Path(__file__).resolve().parent.parent / "validation" / "public"
# source -> (the parameter re-fitted here, how far the re-fit may move it)
REFIT = {"h200-l2-bandwidth": ("l2_bandwidth", 0.03), "b200-tma-throughput": ("hbm_bandwidth", 0.05),
         "b200-tma-latency": (None, 0.0), "h100-pcie-latency": ("hbm_latency", 0.05),
         "b200-umma-operands": ("smem_bandwidth", 0.03),
         "h800-tma-latency": ("copy_latency", 0.03), "h800-tma-throughput": (None, 0.0),
         "h800-tma-bulk": (None, 0.0)}
# h800-tma-throughput: its error is flat in the request time near the fit (1.92 and 2.05 ns give 8.7 %
# held out), so a 3-evaluation re-fit on a thinned table wanders; the shipped preset's error is checked.
# rows kept: 1 = all (single-CTA sources are cheap; the H800 throughput tables run 19 drifting SMs each)
EVERY = {"h200-l2-bandwidth": 2, "b200-tma-throughput": 2, "b200-umma-operands": 2, "h800-tma-throughput": 3,
         "h800-tma-bulk": 4}
# On a thinned table the held-out half is a few points: where the source's bound is met on the full
# split (results/summary.md: 8.7 %) but a thinned half can land above it, the bound here.
THINNED_BOUND = {"h800-tma-throughput": 12.0}


@pytest.mark.parametrize("name", sorted(public.SOURCES))
def test_shipped_preset_matches_its_public_data(name: str, tmp_path: Path) -> None:
    source = public.SOURCES[name]
    field, tolerance = REFIT[name]
    cal = public.run(source, ROOT, tmp_path, fit=(field or source.fit[0],), max_evals=3,
                     every=EVERY.get(name, 1))
    shipped = cal.split_mape("holdout", "start_error_pct")
    assert shipped is not None and shipped <= THINNED_BOUND.get(name, source.bound_pct), (name, shipped)
    if field is not None:  # the shipped value, as the source's scenario sees it (at its clock)
        start = next(p.start for p in cal.parameters if p.name == field)
        assert abs(cal.fitted[field] / start - 1) <= tolerance, (field, start, cal.fitted[field])


def test_every_source_table_is_checked_in_with_its_scenario() -> None:
    for source in public.SOURCES.values():
        assert (ROOT / source.table).is_file() and (ROOT / source.scenario).is_file()
        assert source.bound_pct <= 10.0 or name_is_documented_exception(source.name)


def name_is_documented_exception(name: str) -> bool:
    """Sources whose shipped-preset error is above the 10 % target, each explained in the README."""
    return name == "b200-tma-latency"


def test_the_remote_arrive_is_one_crossing_of_the_dsmem_round_trip() -> None:
    """33 cycles on the own SM, about 199 to a peer: a hop of 83 cycles each way, fitted on half the
    remote rows (held-out error within 10 %); the presets' remote arrive is local + hop."""
    import pandas as pd

    fit = public_hopper.dsmem_fit(pd.read_csv(ROOT / "h800-pcie" / "dsmem_latency.csv"))
    assert fit.local == 33 and 80 < fit.hop < 86 and fit.holdout_mape <= 10.0
    for name in ("h100-sxm", "h200"):
        gpu = load_gpu(name)
        assert gpu.cluster_arrive_latency == gpu.cycles_ps(round(fit.arrive))


def test_wgmma_issues_at_its_latency_and_the_shortfall_is_the_clock() -> None:
    """m64n256k16 takes 128 cycles, the full-rate II the presets carry; the throughput rows give the
    clock under load (89 % of 1.755 GHz) and predict the held-out fp8 and RS rows within 1 %."""
    import pandas as pd

    fit = public_hopper.wgmma_fit(pd.read_csv(ROOT / "h800-pcie" / "wgmma.csv"))
    assert fit.ii_cycles == 128 and fit.holdout_mape <= 1.0
    assert 0.885 < fit.share_of_nominal < 0.895
    for name in ("h100-sxm", "h200"):
        gpu = load_gpu(name)
        assert gpu.mma is not None and gpu.mma.timing("t", "bf16", 64, 256) == (128.0, 128.0)
        assert gpu.mma.timing("t", "fp8", 64, 128) == (64.0, 64.0)  # derived: scaled by N
        assert gpu.clock_hz == 1.83e9 and gpu.boost_clock == 1.98e9


def test_the_mma_pipes_latency_and_ii_rule_matches_mmas_in_flight() -> None:
    """Not fitted: cycles per MMA with D = 1-10 independent MMAs in flight (TS, BF16), against
    (latency + (D - 1) x II) / D from the preset's rows, simulated. Whole table: MAPE 3.6 %, worst
    -10.3 % at D = 1 (the benchmark's ~12-cycle timing overhead, its fit's Overhead column)."""
    from tmasim.validation import umma_depth

    table = umma_depth.check(ROOT, every=12)
    assert len(table) == 20 and umma_depth.mape(table) < 5.0
    assert (table["error_pct"] < 0).mean() > 0.9  # the model is the faster: it has no timer overhead


def test_launch_order_neighbours_merge_in_their_gpc_within_the_held_out_bounds() -> None:
    """The B200 table's implicit_l2_cross rows (groups of 2-32 neighbours, no cluster): the GPC
    merge window re-fitted on its half of the tile shapes is the shipped one, and the held-out
    half stays within each group's bound (results/b200-l2-sharing.md; 10 % the target, 8 and 32
    above it: the model has no partial merge at 8 and a linear window at 32)."""
    from tmasim.validation import l2_sharing

    table = l2_sharing.check(ROOT)
    shipped = load_gpu("b200").l2_merge_bytes
    assert abs(table.attrs["l2_merge_bytes"] / shipped - 1) <= 0.01
    cross = table[(table["mode_name"] == "implicit_l2_cross") & (table["split"] == "holdout")]
    held = cross.groupby("group")["error_pct"].apply(lambda e: e.abs().mean())
    bounds = {2: 3.0, 4: 5.0, 8: 12.0, 16: 7.0, 32: 16.0}
    assert {g: held[g] <= bound for g, bound in bounds.items()} == dict.fromkeys(bounds, True), held.to_dict()
    cross = table[table["mode_name"] == "implicit_l2_cross"]
    assert cross["predicted"].max() < 32 * 0.9  # a group of 32 no longer reads L2 once per CTA


def test_a_clusters_own_merge_window_within_the_held_out_bounds() -> None:
    """The implicit_l2_intra rows (clusters of 2 and 4, no multicast): every load merges up to
    16 KiB boxes, 1.2-2.2 reads per tile at 48-56 KiB. The in-cluster window re-fitted on half
    the tile shapes is the shipped one; held out 2.5 % and 7.8 % (bounds 4 and 10)."""
    from tmasim.validation import l2_sharing

    table = l2_sharing.check(ROOT)
    shipped = load_gpu("b200").cluster_l2_merge_bytes
    assert abs(table.attrs["cluster_l2_merge_bytes"] / shipped - 1) <= 0.01
    intra = table[(table["mode_name"] == "implicit_l2_intra") & (table["split"] == "holdout")]
    held = intra.groupby("group")["error_pct"].apply(lambda e: e.abs().mean())
    assert held[2] <= 4.0 and held[4] <= 10.0, held.to_dict()


def _b_sharers(stages: int, merge: str = "1068 KiB", cluster: int = 1, inside: str = "2133 KiB") -> dict[str, float]:
    """Eight CTAs on one GPC (no cluster, or one cluster of 8 without multicast) each load their
    own A row panel (1 MiB) and the same B column panel (1 MiB), 128x128x64 bf16, k = 4096; C is
    8 x 32 KiB."""
    from tmasim.scenario import from_dict
    from tmasim.simulation import simulate

    raw = {"gpu": {"preset": "b200", "sms": 8, "l2_merge_bytes": merge, "cluster_l2_merge_bytes": inside},
           "workload": {"kind": "gemm", "m": 8 * 128, "n": 128, "k": 4096, "tile": [128, 128, 64],
                        "epilogue_smem": 0, "multicast": "none"},
           "pipeline": {"stages": stages, "consumers": 1, "cluster": [cluster, 1]}, "run": {"records": False}}
    return simulate(from_dict(raw)).stats


def test_identical_copies_at_once_cost_one_upstream_read() -> None:
    """Closed forms of tmasim.l2_merge. With 8 x 2 stages x 32 KiB = 512 KiB in flight on the GPC
    (under the 1068 KiB window) the eight B loads of a k-step are one L2 read; with 6 stages
    (1.5 MiB in flight) each follower misses the merge with p = 1 - 1068 KiB / 1.5 MiB, so B
    costs 1 + 7p reads. HBM is read once either way; with no window every CTA reads L2."""
    mib, c_bytes = 1024 * 1024, 8 * 32 * 1024
    once = _b_sharers(2)
    assert once["l2_bytes"] == pytest.approx(8 * mib + 1 * mib + c_bytes, rel=1e-12)
    p = 1 - 1068 / 1536
    partial = _b_sharers(6)
    assert partial["l2_bytes"] == pytest.approx(8 * mib + (1 + 7 * p) * mib + c_bytes, rel=1e-9)
    assert partial["hbm_bytes"] == once["hbm_bytes"]
    assert _b_sharers(2, "0 B")["l2_bytes"] == pytest.approx(16 * mib + c_bytes, rel=1e-12)
    # One cluster of 8: its own window. 1.5 MiB in flight against 1 MiB: p = 1/3, B costs 1 + 7/3.
    assert _b_sharers(6, "0 B", 8)["l2_bytes"] == pytest.approx(8 * mib + c_bytes + 1 * mib, rel=1e-12)
    clustered = _b_sharers(6, "0 B", 8, "1 MiB")
    assert clustered["l2_bytes"] == pytest.approx(8 * mib + (1 + 7 / 3) * mib + c_bytes, abs=1)


def test_hopper_presets_do_not_merge_across_clusters() -> None:
    """No Hopper table of launch-order sharing: the mechanism is not transferred."""
    for name in ("h100-sxm", "h200", "ideal"):
        assert load_gpu(name).l2_merge_bytes == 0 and not load_gpu(name).cluster_l2_coalescing
    assert load_gpu("b200").l2_merge_bytes == 1068 * 1024
    assert load_gpu("b200").cluster_l2_merge_bytes == 2133 * 1024
