"""``tmasim validate public``: the model against every public whole-pipeline table
(:mod:`tmasim.validation.pipelines`), the figures per table, fitted and held-out parts apart."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tmasim.errors import TmasimError

RATCHET_KEYS = ("stage_answer_right", "stage_answer_within_one")
WHOLECHIP_KEYS = ("best_right", "cluster_right")  # the whole-chip table's figures that may only grow


def handle(args: argparse.Namespace) -> int:
    from tmasim.validation import pipelines, wholechip

    if not pipelines.PUBLIC.is_dir():
        raise TmasimError(f"validate public: the public tables are not at {pipelines.PUBLIC} (they ship with the "
                          "repository, not with the package): run it from a checkout of tmasim")
    results = {t.name: pipelines.validate(t, jobs=args.jobs) for t in pipelines.TABLES}
    results.update(wholechip.validate(jobs=args.jobs, ci_only=getattr(args, "ci_subset", False)))
    results.update(pipelines.shape_checks())
    if args.update_baseline:
        if getattr(args, "ci_subset", False):
            raise TmasimError("validate public: --update-baseline needs every run of the whole-chip table "
                              "(leave out --ci-subset)")
        _write_baseline(pipelines, results)
    if args.json:
        from tmasim.output.read_back import json_text

        print(json_text(results, indent=1))
    else:
        print("\n\n".join(wholechip.text(r) if r.get("kind") == "wholechip" else text(r) if "split" in r
                           else shape_text(r) for r in results.values()))
    worse = regressions(results, pipelines.baseline())
    if worse and not args.update_baseline:
        raise TmasimError("validate public: worse than the committed baseline "
                          f"(validation/public/results/pipelines.json): {'; '.join(worse)}")
    return 0


def _write_baseline(pipelines: Any, results: dict[str, Any]) -> None:
    import os
    import tempfile

    kept = {name: {k: v for k, v in r.items() if k != "rows" or "split" not in r} for name, r in results.items()}
    path = pipelines.BASELINE
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(kept, indent=1) + "\n")
    os.replace(temp, path)  # the baseline is whole or as it was
    print(f"wrote {pipelines.BASELINE.name}", file=sys.stderr)


def regressions(results: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """What got worse than the committed figures: fewer stage answers right, a higher mean error."""
    from tmasim.output.trust import figure

    worse = []
    for name, result in results.items():
        if "split" not in result:  # a check of shape: its mean error only
            old = baseline.get(name)
            if old and result["mean_error"] > old["mean_error"] + 5e-4:
                worse.append(f"{name}: mean error {result['mean_error']:.2%} > {old['mean_error']:.2%}")
            continue
        for part in ("fitted", "held_out"):
            new, old = result.get(part), baseline.get(name, {}).get(part)
            if not new or not old:
                continue
            keys = WHOLECHIP_KEYS if result.get("kind") == "wholechip" else RATCHET_KEYS
            worse += [f"{name} {part}: {key} {figure(new, key)} < {figure(old, key)}" for key in keys
                      if figure(new, key) < figure(old, key)]
            if new["mean_error"] > old["mean_error"] + 5e-4:
                worse.append(f"{name} {part}: mean error {new['mean_error']:.2%} > {old['mean_error']:.2%}")
    return worse


def shape_text(result: dict[str, Any]) -> str:
    lines = [f"{result['title']}  [{result['source']}]", "  a check of shape: nothing is fitted to it",
             f"  mean error {result['mean_error']:.1%} (worst {result['max_error']:.1%})"]
    shares = all(r["measured"] <= 1 for r in result["rows"])  # shares of the run, shown as percentages
    show = (lambda v: f"{v:7.1%}") if shares else (lambda v: f"{v:7.1f}")
    lines += [f"    {r['name']:20s} measured {show(r['measured'])}, predicted {show(r['predicted'])} "
              f"({r['error']:+.1%})" for r in result["rows"]]
    return "\n".join(lines)


def text(result: dict[str, Any]) -> str:
    from tmasim import names

    lines = [f"{result['title']}  [{result['source']}]", f"  split: {result['split']}",
             f"  {names.term('stage answer')}, measured / predicted, per stage sweep"]
    for part in ("fitted", "held_out", "all"):
        f = result.get(part)
        if f:
            name = part.replace("_", "-")
            lines.append(f"  {name:9s} {f['points']:4d} points, {f['sweeps']:3d} stage sweeps: "
                         f"mean error {f['mean_error']:.1%} (worst {f['max_error']:.1%}); "
                         f"stage answer right {f['stage_answer_right']} of "
                         f"{f['sweeps']}, within one stage {f['stage_answer_within_one']} of {f['sweeps']}")
    lines.append("  worst sweeps (stage answer measured / predicted, worst point's error):")
    for w in result["all"]["worst"]:
        lines.append(f"    {w['config']:18s} stages {w['stages_measured']} / {w['stages_predicted']}, "
                     f"{w['worst_error']:.1%}")
    missed = [k for k in result["all"]["stage_answers"] if k["stages_measured"] != k["stages_predicted"]]
    if missed:
        lines.append("  stage answers missed: " + ", ".join(
            f"{k['config']} ({k['stages_measured']} / {k['stages_predicted']})" for k in missed))
    return "\n".join(lines)
