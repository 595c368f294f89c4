"""The module paths the package had before its top floor got rooms, each still importable as
the very module it moved to: ``import tmasim.scenario`` gives ``tmasim.inputs.scenario`` itself (one
object in ``sys.modules`` under both names), so private names and monkeypatching reach the code
that runs.

The old paths are not files, so git sees each move as a rename; a finder first in
``sys.meta_path`` answers for them, and for no other name (first, so that no other finder, an
editable install's for one, can answer for an old path with a stale file). Code inside the package
imports the new paths (``tests/test_layout.py`` checks it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType

MOVED = {
    "tmasim.units": "tmasim.values.units",
    "tmasim.unit_factors": "tmasim.values.unit_factors",
    "tmasim.fields": "tmasim.values.fields",
    "tmasim.format": "tmasim.values.format",
    "tmasim.hardware": "tmasim.machine.hardware",
    "tmasim.mma": "tmasim.machine.mma",
    "tmasim.l2": "tmasim.machine.l2",
    "tmasim.l2_merge": "tmasim.machine.l2_merge",
    "tmasim.cluster": "tmasim.machine.cluster",
    "tmasim.residency": "tmasim.machine.residency",
    "tmasim.operands": "tmasim.machine.operands",
    "tmasim.descriptor": "tmasim.machine.descriptor",
    "tmasim.scenario_parts": "tmasim.settings.parts",
    "tmasim.drift": "tmasim.settings.drift",
    "tmasim.analytic": "tmasim.workloads.analytic",
    "tmasim.summary_rows": "tmasim.workloads.summary_rows",
    "tmasim.scenario": "tmasim.inputs.scenario",
    "tmasim.scenario_raw": "tmasim.inputs.raw",
    "tmasim.cutlass_names": "tmasim.inputs.cutlass_names",
    "tmasim.field_roles": "tmasim.inputs.field_roles",
    "tmasim.scenario_reference": "tmasim.inputs.reference",
    "tmasim.budget": "tmasim.estimates.budget",
    "tmasim.skip_forecast": "tmasim.estimates.skip_forecast",
    "tmasim.ranges": "tmasim.estimates.ranges",
    "tmasim.results": "tmasim.output.result",
    "tmasim.result_files": "tmasim.output.read_back",
    "tmasim.outputs": "tmasim.output.paths",
    "tmasim.summary": "tmasim.output.summary",
    "tmasim.validation.trust": "tmasim.output.trust",
}


class OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finder and loader of the old paths: loading one puts the moved module in its place."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name not in MOVED:
            return None
        moved = importlib.util.find_spec(MOVED[name])
        return importlib.machinery.ModuleSpec(name, self, origin=moved.origin if moved is not None else None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder module, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])

    def get_code(self, name: str) -> CodeType | None:
        """The moved module's code: ``python -m tmasim.scenario_reference`` runs it as a script."""
        spec = importlib.util.find_spec(MOVED[name])
        loader = spec.loader if spec is not None else None
        return loader.get_code(MOVED[name]) if loader is not None and hasattr(loader, "get_code") else None


def install() -> None:
    """Answer for the old paths (once per process)."""
    if not any(isinstance(finder, OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, OldPaths())
