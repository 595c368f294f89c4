"""``tmasim.triton.prune``: Triton matmul configs mapped to GEMM scenarios, simulated, and pruned to
those within a tolerance of the best; configs that cannot run are dropped with the reason. Triton
is not imported: a config is a small dataclass with triton.Config's attributes."""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tmasim import triton as tt
from tmasim.errors import ScenarioError, TmasimError

BIG = {"M": 8192, "N": 8192, "K": 8192}
SMALL = {"M": 1024, "N": 1024, "K": 1024}


@dataclass
class Config:
    """What triton.Config carries that the pruner reads."""

    kwargs: dict[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1


def cfg(bm: int, bn: int, bk: int = 64, **rest: Any) -> Config:
    return Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, **rest)


@pytest.fixture(scope="module")
def big_prune() -> tuple[list[Config], list[Config], list[tt.Verdict]]:
    configs = [cfg(bm, bn, num_warps=8, num_stages=s)
               for bm, bn, s in itertools.product((64, 128, 256), (128, 256), (2, 3, 4, 5))]
    report: list[tt.Verdict] = []
    kept = tt.prune(configs, BIG, gpu="h100-sxm", dtype="bf16", report=report)
    return configs, kept, report


def test_8192_cubed_keeps_the_fastest_and_those_within_5_percent(big_prune):
    configs, kept, report = big_prune
    assert [v.config for v in report] == configs  # one verdict per config, in order
    times = {id(v.config): v.predicted_ms for v in report if v.predicted_ms is not None}
    best = min(times.values())
    fastest = [c for c in configs if times.get(id(c)) == best]
    assert fastest and all(c in kept for c in fastest)
    assert kept == [c for c in configs if id(c) in times and times[id(c)] <= best * 1.05]  # in the given order
    assert 0 < len(kept) < len(configs)
    for verdict in report:
        if verdict.predicted_ms is not None and not verdict.kept:
            assert verdict.predicted_ms > best * 1.05 and "over the 5% tolerance" in verdict.reason


def test_8192_cubed_the_big_tile_wins_over_64_rows(big_prune):
    _, kept, report = big_prune
    by_block = {(v.config.kwargs["BLOCK_M"], v.config.kwargs["BLOCK_N"], v.config.num_stages): v for v in report}
    assert all(c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] >= 128 * 256 for c in kept)
    assert by_block[(64, 128, 3)].predicted_ms > 1.5 * by_block[(128, 256, 4)].predicted_ms


def test_8192_cubed_drops_what_cannot_fit_with_the_reason(big_prune):
    _, _, report = big_prune
    by_block = {(v.config.kwargs["BLOCK_M"], v.config.kwargs["BLOCK_N"], v.config.num_stages): v for v in report}
    smem = by_block[(128, 256, 5)]  # 5 stages x 48 KiB + the epilogue: over 227 KiB
    assert not smem.kept and smem.predicted_ms is None
    assert smem.reason.startswith("cannot run: pipeline.stages: 5 needs 256.1 KiB of shared memory")
    for stages in (2, 3, 4, 5):  # a 256x256 fp32 accumulator over 2 warpgroups: 256 registers a thread + 32
        regs = by_block[(256, 256, stages)]
        assert not regs.kept and "needs 288 registers per consumer thread" in regs.reason
    assert by_block[(128, 256, 4)].kept and by_block[(128, 256, 4)].settings["pipeline.stages"] == 4


def test_settings_map_blocks_warps_stages_and_group():
    config = Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 4},
                    num_warps=8, num_stages=4)
    assert tt.settings(config) == {"workload.tile": [128, 256, 64], "pipeline.stages": 4, "pipeline.consumers": 2,
                                   "pipeline.consumer_mode": "cooperative", "pipeline.cluster": [1, 1],
                                   "pipeline.warp_specialized": True, "workload.group": 4}


@pytest.mark.parametrize(("warps", "consumers"), [(1, 1), (2, 1), (4, 1), (8, 2), (12, 3), (16, 4)])
def test_num_warps_are_consumer_warpgroups(warps: int, consumers: int):
    assert tt.settings(cfg(128, 128, num_warps=warps))["pipeline.consumers"] == consumers


def test_without_warp_specialization_the_consumers_issue_copies():
    target = tt.Target(warp_specialize=False)
    assert tt.settings(cfg(128, 128), target)["pipeline.warp_specialized"] is False


