"""The run header is made from the effective scenario and never contradicts it."""

from __future__ import annotations

import re

import pytest

from tmasim import scenario as scenarios
from tmasim.simulation import simulate
from tmasim.summary import Change, describe, header

OVERRIDES = ((), ("pipeline.stages=1",), ("pipeline.stages=3", "run.seed=7"), ("pipeline.stages=2",))


@pytest.mark.parametrize("name", scenarios.bundled_names())
@pytest.mark.parametrize("overrides", OVERRIDES, ids=lambda o: " ".join(o) or "as-is")
def test_header_follows_the_effective_scenario(name, overrides):
    s = scenarios.load(name, overrides)
    lines = header(s, unicode=True)
    stages = s.pipeline.stages
    assert f", {stages} stage{'' if stages == 1 else 's'}" in lines[0]
    assert s.gpu.name in lines[0]
    changed = [line for line in lines if line.startswith("  changed: ")]
    differs = scenarios.load(name).to_dict() != s.to_dict()
    assert bool(changed) == differs
    if f"pipeline.stages={stages}" in overrides and scenarios.load(name).pipeline.stages != stages:
        assert re.search(rf"pipeline\.stages (\d+|\(default\)) → {stages}\b", changed[0])
    for line in lines:  # only the labelled line may repeat the file's own words
        if s.description and s.description in line and differs:
            assert line.startswith("  the file's description, before these changes: ")
        mentioned = {int(n) for n in re.findall(r"\b(\d+) stages?\b", line)}
        if not line.startswith("  the file's description") and not line.startswith("  changed"):
            assert mentioned <= {stages}, line


def test_gemm_header_shows_the_overridden_k():
    lines = header(scenarios.load("gemm-h100", ["workload.k=512"]), unicode=True)
    assert lines[0].startswith("gemm-h100: 8192x8192x512 bf16 GEMM, tile 128x256x64, 4 stages")
    assert lines[1] == "  changed: workload.k 8192 → 512"
    assert lines[2].startswith("  the file's description, before these changes: 8192^3")


def test_preset_overrides_name_the_preset_value_in_its_unit(tmp_path):
    s = scenarios.load("gemm-h100", ['gpu.copy_latency="624 cycles"'])
    assert "  changed: gpu.copy_latency 319 cycles → 624 cycles" in header(s, unicode=True)
    path = tmp_path / "mine.toml"
    path.write_text('name = "mine"\ngpu = {preset = "h100-sxm", barrier_wake = "60 cycles"}\n'
                    '[workload]\nkind = "tiles"\ntiles = 2\nload = "1 us"\ncompute = "1 us"\n')
    lines = header(scenarios.load(path), unicode=True)
    assert "  GPU preset overridden by the file: gpu.barrier_wake 40 cycles → 60 cycles" in lines
    assert not any(line.startswith("  changed") for line in lines)


def test_change_text():
    assert Change("pipeline.consumers", None, 2, "set").text(unicode=False) == "pipeline.consumers (default) -> 2"
    assert Change("workload.tile", [128, 256, 64], [128, 128, 64], "set").text(True) == \
        "workload.tile [128, 256, 64] → [128, 128, 64]"
    assert Change("workload.load", "3 us", "4 ns", "set").text(True) == "workload.load 3 µs → 4 ns"
    assert Change("workload.load", "3 us", "1 s", "set").text(True) == "workload.load 3 µs → 1 s"
    assert Change("workload.load", "3 us", "7 us", "set").text(True) == "workload.load 3 µs → 7 µs"
    assert Change("workload.load", "3us", "4 us", "set").text(False) == "workload.load 3 us -> 4 us"
    assert Change("gpu.hbm_bandwidth", "3.35 TB/s", "unlimited", "file").text(True) == \
        "gpu.hbm_bandwidth 3.35 TB/s → unlimited"
    assert Change("gpu.l2_size", "50 MiB", "512 KiB", "set").text(True) == "gpu.l2_size 50 MiB → 512 KiB"


def test_changed_line_keeps_the_unit_of_the_old_value():
    lines = header(scenarios.load("reference", ["workload.load=4 us"]), unicode=True)
    assert lines[1] == "  changed: workload.load 3 µs → 4 µs"


