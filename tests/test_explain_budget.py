"""``tmasim explain`` runs under the same limits as ``run``: ``--yes`` lifts them, a large run or
what-if is noted before it starts, and a what-if past the limit says so in its line."""

from __future__ import annotations

import pytest

from tmasim import budget
from tmasim.cli import main
from tmasim.scenario import load
from tmasim.teach.explain import explain


def test_explain_accepts_yes_and_refuses_a_huge_run_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "reference", "--yes", "--no-what-if"]) == 0
    code = main(["explain", "gemm-ideal", "--set", "workload.tile=[8,8,8]"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "add --yes" in err[0] and err[0].startswith("tmasim: error: explain")


def test_a_what_if_past_the_limit_says_so_instead_of_running(monkeypatch: pytest.MonkeyPatch) -> None:
    notes: list[str] = []
    monkeypatch.setattr(budget, "LIMIT_SECONDS", 0.0)  # every run is over the limit ...
    base = load("reference")
    text = explain(base, limits=budget.Limits(allow=True, notify=notes.append, what="explain"))
    assert "cannot run" not in text  # ... but --yes lifts it for the run and each what-if
    from tmasim.teach import what_if

    token = what_if.LIMITS.set(budget.Limits(allow=False, what="what-if"))
    try:
        refused = what_if.run_what_if(base, "3 stages", {"pipeline.stages": 3})
    finally:
        what_if.LIMITS.reset(token)
    assert refused.makespan_ps is None and "what-if:" in str(refused.error) and "add --yes" in str(refused.error)
    assert "cannot run" in what_if.what_if_line(23_000_000, refused, "")
