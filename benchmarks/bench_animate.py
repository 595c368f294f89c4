"""How long the reference animation takes, against one static Gantt chart of the same run.

``tmasim animate reference --out ref.gif`` should take well under 30 s on a 2-core machine. The
animation draws its figure once and then only the artists that move, so its cost should be a
modest multiple of drawing one full figure per frame would be; the baseline is one Gantt PNG of
the same run, timed in the same process.

    PYTHONPATH=. python benchmarks/bench_animate.py [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import checkout  # noqa: F401  (this checkout's tmasim first on sys.path)

from tmasim.review import plots
from tmasim.review.animate import animate
from tmasim.scenario import load
from tmasim.simulation import simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the files here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        result = simulate(load("reference"))
        plots.save(plots.gantt(result.spans, result.events, title="reference"), out / "gantt.png")  # warm-up
        start = time.perf_counter()
        plots.save(plots.gantt(result.spans, result.events, title="reference"), out / "gantt.png")
        one = time.perf_counter() - start
        times = {}
        for suffix in (".gif", ".html"):
            start = time.perf_counter()
            path = animate(result, out / f"reference{suffix}")
            times[suffix] = time.perf_counter() - start
            print(f"{path.name:<16} {times[suffix]:6.1f} s  {path.stat().st_size / 2**20:5.1f} MiB")
        from PIL import Image

        with Image.open(out / "reference.gif") as gif:
            frames = gif.n_frames
        print(f"one Gantt PNG    {one:6.2f} s")
        print(f"GIF: {frames} frames, {times['.gif'] / frames * 1000:.0f} ms a frame, "
              f"{times['.gif'] / frames / one:.2f} x one full Gantt PNG per frame")


if __name__ == "__main__":
    main()