def test_changed_table_is_shown_as_the_tables_it_was_and_is():
    lines = header(scenarios.load("lessons/05-residency", ["pipeline.registers={}"]), unicode=True)
    assert lines[1] == "  changed: pipeline.registers {producer = 40, consumer = 104} → {}"
    lines = header(scenarios.load("lessons/05-residency", ["pipeline.registers.producer=24"]), unicode=True)
    assert lines[1] == "  changed: pipeline.registers {producer = 40, consumer = 104} → {producer = 24, consumer = 104}"


def test_preset_override_in_cycles_is_also_given_as_a_time_at_the_clock():
    line = header(scenarios.load("mma-b200"), unicode=True)[1]
    assert "gpu.copy_latency 240 ns → 0 ns" in line  # the preset's value as written, in the same unit
    assert "gpu.tma_request_time 778.6 ps (1.53 cycles) → 0 ps" in line  # 1.53 / 1.965 GHz
    assert "gpu.tma_issue 45.802 ns → 0 ns" in line  # given in ns: no cycles to add
    assert "gpu.barrier_wake 20.36 ns (40 cycles) → 0 ns" in line


def test_latency_binding_says_what_it_means():
    s = scenarios.load("reference", ["pipeline.stages=1"])
    text = describe(simulate(s).stats, s)
    assert "binding: round trip" in text
    assert "binding: latency" not in text
    assert "2 stages" not in text.split("the file's description")[0]


def test_share_of_peak_is_against_the_peak_of_the_sms_the_run_uses():
    from tmasim import format as fmt

    # one CTA on one of 148 SMs, timed in-kernel as the UMMA benchmark is: no launch, no epilogue
    one = scenarios.load("mma-b200", ["gpu.launch_overhead=0 us", "gpu.epilogue_subtile_time=0 ns"])
    stats = simulate(one).stats
    peak = one.gpu.tensor_flops["bf16"] * 1e12 / 148
    assert stats["achieved_flops_per_s"] / peak > 0.99  # the UMMA benchmark reaches one SM's peak
    assert (f"{fmt.percent(stats['achieved_flops_per_s'] / peak)} of the {fmt.flop_rate(peak)} bf16 peak of the "
            "1 SM it uses, of 148)") in describe(stats, one)
    full = scenarios.load("gemm-h100", ["workload.m=4096", "workload.n=4096", "workload.k=512", "run.records=false"])
    stats = simulate(full).stats
    share = fmt.percent(stats["achieved_flops_per_s"] / (full.gpu.tensor_flops["bf16"] * 1e12))
    assert f"{share} of the 989.4 TFLOP/s bf16 peak of all 132 SMs)" in describe(stats, full)


def test_the_summary_says_what_the_launch_adds_where_the_preset_has_a_cost():
    b200 = simulate(scenarios.load("gemm-b200", ["workload.m=1024", "workload.n=1024", "workload.k=1024"]))
    text = describe(b200.stats, b200.scenario)
    # 6.5 us, and 10 ns for each of the 31 SMs its 32 tiles use after the first
    assert b200.stats["sms_used"] == 32 and b200.stats["launch_overhead_ns"] == 6500 + 31 * 10
    assert "  launch           6.81 µs of the predicted time is the kernel's launch, prologue and end" in text
    h100 = simulate(scenarios.load("gemm-h100", ["workload.m=1024", "workload.n=1024", "workload.k=1024"]))
    assert "  launch " not in describe(h100.stats, h100.scenario)


def test_the_bound_row_says_how_close_the_work_comes_without_the_launch():
    b200 = simulate(scenarios.load("gemm-b200", ["workload.m=1024", "workload.n=1024", "workload.k=1024"]))
    s = b200.stats
    bound = next(line for line in describe(s, b200.scenario).splitlines() if line.startswith("  bound "))
    work = s["bound_ns"] / (s["makespan_ns"] - s["launch_overhead_ns"])
    assert work > s["efficiency"]  # the launch is time no bound counts
    assert bound.endswith(f"of it; {round(100 * work)}% without the launch's 6.81 µs)")
    h100 = simulate(scenarios.load("gemm-h100", ["workload.m=1024", "workload.n=1024", "workload.k=1024"]))
    h100_bound = next(line for line in describe(h100.stats, h100.scenario).splitlines() if line.startswith("  bound "))
    assert h100_bound.endswith("of it)")  # no launch cost on the H100 preset
