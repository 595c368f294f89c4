"""Every bundled scenario's makespan, summary and spans (a hash), one JSON line each: run it in
two checkouts and diff the outputs to see whether an engine change moved any figure.

The scenarios are the package's (tmasim/scenarios), the repository's (scenarios/) and its
lessons (scenarios/lessons/), each run as it is (records as the file says; large runs
allowed). The spans' and events' hashes are pandas' row hashes, weighted by the row's position
and summed, so equal hashes mean equal tables, in the same order (to a 64-bit collision); a
scenario that fails prints its error instead.

    python benchmarks/dump_summaries.py > after.jsonl   # and in the other checkout
    diff before.jsonl after.jsonl
    python benchmarks/dump_summaries.py --only causal    # names containing a word
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)
import pandas as pd

from tmasim import scenario as scenarios
from tmasim.errors import TmasimError
from tmasim.simulation import simulate

ROOT = Path(checkout.ROOT)


def scenario_paths() -> list[Path]:
    return [*sorted((ROOT / "tmasim" / "scenarios").glob("*.toml")), *sorted((ROOT / "scenarios").glob("*.toml")),
            *sorted((ROOT / "scenarios" / "lessons").glob("*.toml"))]


def dump(path: Path) -> dict[str, object]:
    try:
        result = simulate(scenarios.load(path, []), allow_large=True)
    except TmasimError as err:  # the bug-* scenarios stop with a model error, by design
        return {"error": f"{type(err).__name__}: {err}"[:200]}
    return {"makespan_ps": result.makespan_ps, "stats": json.loads(result.to_json()),
            "spans": _hashed(result.spans), "events": _hashed(result.events)}


def _hashed(frame: pd.DataFrame) -> list[int]:
    """Rows and a hash of them all, in order (the row's position counts: equal hashes, equal tables)."""
    rows = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    weights = (pd.RangeIndex(len(rows)).to_numpy().astype("uint64") * 0x9E3779B97F4A7C15) | 1
    return [len(frame), int((rows * weights).sum())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="run the scenarios whose path contains this (repeatable)")
    args = parser.parse_args()
    for path in scenario_paths():
        name = str(path.relative_to(ROOT))
        if args.only and not any(word in name for word in args.only):
            continue
        start = time.process_time()
        print(json.dumps({"scenario": name, **dump(path)}, sort_keys=True), flush=True)
        print(f"{name}: {time.process_time() - start:.2f} s CPU", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
