"""What each scenario field is to a sweep: the one table of field roles.

- **problem**: the field changes the work itself (``workload.m/n/k``, ``workload.tiles``, the
  dtype, a tile's load time in the ``tiles`` workload...). Times of different problems are not
  comparable: a sweep's best point and knee are given per problem.
- **design**: the field changes how the work is done, and costs something (stages, the tile, the
  cluster, CTAs per SM, registers, consumers, the synchronization, the GPU it runs on). A sweep's
  best, knee and next step compare these.
- **noise**: the field changes nothing but the draw or the bookkeeping (``run.seed``,
  ``run.records``, ``run.aggregate``, ``run.drift``): points that differ only in noise are
  replicates, averaged, never ranked.

Each workload declares which of its own fields are its problem (``PROBLEM_FIELDS`` on its module,
see :class:`tmasim.workloads.base.Workload`); the rest of its fields are design. Everything
outside ``[workload]`` is classified here.
"""

from __future__ import annotations

from collections.abc import Iterable

PROBLEM, DESIGN, NOISE = "problem", "design", "noise"
ROLES = (PROBLEM, DESIGN, NOISE)

# Fields outside [workload], by their dotted name or their table (the prefix before the dot).
FIXED = {
    "name": NOISE,
    "description": NOISE,
    "workload.kind": PROBLEM,   # another workload is other work
    "gpu": DESIGN,              # the machine is a choice a review compares (and pays for)
    "pipeline": DESIGN,         # stages, consumers, cluster, registers, the synchronization
    "run": NOISE,               # seed, records, aggregate, drift: the draw and the bookkeeping
}


def role(field: str, kind: str | None = None) -> str:
    """The role of a dotted scenario field; ``kind`` is the workload kind (default: the
    reference ``tiles``) whose ``PROBLEM_FIELDS`` decide the ``workload.*`` fields."""
    if field in FIXED:
        return FIXED[field]
    table, _, rest = field.partition(".")
    if table == "workload":
        return PROBLEM if rest.split(".")[0].split("[")[0] in problem_fields(kind) else DESIGN
    if table in FIXED:
        return FIXED[table]
    raise KeyError(f"{field!r} is not a scenario field (tables: {', '.join(t for t in FIXED if '.' not in t)})")


def problem_fields(kind: str | None) -> tuple[str, ...]:
    """The ``[workload]`` fields that change the work, as the workload declares them (none for
    a workload that declares nothing: all its fields are then design)."""
    from tmasim.workloads import WORKLOADS

    workload = WORKLOADS.get(kind or "tiles")
    return tuple(getattr(workload, "PROBLEM_FIELDS", ())) if workload is not None else ()


def split(fields: Iterable[str], kind: str | None = None) -> dict[str, tuple[str, ...]]:
    """``fields`` by role, each in the given order: {"problem": ..., "design": ..., "noise": ...}."""
    found: dict[str, list[str]] = {r: [] for r in ROLES}
    for field in fields:
        found[role(field, kind)].append(field)
    return {r: tuple(found[r]) for r in ROLES}


def table() -> list[tuple[str, str]]:
    """(field, role) for every field: the fixed ones, then each workload's (``workload.m
    (gemm)``), as docs/design.md lists them."""
    from tmasim.workloads import WORKLOADS

    rows = list(FIXED.items())
    for kind, module in WORKLOADS.items():
        rows += [(f"workload.{name} ({kind})", role(f"workload.{name}", kind))
                 for name in getattr(module, "FIELDS", ()) if name != "kind"]
    return rows
