"""Runs that have no valid time: broken synchronization (races), deadlock, mbarrier misuse,
explained with the run's own numbers."""

from __future__ import annotations

from pathlib import Path

from tmasim.errors import ModelError
from tmasim.inputs.scenario import Scenario
from tmasim.output.result import Result
from tmasim.teach.prose import moment, paragraph
from tmasim.teach.what_if import variant
from tmasim.values import format as fmt


def explain_invalid(result: Result, reason: str, base_dir: Path | None) -> str:
    from tmasim.simulation import simulate

    scenario, stats = result.scenario, result.stats
    why = " (races: reads before the data landed)" if stats.get("races") else ""
    lines = [paragraph(f"INVALID{why}: this run's time is not a valid result: {reason}."), ""]
    shown = fmt.time(stats["makespan_ps"], 4)
    text = (f"The run ended at {shown}, but that is the time of a program that reads shared memory "
            "before the TMA has written it: the numbers it computed would be wrong, so its time is "
            "not comparable with anything.")
    if not scenario.pipeline.consumer_waits_full:
        fixed = simulate(variant(scenario, {"pipeline.consumer_waits_full": True, "run.records": False},
                                 base_dir))
        text += (f" With the full-barrier wait put back (pipeline.consumer_waits_full = true) the "
                 f"same scenario takes {fmt.time(fixed.makespan_ps, 4)}: that is the valid time.")
    lines.append(paragraph(text))
    if result.races:
        lines += ["", "The reads before the data landed:"]
        for race in result.races[:6]:
            landed = ("before its copy was even issued" if race.landed_ps is None
                      else f"{fmt.time(race.landed_ps - race.read_ps, 4)} before it landed "
                           f"at {fmt.time(race.landed_ps, 4)}")
            lines.append(f"  tile {race.tile} in slot {race.stage}: read {moment(race.read_ps)}, "
                         f"{landed}")
        if len(result.races) > 6:
            lines.append(f"  and {len(result.races) - 6} more")
    lines += ["", paragraph("Why: issuing a copy does not make its destination ready. Only the full "
                            "barrier's phase flip, when every byte the producer announced with "
                            "expect_tx has landed, says the slot is safe to read.")]
    return "\n".join(lines)


def explain_failure(scenario: Scenario, err: ModelError) -> str:
    """A model that cannot finish: the error, and what it means."""
    from tmasim.errors import DeadlockError

    kind = "deadlock" if isinstance(err, DeadlockError) else "mbarrier misuse"
    lines = [f"INVALID: this run cannot finish ({kind}), so it has no time at all.", "",
             paragraph(str(err)), ""]
    p = scenario.pipeline
    if isinstance(err, DeadlockError):
        why = ("Each waiter above waits for a barrier phase that nothing left in the program can "
               "complete. ")
        if p.empty_arrivals is not None and p.empty_arrivals != p.consumers:
            why += (f"Here the empty barriers expect {p.empty_arrivals} arrivals per phase but "
                    f"{fmt.plural(p.consumers, 'consumer warpgroup')} arrive, so a slot is never released and "
                    "the producer waits forever.")
        elif p.expect_tx is not None:
            why += (f"Here the producer announced {fmt.size(p.expect_tx)} with expect_tx, more "
                    "than the copy delivers, so the full barrier's byte count never returns to zero "
                    "and the consumer waits forever.")
    else:
        why = "The hardware's rules for mbarriers were broken; the simulator stops at the first misuse. "
        if p.expect_tx is not None:
            why += (f"Here the producer announced {fmt.size(p.expect_tx)} with expect_tx, fewer "
                    "bytes than the copy delivers, so the byte count would go below zero.")
    lines.append(paragraph(why))
    return "\n".join(lines)
