"""Implicit L2 sharing: a cluster's same-address loads reach L2 once on B200 (tmasim.validation.l2_sharing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tmasim.errors import ScenarioError
from tmasim.hardware import load_gpu
from tmasim.scenario import from_dict
from tmasim.simulation import simulate
from tmasim.validation import l2_sharing

ROOT = Path(__file__).resolve().parent.parent / "validation" / "public"
MIB = 1024 * 1024


def two_ctas_sharing_b(multicast: str, coalescing: bool | None = None, gpu: str = "b200") -> dict[str, Any]:
    """m = 256, n = 128, k = 4096, 128x128x64 bf16 tiles in one 2x1 cluster: each CTA its own A
    row panel (1 MiB), both the same B column panel (1 MiB); C is 64 KiB."""
    preset: Any = gpu if coalescing is None else {"preset": gpu, "cluster_l2_coalescing": coalescing,
                                                  "l2_merge_bytes": "1068 KiB" if coalescing else "0 B"}
    raw = {"gpu": preset, "workload": {"kind": "gemm", "m": 256, "n": 128, "k": 4096, "tile": [128, 128, 64],
                                       "multicast": multicast, "epilogue_smem": 0},
           "pipeline": {"stages": 4, "consumers": 1, "cluster": [2, 1]}, "run": {"records": False}}
    return simulate(from_dict(raw)).stats


def test_a_clusters_same_loads_reach_l2_once_on_b200() -> None:
    implicit = two_ctas_sharing_b("none")
    assert implicit["l2_bytes"] == pytest.approx(2 * MIB + 1 * MIB + 64 * 1024)  # B once
    assert implicit["l2_bytes"] - implicit["store_bytes"] == 3 * MIB  # the loads L2 served
    assert implicit["memory_bytes"] == 4 * MIB  # the SMs still take in B twice


def test_without_coalescing_each_cta_reads_its_own_copy_from_l2() -> None:
    stats = two_ctas_sharing_b("none", coalescing=False)
    assert stats["l2_bytes"] == pytest.approx(4 * MIB + 64 * 1024)


def test_multicast_gains_nothing_over_implicit_sharing_on_b200() -> None:
    implicit, explicit = two_ctas_sharing_b("none"), two_ctas_sharing_b("b")
    assert implicit["l2_bytes"] == pytest.approx(explicit["l2_bytes"])
    assert implicit["l2_bound_ns"] == pytest.approx(explicit["l2_bound_ns"])
    assert implicit["hbm_bytes"] == explicit["hbm_bytes"]


def test_hopper_keeps_the_model_without_coalescing() -> None:
    for gpu in ("h100-sxm", "h200", "ideal"):
        assert load_gpu(gpu).cluster_l2_coalescing is False
    assert load_gpu("b200").cluster_l2_coalescing is True


def test_the_b200_table_inside_a_cluster() -> None:
    """With multicast L2 serves a shared tile once: the model's 1.0 against 1.001-1.002. Implicit
    sharing inside a cluster and across neighbours (fitted windows): test_public_calibration."""
    summary = l2_sharing.summary(l2_sharing.check(ROOT)).set_index(["mode_name", "group"])
    for mode in ("explicit_mcast", "no_sharing"):
        assert summary.loc[(mode, 2), "mape"] < 1 and summary.loc[(mode, 4), "mape"] < 1


def test_a_coalescing_flag_that_is_no_boolean_is_a_one_line_error() -> None:
    with pytest.raises(ScenarioError, match="gpu.cluster_l2_coalescing") as err:
        two_ctas_sharing_b("none", coalescing="maybe")  # type: ignore[arg-type]
    assert "\n" not in str(err.value)
