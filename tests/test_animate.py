"""The pipeline animation: frame times, the state at a time, and the files it writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tmasim import cli
from tmasim.errors import TmasimError
from tmasim.review import animate as anim
from tmasim.scenario import load
from tmasim.simulation import simulate

US = 10**6


@pytest.fixture(scope="module")
def reference():
    return simulate(load("reference"))


def test_frames_cover_every_change_within_the_limit(reference):
    line = anim.Timeline.of(reference)
    frames = anim.frame_times(line.changes(), line.end)
    times = [f.time for f in frames]
    assert times == sorted(times) and times[0] == 0 and times[-1] == 23 * US
    assert set(line.changes()) <= set(times)
    assert len(frames) <= anim.MAX_FRAMES and not any(f.compressed for f in frames)


def test_quiet_stretches_are_compressed_and_said_so():
    # a change every 1 us for 200 us, then nothing until 1000 us: the quiet stretch is capped
    frames = anim.frame_times([k * US for k in range(200)], 1000 * US, target=100, limit=120)
    assert len(frames) <= 120
    quiet = [f for f in frames if f.time > 200 * US]
    assert quiet and all(f.compressed for f in quiet[1:-1]) and len(quiet) < 10
    many = anim.frame_times(list(range(0, 10**6, 10)), 10**6)
    assert len(many) == anim.MAX_FRAMES and many[-1].time == 10**6


def test_state_at_a_time(reference):
    line = anim.Timeline.of(reference)
    fills = [sorted(line.active("slot", ("fill",), s) + line.ready(s)) for s in line.stages]
    uses = [line.active("slot", ("use",), s) for s in line.stages]
    # at 4 us tile 0 is computed in slot 0 while tile 1's copy is in flight into slot 1
    assert anim.slot_state(fills[0], uses[0], 4 * US) == ("computing", "tile 0")
    assert anim.slot_state(fills[1], uses[1], 4 * US) == ("in flight", "tile 1")
    # at 7 us tile 1 has landed (6 us) and waits for the tensor core (free at 8 us)
    assert anim.slot_state(fills[1], uses[1], 7 * US) == ("full", "tile 1, waiting")
    assert line.flips("flip_full", 0) == [3 * US, 11 * US]


def test_race_is_shown(tmp_path: Path):
    racy = simulate(load("bug-missing-wait"))
    line = anim.Timeline.of(racy)
    state, _ = anim.slot_state(line.active("slot", ("fill",), 0), line.active("slot", ("use",), 0), US)
    assert state == "RACE"


def test_gif_and_html(reference, tmp_path: Path):
    from PIL import Image

    gif = anim.animate(reference, tmp_path / "ref.gif", target=12)
    with Image.open(gif) as image:
        assert image.size == (1280, 720) and 10 <= image.n_frames <= 20
    html = anim.animate(reference, tmp_path / "ref.html", target=6).read_text()
    assert html.count("data:image/png;base64,") >= 6 and 'type="range"' in html
    assert "http://" not in html and "https://" not in html


def test_bad_outputs_are_one_line_errors(reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    with pytest.raises(TmasimError, match="must end in .gif, .mp4 or .html"):
        anim.animate(reference, tmp_path / "x.avi")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(TmasimError, match="needs ffmpeg"):
        anim.animate(reference, tmp_path / "x.mp4")
    assert cli.main(["animate", "gemm-h100", "--out", str(tmp_path / "g.gif")]) == 2
    assert "run.records = false" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_hand_over_is_not_a_race(reference):
    line = anim.Timeline.of(reference)
    fills = [sorted(line.active("slot", ("fill",), s) + line.ready(s)) for s in line.stages]
    uses = [line.active("slot", ("use",), s) for s in line.stages]
    # at 13 us slot 1 is released (tile 1 done) and refilled (tile 3 issued) in the same instant
    assert anim.slot_state(fills[1], uses[1], 13 * US) == ("in flight", "tile 3")
    for t in line.changes():
        assert all(anim.slot_state(f, u, t)[0] != "RACE" for f, u in zip(fills, uses, strict=True))


def test_a_deadlock_is_animated_up_to_where_it_stuck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.setattr(anim, "TARGET_FRAMES", 8)
    assert cli.main(["animate", "bug-arrival-count", "--out", str(tmp_path / "stuck.gif")]) == 3
    err = capsys.readouterr().err
    assert "wrote" in err and "deadlock at 13 µs" in err
    assert (tmp_path / "stuck.gif").stat().st_size > 10_000


def _stuck(tmp_path: Path):
    """The lesson-7 deadlock (empty barriers expect 2 arrivals, 1 comes) as a partial result."""
    from tmasim.errors import DeadlockError
    from tmasim.results import Result

    scenario = load("lessons/07-sync", ["pipeline.empty_arrivals=2"])
    with pytest.raises(DeadlockError) as info:
        simulate(scenario)
    return Result(scenario, {"scenario": scenario.name, "stages": 2}, [], info.value.records)


def test_a_deadlock_records_the_waits_still_open(tmp_path: Path):
    """Producer on empty[0] since it issued its two copies (time 0), consumer on full[0] from
    13 µs (after computing tiles 0 and 1): both recorded up to the stop, with a stuck event each."""
    result = _stuck(tmp_path)
    stuck = result.events[result.events["kind"] == "stuck"]
    assert sorted(stuck["name"]) == ["sm0.cta0.empty[0]", "sm0.cta0.full[0]"]
    assert set(stuck["time_ps"]) == {13 * US}
    waits = result.spans[result.spans["kind"].isin(["wait_empty", "wait_full"]) & (result.spans["end_ps"] == 13 * US)]
    assert sorted(zip(waits["kind"], waits["start_ps"], waits["stage"], strict=True)) == [
        ("wait_empty", 0, 0), ("wait_full", 13 * US, 0)]


def test_a_deadlock_animation_says_who_waits_and_what_was_never_released(tmp_path: Path):
    result = _stuck(tmp_path)
    line = anim.Timeline.of(result)
    assert line.stuck() == [(13 * US, "producer", "empty[0]"), (13 * US, "consumer", "full[0]")]
    assert line.held(0) == [(8 * US, float("inf"), "held", 0)]      # computed 3-8 µs, empty[0] never flipped
    assert line.held(1) == [(13 * US, float("inf"), "held", 1)]
    fills, uses = line.active("slot", ("fill",), 0), line.active("slot", ("use",), 0)
    assert anim.slot_state(fills, uses, 10 * US, line.held(0)) == ("held", "tile 0 computed,\nnever released")
    assert anim.slot_state(fills, uses, 5 * US, line.held(0))[0] == "computing"
    movie = anim._Movie(line, "stuck")
    try:
        movie.update(anim.Frame(13 * US, False))
        assert movie.note.get_text() == "stopped: producer waits on empty[0]; consumer waits on full[0]"
        assert movie.labels[1].get_text() == "tile 0 computed,\nnever released"
        movie.update(anim.Frame(2 * US, False))
        assert movie.note.get_text() == ""
    finally:
        movie.close()


def test_a_finished_run_holds_no_slot(reference):
    line = anim.Timeline.of(reference)
    assert line.stuck() == [] and all(line.held(s) == [] for s in line.stages)


def test_the_html_player_is_titled_by_the_scenario(reference, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(anim, "TARGET_FRAMES", 4)
    page = anim.animate(reference, tmp_path / "x.html").read_text(encoding="utf-8")
    assert "<title>tmasim animate: reference: 2 stages, 23 µs</title>" in page
