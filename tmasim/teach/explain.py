"""``tmasim explain``: a narrated account of one run, generated from the run's own numbers.

Nothing here is canned: the formulas are printed with this scenario's numbers substituted, the
binding stage and the stalls are read from the summary, and every "what if" is a variant of the
scenario that was simulated here. A run whose synchronization was broken on purpose is labelled
INVALID on its first line, and its time is never presented as a result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmasim.errors import ModelError
from tmasim.inputs.scenario import Scenario
from tmasim.output.result import Result
from tmasim.output.trust import trust_for_row
from tmasim.teach.explain_attention import attention_story, attention_what_ifs
from tmasim.teach.explain_broken import explain_failure, explain_invalid
from tmasim.teach.explain_chip import chip_story, chip_what_ifs
from tmasim.teach.explain_tiles import tiles_story, tiles_what_ifs
from tmasim.teach.prose import bullet, paragraph
from tmasim.values import format as fmt

if TYPE_CHECKING:
    from tmasim.estimates.budget import Limits


def validity(stats: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether a run's time is a valid result, and why not (the run's valid and invalid_reason keys where present)."""
    if "valid" in stats:
        return bool(stats["valid"]), stats.get("invalid_reason")
    races = int(stats.get("races") or 0)
    if races:
        return False, (f"{fmt.plural(races, 'read')} of a slot before its copy landed (races): the consumer "
                       "computed on data that was not there yet")
    return True, None


def explain(scenario: Scenario, *, base_dir: Path | None = None, what_ifs: bool = True,
            overrides: Sequence[str] = (), limits: Limits | None = None) -> str:
    """The narrative for one scenario: simulate it, then explain the run (or why it cannot run).
    ``overrides`` (the --set settings) are named under the header, since the description does
    not know them. ``limits``: the budget the run and each what-if run under (a what-if past it
    says so in its line instead of running)."""
    from tmasim.simulation import simulate
    from tmasim.teach.what_if import LIMITS

    try:
        result = simulate(scenario, limits=limits)
    except ModelError as err:
        return explain_failure(scenario, err)
    token = LIMITS.set(dataclasses.replace(limits, what="what-if") if limits is not None else None)
    try:
        text = explain_result(result, base_dir=base_dir, what_ifs=what_ifs)
    finally:
        LIMITS.reset(token)
    if overrides and not text.startswith("INVALID"):
        header, rest = text.split("\n\n", 1)
        text = f"{header}\n{paragraph('with --set ' + ', --set '.join(overrides))}\n\n{rest}"
    return text


def explain_result(result: Result, *, base_dir: Path | None = None, what_ifs: bool = True) -> str:
    scenario, stats = result.scenario, result.stats
    valid, reason = validity(stats)
    if not valid:
        return explain_invalid(result, reason or "its synchronization was broken", base_dir)
    header = paragraph(f"{scenario.name}: {scenario.description}" if scenario.description else scenario.name)
    if stats["workload"] == "tiles":
        body = tiles_story(result)
        ifs = tiles_what_ifs(result, base_dir) if what_ifs else []
    elif stats["workload"] == "attention":
        body = attention_story(result)
        ifs = attention_what_ifs(result, base_dir) if what_ifs else []
    else:
        body = chip_story(result)
        ifs = chip_what_ifs(result, base_dir) if what_ifs else []
    lines = [header, ""] + body
    short = _in_short(stats)
    if short:
        lines += ["", paragraph(f"In short: {short}")]
    trust = trust_for_row(stats) if stats["workload"] != "tiles" else None  # tiles: exact (closed forms)
    if trust:
        lines += ["", paragraph(f"How far to trust it: {trust}.")]
    if ifs:
        lines += ["", "What if (each one simulated just now):"] + [bullet(x) for x in ifs]
    return "\n".join(lines)


def _in_short(stats: dict[str, Any]) -> str:
    """The workload's own one-sentence account of what binds (the workload protocol's explain,
    the sentence the report and the sweep answer give too)."""
    from tmasim.review.report import explain as binding_sentence

    return binding_sentence(stats)
