"""The workload protocol: what every workload module provides, so the rest of tmasim needs no
knowledge of which workloads exist.

A workload is a module (``tiles``, ``stream``, ``gemm``) with a frozen config dataclass whose
``kind`` class variable names it, and these module-level functions. A new workload is one new
module that implements them, added to the registry in :mod:`tmasim.workloads`.

``config`` is typed ``Any`` here because each module takes its own config class. One function
is optional and so not in the protocol: ``auto_stages(config, gpu, pipeline)``, what
``pipeline.stages = "auto"`` stands for (an object whose ``stages`` is the count; gemm: CUTLASS's
rule, tmasim.workloads.gemm_stages); a module without it refuses ``"auto"`` with a ScenarioError.
Another is ``lower_bound_ns(config, scenario)``: a proven lower bound on the run's makespan (ns),
from the plan alone, never simulating: what ``tmasim sweep --search`` orders and prunes points by
(tmasim.sweep.search); a module without it has its points all simulated. And
``same_run(config, scenario)``: why this design runs exactly as a simpler setting of it does (a
one-line reason naming the field), or None: ``tmasim tune`` leaves such a candidate out of its
space, as the point it duplicates is in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tmasim.engine.chip import Plan
    from tmasim.machine.residency import Residency
    from tmasim.settings.parts import ScenarioParts


class Workload(Protocol):
    KIND: str
    """The ``workload.kind`` that selects this module."""

    PROBLEM_FIELDS: tuple[str, ...]
    """Its ``[workload]`` fields that change the work itself (``m``, ``n``, ``k``...), as opposed
    to how it is done: a sweep compares times only within one problem (:mod:`tmasim.field_roles`).
    Optional: a module without it has no problem fields."""

    def parse(self, raw: Mapping[str, Any]) -> Any:
        """The checked config from the scenario's ``[workload]`` table (ScenarioError if wrong)."""

    def check(self, config: Any, scenario: ScenarioParts) -> None:
        """Rules between this workload and the rest of the scenario (ScenarioError if broken);
        ``Scenario`` calls it on every construction (optional: a module without it has none)."""

    def plan(self, config: Any, scenario: ScenarioParts) -> tuple[Plan, Residency]:
        """The CTAs' programs and their placement, and the residency that bounds it."""

    def work_units(self, config: Any, plan: Plan) -> int:
        """How many units of work the run does (tiles, output tiles, boxes): ``tiles_per_s``."""

    def stats(self, config: Any, scenario: ScenarioParts, plan: Plan, res: Residency, makespan: int) -> dict[str, Any]:
        """The summary figures only this workload has: its references, bounds and what binds."""

    def describe(self, config: Any) -> str:
        """What runs, in a few words, from the effective config (``2048x2048x512 bf16 GEMM, ...``)."""

    def summary_rows(self, stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
        """The run summary's rows for this workload's own figures (``tmasim run``)."""

    def explain(self, stats: Mapping[str, Any]) -> str:
        """What binds and why, in one sentence, from a summary row (a run's, or a sweep point's)."""
