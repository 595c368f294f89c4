"""The ring steps fast-forward will skip, forecast from the plan before the run (for tmasim.budget).

Fast-forward (engine/fast_forward/jump.py) skips whole periods of a run while every CTA it simulates
stays inside a run of identical ring steps (``program.run_of``: the same segment, no epilogue;
with ping-pong warpgroups, the same unit), once the chip's state has repeated. Before the run we
cannot know when the state repeats, but we can bound what is left to simulate:

- the CTAs' timelines: each lane (a persistent CTA, or a resident slot running its CTAs one after
  another) is laid out in ring steps, every lane starting at step 0 and advancing one step at a
  time, as identical CTAs do in lockstep;
- every lane's run boundaries cut the common step axis: the skip never crosses one, since a jump
  stops where any moving CTA's run ends;
- within each stretch between cuts, each active lane simulates at most :data:`TRANSIENT_PERIODS`
  periods of ``stages`` steps (:data:`COUPLED_TRANSIENT_PERIODS` in clusters and 2-SM pairs:
  the transient before the state repeats, the period it is compared with and the remainder
  after the jump) and skips the rest.

CTAs whose per-step work differs (tiles at a tensor's edge, which step faster) drift apart in
time, so their boundaries cut each other's runs more often than the step axis shows: where the
concurrently simulated GEMM CTAs do not all run identical units, each lane's runs are laid out in
time instead, a step taking a proxy of its time (:func:`step_pace`: its MMAs and shared-memory
hold, its bytes through the SM's port, or its TMA issues), and the boundaries cut one another where
they fall in time (:func:`paced_skipped_steps`), with a longer transient a stretch
(:data:`PACED_TRANSIENT_FACTOR`). The forecast is off wherever the run will not skip: see
:func:`skip_possible`.

Attention's steps are K/V blocks: a unit's first and last block each stand alone, its runs of
identical blocks between them are runs (:data:`ATTENTION_TRANSIENT_PERIODS` a stretch). Blocks
that all run at one pace keep the lanes in step block for block even where units differ in length
(a causal launch's 120 classes: 29,760 forecast, 30,240 skipped on attention-h100-causal).

Whole units: without records and ping-pong turns, a persistent CTA's tiles recur (the same
segments and epilogue, its wave's L2 pattern), and fast-forward drops whole periods of them
once the chip's state repeats a period of units later (engine/fast_forward/jump.py). Where every
persistent CTA's units from its second on repeat with a period of P units (their joint period L, at most
:data:`WHOLE_UNIT_PERIOD_LIMIT`), the run simulates its first and last units and
:data:`WHOLE_UNIT_TRANSIENT_PERIODS` periods, and skips the others; where they show no period,
stretches of identical units are skipped but their first :data:`RUN_TRANSIENT_UNITS`. The skip
within units is forecast on what is left, in proportion.

Where copies flow through the shared fabric (GEMM, stream), the state repeats only if the flows'
rates do too, and the plan cannot show whether they will. On the grid of
``benchmarks/bench_estimates.py`` the lanes' forecast is 88-97 % of what GEMM runs skip (persistent,
grid launch, every SM, 2-SM pairs, clusters), so :func:`forecast` forecasts it for them too. The
known exception, kept as a case of the grid, is a run whose period repeats to the picosecond
while some flows in it drift in phase from period to period (the fabric's sharing has no force
that pulls them back, so its state never repeats bit for bit; docs/design.md section 9): a
2x1-cluster point of the 192-point sweep (256x128 tiles, 4 stages, K 4096, grouped raster) skips
5 % of its ring steps where :func:`skipped_steps` says 48 %, and its estimate is about a third of
its time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tmasim.engine.attention.program import AttentionProgram, AttentionUnit
from tmasim.engine.program import Repeat, TimedProgram, UnitProgram

# Periods of ``stages`` steps simulated per stretch of identical steps, measured on the grid of
# benchmarks/bench_estimates.py: 4.5 in lockstep (GEMM every SM or a grid launch: 18 steps a
# unit at 4 stages; tiles fewer). CTAs that fill each other's slots (clusters, 2-SM pairs) settle
# more slowly: 5 periods forecast more than they skip, 8 less.
TRANSIENT_PERIODS = 5
COUPLED_TRANSIENT_PERIODS = 8
# Attention's K/V blocks (2-SM pairs too): 4 periods forecast a little less than attention-h100,
# -b200, -hdim256 and -b200-2sm skip (1,792 against 1,850 blocks; 24,440 against 24,738), 5 less
# again, 8 a quarter less for the pair.
ATTENTION_TRANSIENT_PERIODS = 4
# Lanes out of step (edge tiles, laid out in time: :func:`paced_skipped_steps`) settle into a
# repeating state more slowly than lanes in step: each stretch between their cuts simulates this
# many times the periods above. Measured: gemm-h100 with 128x192 tiles skips 23,411 of 37,376
# steps (4: 13,724 forecast; 2: 25,404, more than it skips); B200 whole-chip GEMMs with K = 128000
# and (2,2) clusters, 96-99% of their steps (4 forecasts 89-99%, where lanes out of step forecast
# none and their estimates were up to 63x their time).
PACED_TRANSIENT_FACTOR = 4
# The longest period of units (jointly over the lanes) a forecast looks for: a run needs about
# three periods of them before it can skip, and a longer search costs the estimate its speed.
WHOLE_UNIT_PERIOD_LIMIT = 256
# Periods of units a run simulates besides its first and last unit: the transient before the
# chip's state repeats to the bit, the period that shows the repeat, and the tail after the jump
# short of a period. Measured: 2048x32768x2560 on B200's pairs (56 units a CTA, period 4)
# simulates 28 units (this forecasts 20); 4096x128000x7168 (865 units, period 16) simulates 49
# (this forecasts 81).
WHOLE_UNIT_TRANSIENT_PERIODS = 4
# Units of a stretch of identical ones simulated before its skip (the transient after the
# previous work, the unit whose state repeats, the one after the jump): 414 of 471 units a CTA
# forecast and skipped on 128000x4096x7168 in 64x128 tiles, whose wave pattern has no period.
RUN_TRANSIENT_UNITS = 3


def skip_possible(programs: Sequence[Any]) -> bool:
    """Whether fast-forward can skip anything in these programs: ring steps it can cut, and
    per-step times that repeat (no jitter, no list of times)."""
    if not programs:
        return False
    first = programs[0]
    if isinstance(first, TimedProgram):
        return isinstance(first.load, Repeat) and isinstance(first.compute_ps, Repeat) \
            and isinstance(first.latency, Repeat)
    return isinstance(first, (UnitProgram, AttentionProgram))


def forecast(chip: Any, stages: int) -> int:
    """Ring steps fast-forward is expected to skip in a run of ``chip`` (built, not yet run),
    when the skip is on for it: :func:`skipped_steps` of its lanes (for copies that flow through
    the fabric too: see the module doc)."""
    plan, sync = chip.plan, chip.sync
    lanes = lanes_of(chip.planned.programs, chip.sms, 1 if plan.persistent else plan.ctas_per_sm)
    coupled = plan.cluster > 1  # CTAs that fill each other's slots (clusters, 2-SM pairs)
    if plan.programs and isinstance(plan.programs[0], AttentionProgram):
        # (attention's ping-pong is a turn per GEMM inside a unit, not units in turn)
        return skipped_steps(lanes, stages, units_matter=False, periods=ATTENTION_TRANSIENT_PERIODS)
    units_matter = sync.mode == "pingpong" and sync.consumers > 1
    periods = COUPLED_TRANSIENT_PERIODS if coupled else TRANSIENT_PERIODS
    within = skipped_steps(lanes, stages, units_matter=units_matter, periods=periods)
    programs = [p for lane in lanes for p in lane]
    if not within and programs and isinstance(programs[0], UnitProgram) and skip_possible(programs) \
            and not _lockstep(programs):  # lanes out of step (edge tiles): their run boundaries laid out in time
        within = paced_skipped_steps(lanes, stages, chip.gpu, units_matter=units_matter,
                                     periods=periods * PACED_TRANSIENT_FACTOR)
    if units_matter or chip.recorder is not None or (chip.fabric is not None and chip.fabric.record_series):
        return within
    whole = whole_units(chip.planned.programs) if plan.persistent else None
    if whole is None:
        return within
    skipped, fraction = whole
    return skipped + round(within * (1 - fraction))


def whole_units(programs: Sequence[Any]) -> tuple[int, float] | None:
    """Ring steps the skip of whole units drops from these persistent CTAs' programs (see the
    module doc) and the fraction of all their steps they are; None where their units show no
    joint period."""
    if not programs or any(not isinstance(p, UnitProgram) for p in programs):
        return None
    count = min(len(p.units) for p in programs)
    if count < 4:
        return None
    # each unit position's work on every lane at once, as a number (the lanes advance unit by unit together)
    numbers: dict[tuple[Any, ...], int] = {}
    keys = zip(*([(tuple(map(id, u.segments)), u.epilogue) for u in p.units[:count]] for p in programs), strict=True)
    codes = np.asarray([numbers.setdefault(key, len(numbers)) for key in keys], dtype=np.int64)
    steps = np.asarray([sum(p.units[n].steps for p in programs) for n in range(count)], dtype=np.int64)
    period = unit_period(codes[1:-1], WHOLE_UNIT_PERIOD_LIMIT)
    skipped = 0
    if period is not None:
        k = (count - 2 - WHOLE_UNIT_TRANSIENT_PERIODS * period) // period
        skipped = k * int(steps[1:1 + period].sum()) if k > 0 else 0
    else:  # stretches of one unit's work repeated: each skipped but its first few
        change = np.flatnonzero(np.diff(codes)) + 1
        bounds = [0, *change.tolist(), count]
        for start, stop in zip(bounds, bounds[1:], strict=False):
            if stop - start > RUN_TRANSIENT_UNITS:
                skipped += int(steps[start]) * (stop - start - RUN_TRANSIENT_UNITS)
    if not skipped:
        return None
    return skipped, skipped / max(1, sum(p.steps for p in programs))


def unit_period(codes: np.ndarray, limit: int) -> int | None:
    """The fewest units after which a sequence of units' works repeats; None if none up to
    ``limit`` (nor a third of the sequence) does."""
    for period in range(1, min(limit, len(codes) // 3) + 1):
        if np.array_equal(codes[:-period], codes[period:]):
            return period
    return None


def obstacle(chip: Any) -> str:
    """Why fast-forward will skip little of a run of ``chip`` (built, not yet run), in words a
    sweep's estimate line can carry; '' where the plan shows nothing in its way. Classes of SMs
    whose work units differ (edge tiles, which step at another pace) fall out of step: a jump
    stops at any class's unit boundary, so each of them costs every class a transient. Where
    aggregation is off for a reason of the plan (clusters sharing SMs in a grid launch), that
    is said first: every SM simulated is what costs most."""
    programs = chip.planned.programs
    if not programs:
        return ""
    note = getattr(chip, "aggregation_note", "")
    if note.startswith("off: ") and "run.aggregate" not in note and "drift" not in note:
        # not fast-forward's doing, but what makes the run slow: every SM simulated
        return f"every one of its {chip.plan.sms} SMs is simulated (aggregation {note})"
    if not skip_possible(programs):
        return "its per-step times vary (jitter or a list of times), so no period repeats"
    if isinstance(programs[0], AttentionProgram):
        return _attention_obstacle(programs)
    if isinstance(programs[0], TimedProgram) or _lockstep(programs):
        return ""
    if chip.plan.persistent and whole_units(programs) is not None:
        return ""  # whole periods of units are skipped all the same
    queues = [[program for _, program in sm.queue] for sm in chip.sms]
    if not any(queues):
        queues = [[program] for program in programs]
    works = [[_work(unit) for program in queue for unit in _pacing(program.units)] for queue in queues]
    counts = Counter(work for queue in works for work in queue)
    common = counts.most_common(1)[0][0]
    odd = sum(1 for queue in works if any(work != common for work in queue))
    return (f"{odd} of its {len(queues)} SM classes run work units unlike the others' (edge tiles or shorter "
            "units, at another pace), so the classes fall out of step and fast-forward stops at each one's unit "
            "boundaries")


def lanes_of(programs: Sequence[Any], sms: Sequence[Any], per_sm: int) -> list[list[Any]]:
    """The simulated CTAs' programs as lanes: each SM's queue (when it has its own) dealt to its
    ``per_sm`` resident slots, else all programs dealt to every slot in launch order."""
    queues = [[program for _, program in sm.queue] for sm in sms]
    if not any(queues):
        queues = [list(programs)]
        per_sm = per_sm * len(sms)
    return [queue[slot::per_sm] for queue in queues for slot in range(per_sm) if queue[slot::per_sm]]


def skipped_steps(lanes: Sequence[Sequence[Any]], stages: int, *, units_matter: bool,
                  periods: int = TRANSIENT_PERIODS) -> int:
    """Ring steps fast-forward will skip at least, at most: an estimate from the lanes' runs of
    identical steps (see the module doc). ``lanes`` lists the programs each simulated slot runs,
    in order; ``periods``: periods of ``stages`` steps each stretch simulates."""
    programs = [p for lane in lanes for p in lane]
    if not skip_possible(programs) or not _lockstep(programs):
        return 0
    window = periods * stages
    cuts: set[int] = set()
    ends: list[int] = []
    for lane in lanes:
        at = 0
        for program in lane:
            for length in runs(program, units_matter):
                cuts.add(at)
                at += length
        cuts.add(at)
        ends.append(at)
    points = sorted(cuts)
    ends.sort()
    skipped, gone = 0, 0
    for start, stop in zip(points, points[1:], strict=False):
        while gone < len(ends) and ends[gone] <= start:
            gone += 1
        skipped += (len(ends) - gone) * max(0, stop - start - window)
    return skipped


def paced_skipped_steps(lanes: Sequence[Sequence[Any]], stages: int, gpu: Any, *, units_matter: bool,
                        periods: int = TRANSIENT_PERIODS) -> int:
    """:func:`skipped_steps` for GEMM lanes that do not advance in lockstep (edge tiles: units of
    other work, at another pace). Each lane's runs are laid out on a time axis, each step taking
    its segment's :func:`step_pace`, so the lanes' run boundaries cut one another where they fall
    in time; between two cuts each active lane skips what exceeds its ``periods`` periods of
    ``stages`` steps. With every pace equal this is :func:`skipped_steps`; 0 where the programs
    are not GEMM units or cannot skip."""
    programs = [p for lane in lanes for p in lane]
    if not programs or not skip_possible(programs) or not all(isinstance(p, UnitProgram) for p in programs):
        return 0
    window = periods * stages
    laid: list[tuple[np.ndarray, np.ndarray]] = []  # per lane: its runs' start times (and its end), paces
    for lane in lanes:
        lengths: list[int] = []
        paces: list[float] = []
        for program in lane:
            for length, segment in paced_runs(program, units_matter):
                lengths.append(length)
                paces.append(step_pace(segment, gpu))
        pace = np.asarray(paces, dtype=np.float64)
        starts = np.concatenate(([0.0], np.cumsum(np.asarray(lengths, dtype=np.float64) * pace)))
        laid.append((starts, pace))
    cuts = np.unique(np.concatenate([starts for starts, _ in laid]))
    gaps = np.diff(cuts)
    skipped = 0.0
    for starts, pace in laid:
        inside = cuts[:-1] < starts[-1]  # the stretches this lane is still running in
        run = np.searchsorted(starts, cuts[:-1][inside], side="right") - 1
        skipped += float(np.maximum(0.0, gaps[inside] / pace[run] - window).sum())
    return int(skipped)


def step_pace(segment: Any, gpu: Any) -> float:
    """A proxy for the time a step of ``segment`` takes, for laying lanes out in time: its MMAs
    and shared-memory hold, or its copies through the SM's port, or the TMA unit's issues,
    whichever is longest (ps)."""
    port = gpu.sm_port_bandwidth
    moved = sum(c.memory_bytes for c in segment.copies) / port if port and port != float("inf") else 0.0
    return max(float(segment.compute + segment.hold), moved, float(len(segment.copies) * gpu.tma_issue), 1.0)


def paced_runs(program: UnitProgram, units_matter: bool) -> list[tuple[int, Any]]:
    """The runs of a GEMM program's identical steps (:func:`runs`), each with the segment whose
    steps it repeats."""
    found: list[tuple[int, Any]] = []
    current = None  # the segment the open run repeats
    for unit in program.units:
        for n, segment in enumerate(unit.segments):
            last = n == len(unit.segments) - 1
            plain = segment.steps - (1 if last and (units_matter or unit.epilogue is not None) else 0)
            if plain > 0:
                if segment is current and found:
                    found[-1] = (found[-1][0] + plain, segment)
                else:
                    found.append((plain, segment))
                current = segment
            if plain < segment.steps:  # the unit's last step stands alone
                found.append((1, segment))
                current = None
        if units_matter:
            current = None
    return found


def runs(program: Any, units_matter: bool) -> Iterable[int]:
    """The lengths of a program's runs of identical steps, in order (a step alone is a run of 1),
    computed from its units and segments (O(segments), not O(steps))."""
    if isinstance(program, TimedProgram):
        same = skip_possible([program])
        return [program.steps] if same else [1] * program.steps
    if isinstance(program, AttentionProgram):
        return _attention_runs(program)
    return [length for length, _ in paced_runs(program, units_matter)]


def _attention_runs(program: AttentionProgram) -> list[int]:
    """An attention unit's runs: its first block alone, its runs of identical blocks between,
    its last block alone (AttentionProgram.run_of)."""
    lengths: list[int] = []
    for unit in program.units:
        if unit.blocks <= 2:
            lengths += [1] * unit.blocks
            continue
        counts = [count for _, count in unit.runs if count]
        counts[0] -= 1
        counts[-1] -= 1
        lengths += [1, *(c for c in counts if c), 1]
    return lengths


def _attention_obstacle(programs: Sequence[Any]) -> str:
    """Attention: blocks at one pace whose units differ in length (a causal launch's) bound every
    jump at each class's unit boundaries; blocks at several paces fall out of step."""
    if not _lockstep(programs):
        return "its SM classes run K/V blocks at different paces, so they fall out of step"
    lengths = {unit.blocks for program in programs for unit in program.units}
    if len(lengths) <= 1:
        return ""
    return (f"its {len(programs)} SM classes run units of different lengths (a causal launch's), so each class's "
            "unit boundaries bound fast-forward's jumps")


def _block_pace(block: Any) -> tuple[Any, ...]:
    """What sets an attention block's pace: its copies' bytes and requests, its MMAs' times, its
    vector work; not its useful FLOPs (masked scores, a pair follower's) nor where bytes hit."""
    return (_copy_pace(block.k), _copy_pace(block.v), (block.qk.occupancy, block.qk.tail),
            (block.pv.occupancy, block.pv.tail), block.softmax, block.correction, block.early, block.convert)


def _lockstep(programs: Sequence[Any]) -> bool:
    """Whether every program's units are the same work, so that its CTAs advance in lockstep
    (attention: also where every block runs at one pace: units of different lengths, a causal
    launch's, still advance block for block, and the lanes' boundaries cut the step axis where they
    fall)."""
    if isinstance(programs[0], AttentionProgram):
        return len({_work(unit) for p in programs for unit in p.units}) == 1 or \
            len({_block_pace(block) for p in programs for unit in p.units for block, _ in unit.runs}) == 1
    if isinstance(programs[0], TimedProgram):
        return len({(p.load.value, p.compute_ps.value, p.latency.value, p.tile_bytes) for p in programs}) == 1
    return len({_work(unit) for p in programs for unit in _pacing(p.units)}) == 1


def _pacing(units: Sequence[Any]) -> Sequence[Any]:
    """The units that set a program's pace: all but a last one that differs from the one before
    only in its epilogue (a TMEM accumulator's last drain, with no next tile to overlap: nothing
    runs after it)."""
    if len(units) > 1 and _work(units[-1])[0] == _work(units[-2])[0] and _work(units[-1]) != _work(units[-2]):
        return units[:-1]
    return units


def _copy_pace(c: Any) -> tuple[Any, ...]:
    """What sets a copy's pace: its bytes, fixed time, multicast and requests (not its latency nor
    its share from HBM, which vary by unit)."""
    return (c.smem_bytes, c.memory_bytes, c.busy, c.multicast, c.requests)


def _work(unit: Any) -> tuple[Any, ...]:
    """What sets a unit's pace: its segments' steps, compute and copies (bytes, requests,
    latency), and its epilogue; not where its bytes hit (L2 or HBM shares vary by unit)."""
    if isinstance(unit, AttentionUnit):  # its K/V blocks (a 2-SM pair's idle follower loads no Q: same pace)
        return tuple((count, _block_pace(block)) for block, count in unit.runs)
    copies = [tuple(_copy_pace(c) for c in s.copies) for s in unit.segments]
    epilogue = unit.epilogue.duration if unit.epilogue is not None else None
    return tuple((s.steps, s.compute, s.tail, s.hold, c) for s, c in zip(unit.segments, copies, strict=True)), \
        epilogue
