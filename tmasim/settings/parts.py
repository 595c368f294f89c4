"""The scenario's parts that the workloads read: the pipeline and run options (frozen
dataclasses, each checked on construction) and :class:`ScenarioParts`, what a workload sees of
a :class:`~tmasim.scenario.Scenario`. Below both the scenario and the workloads, so that the
scenario imports the workloads and the workloads import only this (``tmasim.scenario`` exports
the same names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tmasim.errors import ScenarioError
from tmasim.machine.hardware import GpuSpec
from tmasim.settings.drift import NO_DRIFT, Drift
from tmasim.values import fields as read

CONSUMER_MODES = ("cooperative", "pingpong")
# Far above any real kernel (shared memory and 1024 threads per CTA bind long before), low
# enough that a typo cannot make the engine build millions of barriers.
MAX_STAGES = 4096
MAX_CONSUMERS = 64
MAX_ARRIVALS = 2**20

AUTO = "auto"  # pipeline.stages = "auto": the count CUTLASS would choose (tmasim.workloads.gemm_stages)
MAX_CLUSTER_DIM = 1024  # a sanity bound; the GPU's own limit is checked where the cluster is placed


@dataclass(frozen=True)
class Pipeline:
    """The stage ring and who synchronizes on it.

    ``full_arrivals``, ``empty_arrivals`` and ``expect_tx`` exist to study synchronization bugs:
    left unset they take the values a correct kernel uses (1; the number of consumers; the
    bytes the stage's copies carry).
    """

    stages: int = 2
    consumers: int = 1
    consumer_mode: str = "cooperative"
    consumer_waits_full: bool = True
    full_arrivals: int | None = None
    empty_arrivals: int | None = None
    expect_tx: int | None = None
    cluster: tuple[int, int] = (1, 1)  # CTAs per thread-block cluster along M and along N
    mma_cta_group: int = 1  # 2: Blackwell's 2-SM MMA, a CTA pair along M computes one 2·BM x BN tile
    registers: tuple[int | None, int | None] = (None, None)  # setmaxnreg: (producer, consumer) per thread
    warp_specialized: bool = True  # False: no producer warpgroup, the consumers issue their own copies
    stages_auto: bool = False  # ``stages = "auto"`` was asked: ``stages`` is what the workload's rule chose

    def __post_init__(self) -> None:
        """Checked on every construction, ``dataclasses.replace`` included."""
        if self.stages == AUTO:
            raise ScenarioError("pipeline.stages", AUTO, "is chosen where the scenario is read (tmasim.load_scenario "
                                "or from_dict, which know the GPU and the workload); a Pipeline takes the count")
        read.integer("pipeline.stages", self.stages, minimum=1, maximum=MAX_STAGES)
        read.boolean("pipeline.stages_auto", self.stages_auto)
        read.integer("pipeline.consumers", self.consumers, minimum=1, maximum=MAX_CONSUMERS,
                     why=" (consumer warpgroups of 128 threads in one CTA)")
        read.choice("pipeline.consumer_mode", self.consumer_mode, CONSUMER_MODES)
        read.boolean("pipeline.consumer_waits_full", self.consumer_waits_full)
        for name in ("full_arrivals", "empty_arrivals"):
            if getattr(self, name) is not None:
                read.integer(f"pipeline.{name}", getattr(self, name), minimum=1, maximum=MAX_ARRIVALS)
        if self.expect_tx is not None:
            read.checked_size("pipeline.expect_tx", self.expect_tx)
        if not isinstance(self.cluster, tuple) or len(self.cluster) != 2:
            raise ScenarioError("pipeline.cluster", self.cluster,
                                "must be two whole numbers [CX, CY] (CTAs along M, along N)")
        for i, v in enumerate(self.cluster):
            read.integer(f"pipeline.cluster[{i}]", v, minimum=1, maximum=MAX_CLUSTER_DIM)
        read.integer("pipeline.mma_cta_group", self.mma_cta_group, minimum=1, maximum=2)
        read.boolean("pipeline.warp_specialized", self.warp_specialized)
        if not isinstance(self.registers, tuple) or len(self.registers) != 2:
            raise ScenarioError("pipeline.registers", self.registers,
                                "must be (producer, consumer) per-thread register counts (None: the default)")
        for role, count in zip(("producer", "consumer"), self.registers, strict=True):
            if count is not None:
                check_registers(f"pipeline.registers.{role}", count)


@dataclass(frozen=True)
class RunOptions:
    seed: int = 0
    records: bool = True
    aggregate: bool = True
    drift: Drift = NO_DRIFT  # SM drift (tmasim.drift): off unless set
    fast_forward: bool = True  # skip repeated periods of a steady state, exactly (tmasim.engine.fast_forward)

    def __post_init__(self) -> None:
        read.integer("run.seed", self.seed, minimum=0, maximum=2**63 - 1)
        read.boolean("run.records", self.records)
        read.boolean("run.aggregate", self.aggregate)
        read.boolean("run.fast_forward", self.fast_forward)
        if not isinstance(self.drift, Drift):
            raise ScenarioError("run.drift", self.drift, "must be a table {start, latency_cv}")


def check_registers(name: str, count: Any) -> None:
    read.integer(name, count, minimum=24, maximum=256, why=" (setmaxnreg)")
    if count % 8:
        raise ScenarioError(name, count, "must be a multiple of 8 from 24 to 256 (setmaxnreg)")


class ScenarioParts(Protocol):
    """What a workload reads of a scenario (a :class:`~tmasim.scenario.Scenario` is one)."""

    @property
    def gpu(self) -> GpuSpec: ...
    @property
    def workload(self) -> Any: ...  # the workload's own config class (each module takes its own)
    @property
    def pipeline(self) -> Pipeline: ...
    @property
    def run(self) -> RunOptions: ...
