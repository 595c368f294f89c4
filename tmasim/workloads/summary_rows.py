"""The summary rows several workloads share, built from a run's stats: times, residency,
traffic, drift, aggregation, clusters. Below both the workloads (whose ``summary_rows`` end
with them) and :mod:`tmasim.summary` (which prints them), so data flows one way."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tmasim.machine.cluster import driver_cap
from tmasim.values import format as fmt
from tmasim.values.format import plural  # noqa: F401 (re-exported: the workloads' sentences use it from here)

if TYPE_CHECKING:
    from tmasim.machine.hardware import GpuSpec
    from tmasim.settings.parts import ScenarioParts


def t(value_ns: Any, digits: int = fmt.DIGITS, zero: str | None = None) -> str:
    """A summary time (``*_ns``) for the terminal."""
    return fmt.time_ns(value_ns, digits, zero=zero)


def chip_rows(stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
    """Residency, traffic and aggregation: the rows of workloads whose copies cross the memory
    system, which their ``summary_rows`` end with."""
    launch = getattr(scenario.workload, "launch", "persistent")
    placement = (f"persistent, up to {plural(stats['waves'], 'unit')} per CTA" if launch == "persistent"
                 else plural(stats["waves"], "wave"))
    rows = [
        ("residency", f"{fmt.size(stats['smem_per_cta_bytes'])} SMEM per CTA, {plural(stats['ctas_per_sm'], 'CTA')} "
                      f"per SM (limited by {stats['residency_limit']}); "
                      f"{stats.get('work_units', stats['tiles'])} work units, "
                      f"{plural(stats['ctas'], 'CTA')} on {plural(stats['sms_used'], 'SM')}, {placement}"),
        ("traffic", traffic(stats)),
    ]
    rows.append(("clock", scenario.gpu.clock_text() + "; --set gpu.clock=... to study another"))
    if stats.get("drift_start_ns") or stats.get("drift_latency_cv"):
        rows.append(("drift", f"SM start skew U(0, {t(stats['drift_start_ns'])}), copy latency x Gamma(mean 1, "
                              f"CV {fmt.percent(stats['drift_latency_cv'])}); all {stats['sms_used']} SMs simulated, "
                              "not aggregated (drifting SMs are not identical)"))
    if "aggregation" not in stats and stats["sm_classes"] < stats["sms_used"]:  # clusters: cluster_rows says it
        rows.append(("aggregation", f"{stats['sms_used']} SMs simulated as {plural(stats['sm_classes'], 'class')} "
                                    "of identical SMs (run.aggregate = false to simulate each)"))
    return rows


def traffic(stats: Mapping[str, Any]) -> str:
    """The run's traffic, as :data:`tmasim.names.TRAFFIC` defines it: L2 (loads and stores, what
    its busy share counts), then HBM (misses and stores)."""
    stores = stats.get("store_bytes") or 0
    workspace = stats.get("workspace_traffic_bytes") or 0  # split tiles' partials (tmasim.workloads.gemm_split)
    loads = stats["l2_bytes"] - stores - workspace   # the loads L2 served
    parts = f"; {fmt.amount(loads)} loads + {fmt.amount(stores)} stores" if stores else ""
    if workspace:
        parts += f" + {fmt.amount(workspace)} of split tiles' partials"
    if stats["memory_bytes"] > loads * 1.000001:  # same-address loads merged before L2 (B200)
        parts += (f"; the SMs took in {fmt.amount(stats['memory_bytes'])}: same-address loads merge before L2, "
                  "a cluster's and neighbours' in one GPC")
    if stats.get("l2_far_latency_ns"):  # B200: A and B fit in L2 only with its far half (tmasim.l2)
        parts += (f"; A and B ({fmt.size(stats['l2_operand_bytes'])}) stay in L2's far part, not near the SMs: "
                  f"{fmt.time_ns(stats['l2_far_latency_ns'])} more a copy (gpu.l2_far_latency)")
    return (f"L2 {fmt.amount(stats['l2_bytes'])}{_busy(stats['l2_utilization'], parts)}, "
            f"HBM {fmt.amount(stats['hbm_bytes'])}{_busy(stats['hbm_utilization'])}")


def _busy(utilization: float | None, more: str = "") -> str:
    if utilization is None:
        return f" ({more.removeprefix('; ')})" if more else ""
    return f" ({fmt.percent(utilization)} busy{more})"


def reach_without_launch(stats: Mapping[str, Any]) -> str:
    """The bounds are the CTAs' work; the makespan adds the launch's own cost (gpu.launch_overhead):
    where it does, how close the work alone comes."""
    launch, makespan = stats.get("launch_overhead_ns"), stats["makespan_ns"]
    if not launch or makespan <= launch or not stats["bound_ns"]:
        return ""
    return f"; {fmt.percent(stats['bound_ns'] / (makespan - launch))} without the launch's {t(launch)}"


def share_of_peak(flops_per_s: float, scenario: ScenarioParts, dtype: str, sms_used: int) -> str:
    """``81% of the 989.4 TFLOP/s bf16 peak of all 132 SMs``: against the peak of the SMs the run
    uses (a one-CTA run against one SM's peak), and saying which."""
    gpu = scenario.gpu
    sms = min(sms_used, gpu.sms) or gpu.sms
    peak = gpu.peak_flops_per_s(dtype, sms_used)
    assert peak is not None, dtype
    which = f"all {gpu.sms} SMs" if sms == gpu.sms else f"the {plural(sms, 'SM')} it uses, of {gpu.sms}"
    return f"{fmt.percent(flops_per_s / peak)} of the {fmt.flop_rate(peak)} {dtype} peak of {which}"


def _driver_cap(stats: Mapping[str, Any], gpu: GpuSpec | None) -> str:
    """Where the driver's count (``gpu.max_active_clusters``), not the GPCs, set the placement: says so."""
    if gpu is None:
        return ""
    size = math.prod(int(n) for n in str(stats["cluster"]).split("x"))
    cap = driver_cap(gpu, size, int(stats.get("ctas_per_sm") or 0))
    if cap is None:
        return ""
    return (f": the driver's count for clusters of {size} (gpu.max_active_clusters), where the GPCs would hold "
            f"{cap[1]}")


def cluster_rows(stats: Mapping[str, Any], shares: str, gpu: GpuSpec | None = None) -> list[tuple[str, str]]:
    """A clustered run's rows: the cluster and what its CTAs share (``shares``, the workload's
    words), where the clusters went (with ``gpu``: whether the driver's count capped the GPCs'),
    and whether aggregation stayed exact."""
    portable = "" if stats["cluster_portable"] else " (non-portable size: needs the opt-in)"
    return [
        ("cluster", f"{stats['cluster']} CTAs{portable}; {shares}; remote arrival {t(stats['remote_arrive_ns'])}"),
        ("placement", f"{stats['clusters_resident']} clusters resident at once ({stats['clusters_per_gpc']} per "
                      f"GPC), {plural(stats['idle_sms'], 'SM')} idle{_driver_cap(stats, gpu)}"),
        ("aggregation", f"{stats['aggregation']}; {plural(stats['cluster_classes'], 'cluster slot')} simulated"),
    ]
