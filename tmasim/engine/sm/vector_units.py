"""The SM's vector pipes (multi-function, FP32, ALU, issue), shared by processor sharing.

An SM has four sub-partitions; a warpgroup puts one warp on each, and each sub-partition's
scheduler issues from a different ready warp every cycle. Two warpgroups with FP32 or
exponential work at once therefore share each pipe's throughput cycle by cycle instead of
queueing behind each other: with n jobs on a pipe, each advances at 1/n of the pipe's rate
(egalitarian processor sharing). A job alone gets the whole pipe, as before.

Each pipe keeps a *virtual clock* that advances at the rate one job of n receives; a job's
finish tag is the virtual time at its arrival plus its work, so the job with the smallest tag
finishes first and arrivals need not touch the others. Virtual time is kept in units of
1/``SCALE`` ps, with ``SCALE`` divisible by every n up to 16, so it is exact for integer times;
a finish that falls between picoseconds is rounded up to the next one.
"""

from __future__ import annotations

import heapq
from typing import Any

import simpy

from tmasim.engine.event_loop import succeed, timeout

SCALE = 720_720  # lcm(1..16)


class _Job:
    """One request: done when each of its parts (one per pipe it uses) has finished."""

    __slots__ = ("left", "done")

    def __init__(self, parts: int, done: simpy.Event) -> None:
        self.left = parts
        self.done = done

    def part_done(self) -> None:
        self.left -= 1
        if not self.left:
            succeed(self.done)


class QuietPart:
    """A part of ``job`` that goes on quietly (:meth:`SharedPipe.add_quiet`)."""

    __slots__ = ("job",)

    def __init__(self, job: _Job) -> None:
        self.job = job


class _Wake:
    """A pipe's wake-up at its head job's finish; stale once the pipe has scheduled another. An
    object, not a closure, so that fast-forward's state can say what it holds."""

    __slots__ = ("pipe", "generation")

    def __init__(self, pipe: SharedPipe, generation: int) -> None:
        self.pipe, self.generation = pipe, generation

    def __call__(self, _: object) -> None:
        if self.generation == self.pipe._generation:
            self.pipe._finish()

    def fast_forward_state(self, describe: Any) -> tuple[Any, ...]:
        return ("pipe wake", describe.name(self.pipe), self.generation - self.pipe._generation)


class SharedPipe:
    """One pipe of an SM (its multi-function unit, FP32 pipe, ALU or issue slots) under processor sharing."""

    __slots__ = ("env", "_jobs", "_virtual", "_last", "_generation", "_count")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._jobs: list[tuple[int, int, _Job | QuietPart]] = []  # (finish tag, arrival order, job or quiet part)
        self._virtual = 0
        self._last: float = 0
        self._generation = 0
        self._count = 0

    def add(self, work_ps: int, job: _Job) -> None:
        self._retire_quiet()
        jobs = self._jobs
        quiet = jobs[0][2] if jobs else None
        if isinstance(quiet, QuietPart):  # a quiet part shares the pipe from now: it may end its job
            quiet.job.left += 1
            jobs[0] = (jobs[0][0], jobs[0][1], quiet.job)
        self._advance()
        self._count += 1
        heapq.heappush(jobs, (self._virtual + work_ps * SCALE, self._count, job))
        self._schedule()

    def add_quiet(self, work_ps: int, job: _Job) -> None:
        """A part of ``job`` shorter than another of its parts, on this pipe while it is idle: no
        wake-up is made for it. Alone, it ends ``work_ps`` from now, before the job's longer part
        (which nothing can speed up), so its end would end no job and leave the pipe idle: the
        pipe takes it out when another job comes (:meth:`_retire_quiet`). One that comes before
        its end shares the pipe with it, which may delay it past the job's other parts, so from
        then on it is a part like any other (:meth:`add`)."""
        self._retire_quiet()
        self._advance()
        self._generation += 1  # (as the wake-up's schedule would: any older one is stale)
        self._count += 1
        heapq.heappush(self._jobs, (self._virtual + work_ps * SCALE, self._count, QuietPart(job)))

    @property
    def idle(self) -> bool:
        """No job on the pipe now (a quiet part that has ended counts as gone)."""
        self._retire_quiet()
        return not self._jobs

    def _retire_quiet(self) -> None:
        """A quiet part alone on the pipe that has ended by now leaves it, at its end, as its
        wake-up would have taken it."""
        jobs = self._jobs
        if len(jobs) == 1 and isinstance(jobs[0][2], QuietPart):
            tag = jobs[0][0]
            end = self._last + (tag - self._virtual) // SCALE  # alone since it came: exact
            if end <= self.env._now:
                jobs.clear()
                self._virtual, self._last = tag, end
                self._generation += 1

    def _advance(self) -> None:
        now = self.env._now  # (no property call: a hot path)
        if self._jobs and now > self._last:
            self._virtual += int(now - self._last) * SCALE // len(self._jobs)
        self._last = now

    def _schedule(self) -> None:
        """A wake-up when the job with the smallest tag finishes (earlier ones are stale)."""
        self._generation += 1
        jobs = self._jobs
        if not jobs:
            return
        # The head may be past its tag already: it ended within the picosecond its wake-up was
        # rounded up to, and a job arrived in that picosecond before the wake-up came (the clock
        # then moved on at a share too large for it): it ends now.
        left = max(0, (jobs[0][0] - self._virtual) * len(jobs))
        timeout(self.env, -(-left // SCALE)).callbacks.append(_Wake(self, self._generation))

    def _finish(self) -> None:
        self._advance()
        jobs = self._jobs
        while jobs and jobs[0][0] <= self._virtual:
            job = heapq.heappop(jobs)[2]
            if isinstance(job, _Job):  # (never a quiet part: it has no wake-up while it is quiet)
                job.part_done()
        self._schedule()


PIPES = ("xu", "fma", "alu", "issue")  # the order of VectorWork.pipes


class VectorUnits:
    """The SM's vector pipes side by side: the multi-function unit (``xu``: exponentials), the
    FP32 pipe (``fma``), the ALU (``alu``: min/max, conversions) and the warp schedulers' issue
    slots (``issue``), each shared by processor sharing among the jobs on it. A job's parts run
    on their pipes at once; it is done when every part is (a rescale, FMA only, shares the FP32
    pipe and the issue slots with another warpgroup's softmax and runs beside its exponentials)."""

    __slots__ = ("env", "name", "pipes", "busy_ps", "quiet")

    def __init__(self, env: simpy.Environment, name: str) -> None:
        self.env = env
        self.name = name
        self.pipes = tuple(SharedPipe(env) for _ in PIPES)
        self.busy_ps = [0] * len(PIPES)  # work done per pipe, in ps of the whole pipe (they never idle with work)
        self.quiet = True  # parts that cannot end their job go on without a wake-up (False: every part has one)

    def run(self, parts: tuple[int, ...]) -> simpy.Event:
        """Start a job of ``parts`` (ps of whole-pipe work on each of :data:`PIPES`) now; its end event.
        A part shorter than another of the job, on an idle pipe, goes on quietly (:meth:`SharedPipe.add_quiet`)."""
        done = simpy.Event(self.env)
        job = _Job(0, done)
        busy, pipes = self.busy_ps, self.pipes
        longest = max(parts)
        for i, work in enumerate(parts):
            if work > 0:
                busy[i] += work
                pipe = pipes[i]
                if work < longest and self.quiet and pipe.idle:
                    pipe.add_quiet(work, job)
                else:
                    job.left += 1
                    pipe.add(work, job)
        if not job.left:
            done.succeed()
        return done
