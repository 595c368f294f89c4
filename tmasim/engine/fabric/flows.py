"""The flow model's parts: links and flows, classes of flows that share a route and a cap,
rate groups of classes frozen at one level, and weighted progressive filling, which gives the
max-min fair rates. :class:`tmasim.engine.fabric.model.Fabric` keeps them current in SimPy time
(the module doc there says how and why)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import simpy

Route = Sequence[tuple["Link", float]]
LoadPoint = tuple[int, float]


class Link:
    """A shared resource of fixed bandwidth (bytes per picosecond); ``math.inf`` never binds."""

    __slots__ = (
        "name",
        "capacity",
        "_index",
        "_fabric",
        "_weight",
        "_classes",
        "_bytes_done",
        "_busy_ps",
        "_busy_since",
        "_series",
        "_load",
    )

    def __init__(self, name: str, capacity_bytes_per_ps: float) -> None:
        if not capacity_bytes_per_ps > 0:
            raise ValueError(f"link {name!r}: capacity {capacity_bytes_per_ps} must be positive")
        self.name = name
        self.capacity = float(capacity_bytes_per_ps)
        self._index = -1
        self._fabric: object | None = None  # the Fabric it was added to (compared by identity)
        self._weight = 0.0  # Σ count × weight over the active classes that cross it
        self._classes: dict[FlowClass, None] = {}  # those classes, in a deterministic order
        self._bytes_done = 0.0  # Σ weight × nbytes over finished flows
        self._busy_ps = 0
        self._busy_since = 0
        self._series: list[LoadPoint] = []
        self._load = 0.0  # Σ count × weight × own bound over its classes (own_bound_order.py)

    def __repr__(self) -> str:
        return f"Link({self.name!r}, {self.capacity})"


class Flow:
    """One transfer of ``nbytes`` over a route; ``done`` succeeds at ``end``."""

    __slots__ = ("nbytes", "start", "end", "done", "_cls")

    def __init__(self, env: simpy.Environment, nbytes: int, start: int) -> None:
        self.nbytes = nbytes
        self.start = start
        self.end: int | None = None
        self.done = env.event()
        self._cls: FlowClass | None = None

    @property
    def rate(self) -> float:
        """Bytes per picosecond now; 0 before the fabric settles the instant it started in."""
        cls = self._cls
        if self.end is not None or cls is None or cls.group is None:
            return 0.0
        return cls.group.rate

    def __repr__(self) -> str:
        return f"Flow({self.nbytes} B, start={self.start}, end={self.end})"


@dataclass(frozen=True)
class LinkStats:
    """What a link carried. ``utilization`` is bytes / (capacity × elapsed time).

    Completion times are rounded to the picosecond, so a tiny run can show a utilization a
    hair above 1 (at most half a picosecond's worth of bytes per flow).
    """

    name: str
    capacity: float
    bytes_carried: float
    busy_ps: int
    utilization: float
    series: tuple[LoadPoint, ...] | None


class FlowClass:
    """Flows sharing (route, cap): equal max-min rates, so one count and one clock serve all."""

    __slots__ = (
        "route",
        "cap",
        "n",
        "heap",
        "offset",
        "group",
        "stamp",
        "start_sum",
        "in_cap_heap",
        "rank",
        "ob_key",
        "ob_n",
        "ob_seq",
    )

    def __init__(self, route: tuple[tuple[Link, float], ...], cap: float) -> None:
        self.route = route
        self.cap = cap
        self.n = 0
        self.heap: list[tuple[float, int, Flow]] = []  # (finish tag in class clock, seq, flow)
        self.offset = 0.0  # class clock = group clock + offset (= offset while ungrouped)
        self.group: RateGroup | None = None
        self.stamp = -1  # seq of this class's live entry in its group's heap
        self.start_sum = 0.0  # Σ class clock at each in-flight flow's start: gives progress
        self.in_cap_heap = False
        self.rank = 0  # its freeze level's position in the last progressive filling
        # Its place in the own-bound order (own_bound_order.py): (bound, kind, index, self), the
        # count it was placed with, and its activation number.
        self.ob_key: tuple[float, int, int, FlowClass] | None = None
        self.ob_n = 0
        self.ob_seq = 0

    def clock(self) -> float:
        group = self.group
        return self.offset if group is None else group.clock + self.offset


class RateGroup:
    """Classes frozen at one level: one rate, one virtual clock, one heap of next finishes.

    ``merged``: the group stands for several levels of equal rate, one class each (classes
    frozen one by one at equal caps). Those groups would have had equal clocks, bit for bit
    (each starts at 0 and gains the same rate × elapsed), so one clock serves them all; their
    flows finish class by class in level order (:attr:`FlowClass.rank`), as theirs would."""

    __slots__ = ("rate", "clock", "heap", "nclasses", "merged")

    def __init__(self) -> None:
        self.rate = 0.0
        self.clock = 0.0  # bytes served per flow since the group was formed
        # (head flow's tag in group clock, stamp, class)
        self.heap: list[tuple[float, int, FlowClass]] = []
        self.nclasses = 0
        self.merged = False

    def top(self) -> tuple[float, int, FlowClass] | None:
        """The earliest live entry, dropping entries left by classes that moved or changed head."""
        heap = self.heap
        while heap:
            entry = heap[0]
            if entry[1] == entry[2].stamp:
                return entry
            heapq.heappop(heap)
        return None



def filling(active: list[FlowClass]) -> list[tuple[float, list[FlowClass]]]:
    """Progressive filling. All unfrozen classes rise together; the next event is either a link
    saturating (every unfrozen class through it freezes) or a class reaching its cap. A heap
    keeps each link's saturation level, re-pushed when a freeze changes its load, so the cost
    is O(Σ route length · log #links).
    """
    unfrozen_weight: dict[Link, float] = {}
    unfrozen_count: dict[Link, int] = {}
    frozen_load: dict[Link, float] = {}
    for cls in active:
        for link, weight in cls.route:
            unfrozen_weight[link] = unfrozen_weight.get(link, 0.0) + cls.n * weight
            unfrozen_count[link] = unfrozen_count.get(link, 0) + 1
            frozen_load[link] = 0.0
    heap = [
        (link.capacity / w, link._index, link)
        for link, w in unfrozen_weight.items()
        if link.capacity < math.inf
    ]
    heapq.heapify(heap)
    caps = sorted((cls.cap, i, cls) for i, cls in enumerate(active) if cls.cap < math.inf)
    frozen: set[FlowClass] = set()
    levels: list[tuple[float, list[FlowClass]]] = []
    level, next_cap = 0.0, 0

    def saturation(link: Link) -> float:
        return (link.capacity - frozen_load[link]) / unfrozen_weight[link]

    def freeze(members: list[FlowClass], rate: float) -> None:
        levels.append((rate, members))
        for cls in members:
            frozen.add(cls)
            for link, weight in cls.route:
                frozen_load[link] += cls.n * weight * rate
                unfrozen_weight[link] -= cls.n * weight
                unfrozen_count[link] -= 1
                if unfrozen_count[link] and link.capacity < math.inf:
                    heapq.heappush(heap, (saturation(link), link._index, link))

    while len(frozen) < len(active):
        while heap and (not unfrozen_count[heap[0][2]] or heap[0][0] != saturation(heap[0][2])):
            heapq.heappop(heap)
        while next_cap < len(caps) and caps[next_cap][2] in frozen:
            next_cap += 1
        link_level = heap[0][0] if heap else math.inf
        cap_level = caps[next_cap][0] if next_cap < len(caps) else math.inf
        if cap_level <= link_level and cap_level < math.inf:
            level = max(level, cap_level)
            freeze([caps[next_cap][2]], level)
        elif link_level < math.inf:
            level = max(level, link_level)
            link = heap[0][2]
            freeze([cls for cls in link._classes if cls not in frozen], level)
        else:
            freeze([cls for cls in active if cls not in frozen], math.inf)
    return levels



# A shared link counts as unsaturated for the shortcut below only with this much room to spare:
# far more than the float rounding of the filling's sums (about 1e-12 relative at most).
_ROOM = 1e-6


def own_bounds(active: list[FlowClass]) -> list[tuple[float, list[FlowClass]]] | None:
    """The filling's result when no shared link binds, found without the filling.

    A class's own bound is its cap or, if lower, the level of a link only it crosses (its SM's
    port): ``capacity / (n · weight)``, as the filling computes it. If every link that two or
    more classes cross keeps room to spare with every class at its own bound, the filling never
    freezes anyone there (each such link's level stays above the next bound, exactly, with the
    margin), so it freezes the classes one by one at their own bounds, in the order it would:
    by level, a cap before a link at the same level, caps by position, links by index. None
    when some class has no finite bound or some shared link would be nearly full."""
    keyed, unbounded, load = own_keys(active)
    if unbounded or nearly_full(load) is not None:
        return None
    keyed.sort(key=_order)
    return [(bound, [cls]) for bound, _, _, cls in keyed]


def own_keys(active: Iterable[FlowClass]) -> tuple[list[tuple[float, int, int, FlowClass]], int, dict[Link, float]]:
    """Each class's own-bound key ``(bound, kind, index, class)`` in activation order (as
    :func:`own_bound`), how many have no finite bound, and the load the others put on each
    shared link at their bounds (summed in activation order: a function of the classes alone)."""
    keyed: list[tuple[float, int, int, FlowClass]] = []
    load: dict[Link, float] = {}
    unbounded = 0
    for i, cls in enumerate(active):
        bound, kind, index = own_bound(cls, i)
        keyed.append((bound, kind, index, cls))
        if bound == math.inf:
            unbounded += 1
            continue
        for link, weight in cls.route:
            if len(link._classes) > 1:
                load[link] = load.get(link, 0.0) + cls.n * weight * bound
    return keyed, unbounded, load


def nearly_full(load: dict[Link, float]) -> Link | None:
    """The first shared link whose ``load`` leaves it less than :data:`_ROOM` to spare, if any."""
    room = 1 - _ROOM
    return next((link for link, carried in load.items() if carried > link.capacity * room), None)


def own_bound(cls: FlowClass, seq: int) -> tuple[float, int, int]:
    """``cls``'s own bound and what sets it, as :func:`own_bounds` orders them: (its cap, 0,
    ``seq``) or (a link only it crosses: capacity / (n · weight), 1, the link's index), the
    lower; at equal levels a cap before a link, links by index."""
    bound, kind, index, n = cls.cap, 0, seq, cls.n
    for link, weight in cls.route:
        if len(link._classes) == 1:
            level = link.capacity / (n * weight)
            if level < bound or (level == bound and kind and link._index < index):
                bound, kind, index = level, 1, link._index
    return bound, kind, index


def _order(entry: tuple[float, int, int, FlowClass]) -> tuple[float, int, int]:
    return entry[:3]
