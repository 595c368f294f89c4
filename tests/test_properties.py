"""Layer 2: properties over random pipelines (hypothesis), and same seed -> same result."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tmasim_helpers import costly_gpu, ps, run

from tmasim import analytic

times = st.integers(min_value=1, max_value=5_000_000)


@st.composite
def pipelines(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 24))
    return {
        "n": n,
        "load": draw(st.lists(times, min_size=n, max_size=n)),
        "compute": draw(st.lists(times, min_size=n, max_size=n)),
        "latency": draw(st.lists(st.integers(0, 8_000_000), min_size=n, max_size=n)),
        "stages": draw(st.integers(1, 6)),
        "issue": draw(st.integers(0, 30_000)),
        "wake": draw(st.integers(0, 60_000)),
    }


def _run(p, stages=None):  # type: ignore[no-untyped-def]
    return run(tiles=p["n"], stages=stages or p["stages"], load=[ps(v) for v in p["load"]],
               compute=[ps(v) for v in p["compute"]], latency=[ps(v) for v in p["latency"]],
               gpu=costly_gpu(p["issue"], p["wake"]))


@settings(max_examples=60, deadline=None)
@given(pipelines())
def test_never_faster_than_any_bound(p):
    result = _run(p)
    t = result.makespan_ps
    assert t >= sum(p["compute"])                              # the tensor core is serial
    assert t >= sum(p["load"])                                 # so is the copy engine
    assert t >= max(lat + ld + c for lat, ld, c in zip(p["latency"], p["load"], p["compute"], strict=True))
    assert t <= analytic.serial_time(p["load"], p["compute"], p["latency"], p["issue"], p["wake"])


@settings(max_examples=40, deadline=None)
@given(pipelines())
def test_more_stages_never_slower(p):
    times_by_stage = [_run(p, stages).makespan_ps for stages in range(1, 6)]
    assert times_by_stage == sorted(times_by_stage, reverse=True)


@settings(max_examples=40, deadline=None)
@given(pipelines())
def test_bytes_are_conserved_and_no_compute_starts_before_its_data_lands(p):
    result = _run(p)
    spans = result.spans
    transfers = spans[spans["kind"] == "transfer"].set_index("tile")
    computes = spans[spans["kind"] == "compute"].set_index("tile")
    assert transfers["bytes"].sum() == result.stats["bytes"] == 16384 * p["n"]
    assert (computes["start_ps"] >= transfers["end_ps"] + p["wake"]).all()
    assert result.stats["races"] == 0


def test_same_seed_same_result_and_another_seed_another():
    jitter = {"dist": "normal", "mean": "3 us", "std": "0.6 us"}
    compute = {"dist": "lognormal", "mean": "5 us", "std": "1 us"}
    a = run(tiles=50, load=jitter, compute=compute, seed=7)
    b = run(tiles=50, load=jitter, compute=compute, seed=7)
    c = run(tiles=50, load=jitter, compute=compute, seed=8)
    assert a.stats == b.stats
    assert a.spans.equals(b.spans)
    assert a.makespan_ps != c.makespan_ps


def test_each_random_source_has_its_own_stream():
    """Making compute random must not change the load draws (one stream per source)."""
    jitter = {"dist": "uniform", "low": "2 us", "high": "4 us"}
    a = run(tiles=20, load=jitter, compute="5 us", seed=3)
    b = run(tiles=20, load=jitter, compute={"dist": "exponential", "mean": "5 us"}, seed=3)
    loads = [r.spans[r.spans["kind"] == "transfer"].sort_values("tile")["duration_ps"].tolist() for r in (a, b)]
    assert loads[0] == loads[1]
    assert all(2_000_000 <= v <= 4_000_000 for v in loads[0])