@pytest.mark.parametrize(("block", "ctas", "split"), [
    ((128, 256), 1, (1, 1)),
    ((256, 128), 2, (2, 1)),  # 128-row chunks along M first
    ((128, 256), 2, (1, 2)),  # one 128-row chunk: the other CTA along N
    ((128, 64), 2, (2, 1)),  # N / 2 = 32 < 64: 64-row chunks along M
    ((256, 256), 4, (2, 2)),
    ((64, 64), 4, (1, 4)),  # nothing legal: PlanCTA keeps its last try
])
def test_num_ctas_split_the_block_as_triton_plans_ctas(block: tuple[int, int], ctas: int, split: tuple[int, int]):
    assert tt.cta_split(*block, ctas) == split


def test_num_ctas_is_the_cluster_and_each_cta_takes_its_share():
    fields = tt.settings(cfg(256, 128, num_ctas=2))
    assert fields["workload.tile"] == [128, 128, 64] and fields["pipeline.cluster"] == [2, 1]


def test_tolerance_zero_keeps_only_the_best_and_a_wide_one_keeps_all_that_run():
    configs = [cfg(128, 128, num_warps=8, num_stages=4), cfg(64, 64, num_stages=2), cfg(256, 256, num_warps=4)]
    report: list[tt.Verdict] = []
    assert tt.prune(configs, SMALL, tolerance=0.0, report=report) == [configs[0]]
    assert report[0].reason.endswith("the fastest") and report[2].reason.startswith("cannot run: workload.tile")
    assert tt.prune(configs, SMALL, tolerance=9.0) == configs[:2]


def test_the_problem_may_come_as_a_keyword_and_a_cache_is_reused(monkeypatch: pytest.MonkeyPatch):
    configs = [cfg(128, 128, num_warps=8), cfg(128, 128, num_warps=8), cfg(64, 128)]
    cache: dict[Any, float | str] = {}
    first = tt.prune(configs, {"M": 1024, "N": 1024}, cache=cache, K=1024, a_ptr=object())
    assert len(cache) == 2  # the two equal configs simulated once
    monkeypatch.setattr(tt, "_simulate", lambda raw: pytest.fail("simulated again"))
    assert tt.prune(configs, SMALL, cache=cache) == first


def test_each_verdict_is_logged(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="tmasim.triton"):
        tt.prune([cfg(128, 128, num_warps=8), cfg(64, 64, num_stages=1)], SMALL)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("tmasim.triton.prune: kept BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, num_warps: 8")
    assert messages[1].startswith("tmasim.triton.prune: dropped BLOCK_M: 64") and "slower than the fastest" in \
        messages[1]


@pytest.mark.parametrize(("named", "options", "message"), [
    ({"M": 1024, "N": 1024}, {}, r"named_args\['K'\]: None must be the GEMM's size"),
    ({"M": 1024, "N": 1024, "K": 1.5}, {}, r"named_args\['K'\]: 1.5 must be a whole number"),
    ({"M": 1024, "N": 0, "K": 1024}, {}, r"named_args\['N'\]: 0 must be >= 1"),
    (SMALL, {"gpu": "h100"}, "gpu: 'h100'"),
    (SMALL, {"dtype": "float32"}, "dtype: 'float32' must be one of"),
    (SMALL, {"tolerance": -0.1}, "tolerance: -0.1 must be a number from 0 to 10"),
    (SMALL, {"launch": "stream-k"}, "launch: 'stream-k' must be one of"),
    (SMALL, {"overrides": {"workload.swizle": "64B"}}, "workload.swizle"),
])
def test_errors_every_config_would_share_are_raised_once(named: dict[str, Any], options: dict[str, Any],
                                                         message: str):
    with pytest.raises(ScenarioError, match=message):
        tt.prune([cfg(128, 128)], named, **options)


def test_a_config_without_block_sizes_is_an_error_naming_it():
    with pytest.raises(ScenarioError, match=r"configs\[1\].kwargs: .* lacks BLOCK_K or BLOCK_SIZE_K"):
        tt.prune([cfg(128, 128), Config({"BLOCK_M": 64, "BLOCK_N": 64})], SMALL)


def test_none_that_can_run_is_an_error():
    with pytest.raises(TmasimError, match=r"none of the 2 configs can run \(workload.tile: \[256, 256, 64\]"):
        tt.prune([cfg(256, 256), cfg(256, 256, num_stages=2)], SMALL)


def test_the_guides_example_prints_what_the_guide_shows(tmp_path: Path):
    """docs/guides/from-cutlass.md's runnable example: the python block after the marker comment,
    run as a script; the text block after it is what it prints, line for line."""
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "guides" / "from-cutlass.md").read_text(encoding="utf-8")
    after = page.split("<!-- tests/test_triton_prune.py runs this block", 1)[1]
    script = tmp_path / "example.py"
    script.write_text(after.split("```python\n", 1)[1].split("```\n", 1)[0], encoding="utf-8")
    shown = after.split("```text\n", 1)[1].split("```\n", 1)[0]
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown
