"""Where a GEMM's operands lie and who loads what: the tensor maps of A, B and C, the raster
order of the output tiles, the L2 reuse model, and how a cluster's CTAs share operand boxes.

The L2 reuse model. CTAs that run at the same time (a *wave*: the next G output tiles in raster
order, G = resident CTAs) march through their k-loops nearly in step, so when several of them
need the same A row-panel or B column-panel box, the first request misses to HBM and the others
hit in L2. Per wave and per operand the HBM fraction of a box is therefore (the missed share of
the wave's distinct panels) / (tiles in the wave). A panel read for the first time misses; one
read again misses as a data set of its reuse distance would (:func:`tmasim.l2.miss_fraction`):
the bytes of the other panels read since its last read, each once, as an LRU cache counts them
(:class:`ReuseDistance`). So the scheduler's order decides what L2 keeps: walking M first, a
column of tiles re-reads all of A, which stays in L2 while one column's A fits.
Limits: it assumes the CTAs of a wave stay within L2's capacity of each other (true for
lockstep k-loops; false if they drift far apart), counts whole panels (not the k-loop's moving
window through them), and spreads a wave's misses evenly over its tiles (which keeps identical
SMs identical, so aggregation stays exact).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tmasim.errors import ScenarioError
from tmasim.machine.cluster import check_multicast, default_multicast
from tmasim.machine.descriptor import TensorDescriptor
from tmasim.workloads.gemm_config import OUT_BYTES, SWIZZLE_BYTES, GemmConfig


@dataclass(frozen=True)
class OperandBoxes:
    """One operand's part of a stage, as CUTLASS loads it: a tensor map box is at most 256
    elements a dimension and, with a swizzle, at most the swizzle span wide (128 bytes for the
    128-byte swizzle; 16 bytes without one), so a k-step wider than that is several boxes side by
    side along K, each its own TMA instruction (with its own issue cost and requests)."""

    boxes: tuple[tuple[int, TensorDescriptor], ...]  # (K offset in elements, the box's descriptor)

    @property
    def first(self) -> TensorDescriptor:
        return self.boxes[0][1]

    @property
    def stage_bytes(self) -> int:
        return sum(d.box_bytes for _, d in self.boxes)

    @property
    def requests(self) -> int:
        return sum(d.requests for _, d in self.boxes)

    @property
    def tensor_bytes(self) -> int:
        return self.first.tensor_bytes

    def __len__(self) -> int:
        return len(self.boxes)


@dataclass(frozen=True)
class GemmLayout:
    """Descriptors of the three matrices, as the kernel's tensor maps would describe them: A and
    B as the boxes of one k-step (``OperandBoxes``), C as one box."""

    a: OperandBoxes
    b: OperandBoxes
    c: TensorDescriptor

    @staticmethod
    def of(config: GemmConfig) -> GemmLayout:
        bm, bn, bk = config.tile
        span = box_span(config.dtype, config.swizzle)
        return GemmLayout(
            a=_operand("A", config.m, config.k, config.dtype, bm, bk, span),
            b=_operand("B", config.n, config.k, config.dtype, bn, bk, span),
            c=_descriptor("C", config.m, config.n, config.out_dtype, bm, bn),
        )


def element_bytes(dtype: str) -> int:
    return 4 if dtype in ("tf32", "fp32") else 1 if dtype == "fp8" else 2


def box_span(dtype: str, swizzle: str) -> int:
    """The widest box's inner extent in elements: the swizzle span (at most 256 elements)."""
    return min(256, SWIZZLE_BYTES[swizzle] // element_bytes(dtype))


def _operand(name: str, rows: int, cols: int, dtype: str, box_rows: int, box_cols: int, span: int) -> OperandBoxes:
    widths = [span] * (box_cols // span) + ([box_cols % span] if box_cols % span else [])
    offsets = [sum(widths[:i]) for i in range(len(widths))]
    return OperandBoxes(tuple((off, _descriptor(name, rows, cols, dtype, box_rows, w))
                              for off, w in zip(offsets, widths, strict=True)))


def _descriptor(name: str, rows: int, cols: int, dtype: str, box_rows: int, box_cols: int) -> TensorDescriptor:
    """Rows padded to 16 bytes (a leading dimension, as BLAS's lda) so TMA accepts any shape."""
    element = element_bytes(dtype)
    leading = -(-cols * element // 16) * 16 // element
    try:
        return TensorDescriptor.matrix(rows, cols, dtype, box_rows, box_cols, leading_dim=leading)
    except ScenarioError as err:
        raise ScenarioError("workload.tile", f"{box_rows} x {box_cols} box of {name}", err.rule) from None


def stage_bytes(config: GemmConfig) -> int:
    layout = GemmLayout.of(config)
    return layout.a.stage_bytes + layout.b.stage_bytes


def default_epilogue_smem(config: GemmConfig) -> int:
    """CUTLASS-style staging: two BM x 32 sub-tiles of C, not the whole tile."""
    return 2 * config.tile[0] * min(config.tile[1], 32) * OUT_BYTES[config.out_dtype]


def cluster_grid(config: GemmConfig, cluster: tuple[int, int] = (1, 1)) -> tuple[int, int]:
    """Clusters launched along M and along N: the tile grid rounded up to whole clusters, as
    CUTLASS's tile schedulers round the problem's blocks up to the cluster shape."""
    return -(-config.tiles_m // cluster[0]), -(-config.tiles_n // cluster[1])


def tile_coords(config: GemmConfig, cluster: tuple[int, int] = (1, 1)) -> tuple[tuple[int, int], ...]:
    """(tile row, tile column) of each CTA's output tile, in launch (raster) order. With clusters
    the raster walks clusters (a band keeps ``group`` tile rows, rounded down to whole clusters),
    and each cluster's CTAs follow in rank order, rank = x + y·CX for the CTA x along M and y along
    N. Where the cluster does not divide the tile grid, the clusters cover it rounded up: the CTAs
    past its edge get tiles wholly outside the problem (row >= tiles_m or column >= tiles_n)."""
    return _coords(*cluster_grid(config, cluster), config.raster, max(1, config.group // cluster[0]),
                   *cluster)


@functools.lru_cache(maxsize=16)  # a few walks: a large problem's take megabytes
def _coords(tm: int, tn: int, raster: str, group: int, cx: int, cy: int) -> tuple[tuple[int, int], ...]:
    """tile_coords' walk, kept per grid and walk: a search bounds many designs that share them
    (stage counts, multicasts), and the walk of a large problem's tiles costs a millisecond."""
    clusters = _raster(tm, tn, raster, group)
    return tuple((r * cx + rank % cx, c * cy + rank // cx) for r, c in clusters for rank in range(cx * cy))


def tile_coord(config: GemmConfig, cluster: tuple[int, int], index: int) -> tuple[int, int]:
    """``tile_coords(config, cluster)[index]``, without the walk of every tile (each raster as
    :func:`_raster` walks it; tests/test_tma_boxes.py holds the two equal)."""
    cx, cy = cluster
    walked, rank = divmod(index, cx * cy)
    tm, tn = cluster_grid(config, cluster)
    if config.raster == "row":
        r, c = divmod(walked, tn)
    elif config.raster == "column":
        c, r = divmod(walked, tm)
    else:  # grouped: bands of `group` cluster rows (every band before the last one full)
        group = max(1, config.group // cx)
        band, local = divmod(walked, group * tn)
        rows = min(group, tm - band * group)
        r, c = band * group + local % rows, local // rows
    return r * cx + rank % cx, c * cy + rank // cx


def launched_ctas(config: GemmConfig, cluster: tuple[int, int]) -> int:
    """``len(tile_coords(config, cluster))``: the CTAs of the rounded-up cluster grid."""
    gm, gn = cluster_grid(config, cluster)
    return gm * gn * cluster[0] * cluster[1]


def in_bounds(config: GemmConfig, row: int, col: int) -> tuple[int, int]:
    """Rows and columns of tile (row, col) that lie inside C: BM x BN inside, fewer at the
    edge, 0 for a tile wholly outside (a rounded-up cluster's CTA past the edge)."""
    bm, bn = config.tile[0], config.tile[1]
    return max(0, min(bm, config.m - row * bm)), max(0, min(bn, config.n - col * bn))


def _raster(tm: int, tn: int, raster: str, group: int) -> list[tuple[int, int]]:
    if raster == "row":
        return [(u // tn, u % tn) for u in range(tm * tn)]
    if raster == "column":
        return [(u % tm, u // tm) for u in range(tm * tn)]
    coords = []  # grouped: bands of `group` tile rows, column-major inside a band
    for band in range(0, tm, group):
        rows = min(group, tm - band)
        coords += [(band + local % rows, local // rows) for local in range(rows * tn)]
    return coords


def hbm_fractions(config: GemmConfig, coords: Sequence[tuple[int, int]], concurrent: int,
                  l2_size: int, miss: Callable[[float], float],
                  in_flight: tuple[float, float] = (0.0, 0.0)) -> list[tuple[float, float]]:
    """Per output tile, the share of its A and B box bytes that come from HBM (see module doc).

    ``miss``: the share of a panel that misses when it is read again after ``distance`` bytes of
    other panels were read (L2's capacity, :func:`tmasim.l2.miss_fraction`). ``in_flight``: the bytes of
    one A and one B panel a wave's CTAs hold in their stages while they read it in step; where L2
    cannot hold the wave's panels' share (a GPU with a small L2, or none), its CTAs cannot share
    their reads and that part of each read comes from HBM."""
    if not config.l2_reuse or l2_size <= 0:
        return [(1.0, 1.0)] * len(coords)
    layout = GemmLayout.of(config)
    fits = layout.a.tensor_bytes + layout.b.tensor_bytes <= l2_size
    if fits and config.warm_l2:  # an earlier run (a benchmark's warm-up) left A and B in L2
        return [(0.0, 0.0)] * len(coords)
    a_panel = layout.a.tensor_bytes / config.tiles_m  # one row-panel of A: BM rows x K
    b_panel = layout.b.tensor_bytes / config.tiles_n
    reuse = ReuseDistance()
    result: list[tuple[float, float]] = []
    for start in range(0, len(coords), concurrent):
        wave = coords[start : start + concurrent]
        # A tile past the edge (a rounded-up cluster's) reads nothing of the operand it lies past:
        # only panels inside the problem miss, spread over the tiles that read them.
        rows = [r for r, _ in wave if r < config.tiles_m]
        cols = [c for _, c in wave if c < config.tiles_n]
        a_keys, b_keys = [("a", r) for r in dict.fromkeys(rows)], [("b", c) for c in dict.fromkeys(cols)]
        misses = reuse.wave([(k, a_panel) for k in a_keys] + [(k, b_panel) for k in b_keys], miss)
        a_miss, b_miss = sum(misses[k] for k in a_keys), sum(misses[k] for k in b_keys)
        window = len(a_keys) * in_flight[0] + len(b_keys) * in_flight[1]
        unshared = max(0.0, 1.0 - l2_size / window) if window else 0.0
        a_share, b_share = a_miss / max(1, len(rows)), b_miss / max(1, len(cols))
        result += [(a_share + (1.0 - a_share) * unshared, b_share + (1.0 - b_share) * unshared)] * len(wave)
    return result


class ReuseDistance:
    """LRU reuse distances of panels read wave after wave: for a panel read again, the bytes of
    the other panels read since its last read (each counted once), the waves between and the
    current one (read together, as the wave's CTAs run in step). A Fenwick tree over waves
    holds each panel's bytes at the wave of its last read."""

    def __init__(self) -> None:
        self._last: dict[object, tuple[int, float]] = {}  # panel -> (wave of its last read, bytes)
        self._tree: list[float] = [0.0]
        self._waves = 0

    def wave(self, panels: Sequence[tuple[object, float]], miss: Callable[[float], float]) -> dict[object, float]:
        """Each panel's missed share in this wave (1 on its first read)."""
        w = self._waves = self._waves + 1
        self._tree.append(0.0)
        self._grow(w)
        now = sum(nbytes for _, nbytes in panels)
        before = {key: self._last.get(key) for key, _ in panels}
        for seen in before.values():  # this wave's panels count once, as read now
            if seen is not None:
                self._add(seen[0], -seen[1])
        between = self._prefix(w - 1)
        out = {key: 1.0 if seen is None else miss(between - self._prefix(seen[0]) + now - nbytes)
               for (key, nbytes), seen in zip(panels, before.values(), strict=True)}
        for key, nbytes in panels:
            self._last[key] = (w, nbytes)
            self._add(w, nbytes)
        return out

    def _grow(self, w: int) -> None:
        """Fenwick node ``w`` holds the sum of its range; a new node starts from its children's sums."""
        low = w - (w & -w)
        self._tree[w] = self._prefix(w - 1) - self._prefix(low)

    def _add(self, i: int, value: float) -> None:
        while i <= self._waves:
            self._tree[i] += value
            i += i & -i

    def _prefix(self, i: int) -> float:
        total = 0.0
        while i > 0:
            total += self._tree[i]
            i -= i & -i
        return total


@dataclass(frozen=True)
class ClusterSetup:
    """How the CTAs of a cluster share operands: ``share`` = (CTAs each A box is split among,
    CTAs each B box is split among); 1 means no multicast of that operand."""

    shape: tuple[int, int]
    multicast: str
    share: tuple[int, int]
    pair: bool = False  # 2-SM MMA: rank 0 (leader) and rank 1 split B and compute one 2·BM x BN tile

    @staticmethod
    def of(config: GemmConfig, shape: tuple[int, int], mma_cta_group: int = 1) -> ClusterSetup:
        pair = mma_cta_group == 2
        # A pair (two CTAs along M) acts as one CTA of a cluster of pairs: B is shared between pairs.
        among = (shape[0] // 2, shape[1]) if pair else shape
        multicast = config.multicast if config.multicast is not None else default_multicast(among)
        check_multicast(multicast, among, shape if pair else None)
        a = shape[1] if multicast in ("a", "both") else 1
        b = among[0] if multicast in ("b", "both") else 1
        return ClusterSetup(shape, multicast, (a, 2 * b if pair else b), pair)

    def masks(self, rank: int) -> tuple[int, int]:
        """The ranks (bit masks) that receive this CTA's A slice and its B slice. In a pair each
        CTA holds one half of B: that half is shared with the same half in the other pairs."""
        cx, cy = self.shape
        x, y = rank % cx, rank // cx
        a = sum(1 << (x + j * cx) for j in range(cy)) if self.share[0] > 1 else 0
        b_group = [i for i in range(cx) if i % 2 == x % 2] if self.pair else range(cx)
        b = sum(1 << (i + y * cx) for i in b_group) if self.share[1] > (2 if self.pair else 1) else 0
        return a, b

    def b_slice(self, rank: int) -> int:
        """Which of the ``share[1]`` slices of the B box this CTA loads."""
        x = rank % self.shape[0]
        if not self.pair:
            return x
        return (x % 2) * (self.share[1] // 2) + x // 2 if self.share[1] > 2 else x % 2


def k_step_smem_traffic(config: GemmConfig, layout: GemmLayout, pair: bool) -> tuple[int, int]:
    """(TMA bytes written into one SM's SMEM per k-step, bytes of A read once into TMEM or
    registers when the MMA does not read A from SMEM itself; tmasim.operands)."""
    writes = layout.a.stage_bytes + (layout.b.stage_bytes // 2 if pair else layout.b.stage_bytes)
    return writes, 0 if config.operands == "SS" else layout.a.stage_bytes
