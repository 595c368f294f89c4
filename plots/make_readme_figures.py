"""Regenerate the README's figures into plots/, in about 20 seconds:

    python plots/make_readme_figures.py            # with tmasim installed (pip install -e .)
    PYTHONPATH=. python plots/make_readme_figures.py   # from a checkout, without installing

Each figure comes from a bundled scenario, shrunk where needed so the whole script stays under
a minute; the titles say what ran, and each carries its run's or sweep's validated line in small
print. Look at every PNG after changing a figure function.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tmasim import format as fmt
from tmasim.review import plots
from tmasim.review.plot_cli import table_trust
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.sweep import run_sweep
from tmasim.validation.trust import trust_for_row

HERE = Path(__file__).resolve().parent
# A chip small enough to draw CTA by CTA: 4096 x 4096 x 512 in 128 x 128 x 64 tiles, 3 stages,
# so two CTAs share each SM; every SM simulated on its own (no aggregation into classes).
GEMM_CHIP = ["run.records=true", "run.aggregate=false", "workload.m=4096", "workload.n=4096", "workload.k=512",
             "workload.tile=[128, 128, 64]", "pipeline.stages=3"]


def reference_gantt() -> Path:
    result = simulate(load("reference"))
    title = (f"Reference: 4 tiles, load 3 µs, compute 5 µs, 2 stages: {fmt.time(result.makespan_ps, unicode=True)} "
             f"(serial {fmt.time_ns(result.stats['serial_ns'], unicode=True)})")
    fig = plots.gantt(result.spans, result.events, title=title)
    return plots.save(fig, HERE / "reference-gantt.png", trust=trust_for_row(result.stats))[0]


def latency_hidden_stages() -> Path:
    """The teaching sweep: the round trip binds until about 6 stages hide it, then compute does."""
    table = run_sweep("latency-hidden", [], ["pipeline.stages=1,2,3,4,5,6,7,8,9,10"], progress=False)
    fig = plots.stage_sweep(table, title="latency-hidden: 32 tiles, 6 µs copy latency, load 1 µs, compute 1.5 µs")
    return plots.save(fig, HERE / "latency-hidden-stages.png", trust=table_trust(table))[0]


def latency_hidden_stalls() -> Path:
    table = run_sweep("latency-hidden", [], ["pipeline.stages=1,2,4,6,8"], progress=False)
    fig = plots.stall_breakdown(table, title="latency-hidden: where the time went, by number of stages")
    return plots.save(fig, HERE / "latency-hidden-stalls.png", trust=table_trust(table))[0]


def gemm_stages() -> Path:
    """Two tile shapes over 2..6 stages: shared memory per CTA, CTAs per SM, and what does not fit."""
    table = run_sweep("gemm-h100", [], ["pipeline.stages=2,3,4,5,6", "workload.tile=[128,128,64],[128,256,64]"],
                      progress=False)
    fig = plots.stage_sweep(table, title="gemm-h100: 8192³ bf16 GEMM on H100 SXM, two tile shapes")
    return plots.save(fig, HERE / "gemm-stages.png", trust=table_trust(table))[0]


def stream_stages() -> Path:
    """Little's law: bandwidth grows with bytes in flight (stages x box) until HBM saturates."""
    table = run_sweep("stream-h100", ["workload.shape=[4096, 4096]"],
                      ["pipeline.stages=1,2,3,4,6,8", "workload.box=[32,64],[64,64],[128,64]"], progress=False)
    fig = plots.stage_sweep(table, y="achieved_bytes_per_s",
                            title="stream-h100: bandwidth against stages, per TMA box (32 MiB streamed)")
    return plots.save(fig, HERE / "stream-stages.png", trust=table_trust(table))[0]


def gemm_chip_gantt() -> Path:
    result = simulate(load("gemm-h100", GEMM_CHIP))
    title = f"gemm-h100, 4096×4096×512 in 128×128×64 tiles, 3 stages: {result.stats['ctas']} CTAs, two per SM"
    fig = plots.gantt(result.spans, result.events, title=title, tiles=10, max_ctas=4)
    return plots.save(fig, HERE / "gemm-chip-gantt.png", trust=trust_for_row(result.stats))[0]


def gemm_cluster_gantt() -> Path:
    result = simulate(load("gemm-h100-cluster", ["run.records=true", "run.aggregate=false", "workload.m=1024",
                                                 "workload.n=1024", "workload.k=512", "pipeline.cluster=[2, 2]",
                                                 "workload.multicast=both"]))
    title = "gemm-h100-cluster with 2×2 clusters multicasting A and B: the first cluster's 4 CTAs (first 8 k-steps)"
    fig = plots.gantt(result.spans, result.events, title=title, tiles=8, max_ctas=4)
    return plots.save(fig, HERE / "gemm-cluster-gantt.png", trust=trust_for_row(result.stats))[0]


def stream_bandwidth() -> Path:
    result = simulate(load("stream-h100", ["run.records=true", "workload.shape=[4096, 4096]", "pipeline.stages=2"]),
                      record_bandwidth=True)
    title = ("stream-h100 with 2 stages of 8 KiB: HBM at capacity in bursts, idle between them\n"
             "(too few bytes in flight to keep it busy; each SM's port far from its capacity)")
    fig = plots.bandwidth(result.bandwidth, title=title)
    return plots.save(fig, HERE / "stream-bandwidth.png", trust=trust_for_row(result.stats))[0]


def attention_gantt() -> Path:
    # One head (66 query blocks on 66 SMs, one unit each): the same CTA pipeline as attention-h100.
    result = simulate(load("attention-h100", ["run.records=true", "workload.batch=1", "workload.heads=1"]))
    title = ("attention-h100 (one head of it): ping-pong, each warpgroup's softmax under the other's GEMMs")
    fig = plots.gantt(result.spans, result.events, title=title, tiles=8)
    return plots.save(fig, HERE / "attention-gantt.png", trust=trust_for_row(result.stats))[0]


FIGURES: tuple[Callable[[], Path], ...] = (reference_gantt, latency_hidden_stages, latency_hidden_stalls,
                                           gemm_stages, stream_stages, gemm_chip_gantt, gemm_cluster_gantt,
                                           stream_bandwidth, attention_gantt)


def main() -> None:
    for make in FIGURES:
        print(f"wrote {make().relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
