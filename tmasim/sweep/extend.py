"""Extending a finished sweep: the same sweep with more values keeps the points it has.

A result file can be resumed by the sweep that wrote it. It can also be *extended* by a sweep
that varies the same fields, in the same order, over the same base scenario (grid or pairs as
before), with every value it had and more: the finished points are renumbered into the larger
sweep and only the new ones run. A sweep that drops values is refused, as another sweep:
rewriting the file would lose finished points.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from tmasim.errors import TmasimError
from tmasim.sweep.points import Outcome
from tmasim.sweep.spec import Axis, Point, SweepPlan, expand, zip_json


def renumbering(theirs: Mapping[str, Any], plan: SweepPlan) -> dict[int, int] | None:
    """Old point id -> new point id if ``plan`` extends the sweep of fingerprint ``theirs``;
    None if it does not (other fields, another order, a dropped value, grid against pairs)."""
    vary = theirs.get("vary")
    if not isinstance(vary, list) or theirs.get("zip") != zip_json(plan.zipped):
        return None
    if [field for field, _ in vary] != [axis.field for axis in plan.axes]:
        return None
    old_axes = [Axis(field, tuple(values)) for field, values in vary]
    try:
        old_points = expand(old_axes, plan.zipped)
    except TmasimError:  # pairs of unequal lengths: not a sweep this one can extend
        return None
    new_ids = {_key(point): point.id for point in plan.points}
    keys = {point.id: _key(point) for point in old_points}
    if not all(key in new_ids for key in keys.values()):
        return None
    return {old: new_ids[key] for old, key in keys.items()}


def _key(point: Point) -> str:
    """Values compared as the file stores them (JSON), so 3 and 3.0, tuples and lists match."""
    return json.dumps([value for _, value in point.values], sort_keys=True, default=str)


def renumbered(outcomes: Mapping[int, Outcome], mapping: Mapping[int, int] | None) -> dict[int, Outcome]:
    """The outcomes under their point ids in the extending sweep (unchanged without a mapping)."""
    if mapping is None:
        return dict(outcomes)
    return {mapping[i]: dataclasses.replace(o, point=mapping[i]) for i, o in outcomes.items() if i in mapping}
