"""Device check for the tmasim numba.cuda backend: ceilings, then a small pipeline sweep.

    python validation/device_check.py OUTDIR            # on an sm_90 GPU, < 5 minutes
    python validation/device_check.py OUTDIR --simulate # the same flow on numba's simulator

Writes into OUTDIR (5 files): measured_tiles.csv (per-tile timestamps),
measured_runs.csv (per-run totals), meta.json (device, clocks, versions, probes,
specs, skipped and failed points), log.txt (everything printed) and summary.txt
(the short table printed last).

Each step runs in its own Python process with a hard timeout: a kernel that
faults leaves the CUDA context unusable, and a variant that fails (to build, to
verify, or in time) must not take the others with it. Order: probes (metadata,
device-to-device copy bandwidth, read bandwidth, %globaltimer granularity), the
three instruction-pipe probes (F2FP.PACK_AB and MUFU.EX2 rates, the SM clock under a
wgmma + MUFU.EX2 load, wgmma with MUFU.EX2 in the same or the other warpgroup; one
process each, under a minute each), then the sweep for the 1-D bulk copy, the
no-TMA baseline, and last the 2-D tensor copy.
Nothing is installed or downloaded; it needs numba-cuda, cuda-bindings, numpy
and pandas, and imports tmasim from this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, TextIO

REPO_ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("tma_bulk_1d", "sync_ld_st", "tma_tensor_2d")  # the tensor copy last: riskiest
TOTAL_BUDGET_S = 280.0  # the whole check, well inside 5 minutes
PROBE_TIMEOUT_S = 90.0
PIPE_PROBES = ("f2fp", "clock_load", "wgmma_exp")  # each under a minute on an H100 or H200
PIPE_TIMEOUT_S = 60.0
MERGE_RESERVE_S = 10.0
WORKER_STARTUP_S = 30.0  # import, CUDA context, data upload, kernel build, last config
MAX_CSV_BYTES = 15 << 20  # files coming back from the device machine are capped at 16 MiB

FULL_SWEEP: dict[str, Any] = dict(
    stages=(1, 2, 3, 4), tile_bytes=(4096, 8192, 16384), compute_iters=(16, 1, 64),
    ctas=(1, "sms", "2sms"), tiles_per_cta=64, consumer_warps=4, instrumented=(True, False),
    warmup=1, repeats=3, tile_rows_ctas=6, tile_rows_repeats=1, timeout_s=2.0)
SIM_SWEEP: dict[str, Any] = dict(
    stages=(1, 2), tile_bytes=(512,), compute_iters=(2,), ctas=(1, "2sms"), tiles_per_cta=4,
    consumer_warps=1, instrumented=(True,), warmup=0, repeats=2, tile_rows_ctas=6,
    tile_rows_repeats=1, timeout_s=30.0)


# ----------------------------------------------------------------------------- workers


def _quiet_numba() -> None:
    """Low-occupancy and host-array warnings would drown the log (1-CTA runs are on purpose)."""
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    warnings.filterwarnings("ignore", message=".*under-utilization.*")
    warnings.filterwarnings("ignore", message=".*Host array used in CUDA kernel.*")


def worker_probe(part_dir: Path, simulate: bool) -> int:
    """Metadata and ceilings: copy and read bandwidth, %globaltimer granularity."""
    from tmasim.gpu import metadata

    out: dict[str, Any] = {"metadata": metadata.collect(simulate)}
    print(f"device: {json.dumps(out['metadata'].get('device'))}", flush=True)
    if not simulate:
        from tmasim.gpu import probes

        sms = int(out["metadata"]["device"]["multiprocessor_count"])
        steps = (("copy_bandwidth", probes.copy_bandwidth, ()),
                 ("read_bandwidth", probes.read_bandwidth, (sms,)),
                 ("globaltimer", probes.timer_resolution, ()),
                 ("sm_clock", probes.sm_clock, ()))
        for name, fn, args in steps:
            try:
                out[name] = fn(*args)
                print(f"{name}: {json.dumps(out[name], default=str)[:400]}", flush=True)
            except Exception as exc:  # keep the other probes
                out[name] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"{name} FAILED: {type(exc).__name__}: {exc}", flush=True)
    (part_dir / "probe.json").write_text(json.dumps(out, indent=2, default=str))
    return 0


def worker_pipes(part_dir: Path, names: list[str], simulate: bool) -> int:
    """Instruction-pipe probes (tmasim.gpu.pipe_probes); each writes pipe_<name>.json."""
    from numba import cuda

    from tmasim.gpu import pipe_probes

    sms = 2 if simulate else int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
    steps = {"f2fp": pipe_probes.conversion_probe, "clock_load": pipe_probes.clock_under_load,
             "wgmma_exp": pipe_probes.wgmma_overlap}
    code = 0
    for name in names:
        t0 = time.monotonic()
        try:
            out = steps[name](sms, simulate=simulate)
        except Exception as exc:  # keep the other probes
            out, code = {"error": f"{type(exc).__name__}: {exc}"[:600]}, 3
        out["wall_s"] = round(time.monotonic() - t0, 2)
        (part_dir / f"pipe_{name}.json").write_text(json.dumps(out, indent=2, default=str))
        print(pipe_line(name, out), flush=True)
    return code


def worker_sweep(part_dir: Path, variant: str, budget_s: float, simulate: bool) -> int:
    """One variant's sweep; its tables and metadata go to part_dir as <variant>_*."""
    from tmasim.gpu.driver import SweepSpec, run_sweep

    fields = dict(SIM_SWEEP if simulate else FULL_SWEEP, variants=(variant,),
                  time_budget_s=budget_s)
    result = run_sweep(SweepSpec(**fields), progress=lambda m: print(m, flush=True))
    result.save(part_dir, prefix=f"{variant}_", meta_name=f"{variant}_meta.json")
    ok = int((result.runs.status == "ok").sum())
    print(f"{variant}: {ok} of {len(result.runs)} runs verified, "
          f"{len(result.skipped)} configurations skipped", flush=True)
    return 0 if ok > 0 and "aborted" not in result.meta else 3


# ----------------------------------------------------------------------------- orchestration


class Log:
    """Print and append to log.txt, line by line, so a killed run still leaves its log."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", encoding="utf-8")

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def run_worker(argv: list[str], timeout_s: float, log: Log, tag: str,
               simulate: bool) -> dict[str, Any]:
    """Run this script as a worker process, streaming its output; kill it at the deadline."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p))
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    cmd = [sys.executable, "-u", str(Path(__file__).resolve()), *argv]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=REPO_ROOT)
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()
    status = _drain(proc, lines, log, tag, t0 + max(timeout_s, 1.0))
    reader.join(timeout=5)
    _flush(lines, log, tag)
    info = {"worker": tag, "rc": proc.returncode, "status": status,
            "elapsed_s": round(time.monotonic() - t0, 1), "timeout_s": round(timeout_s, 1)}
    log(f"== {tag}: {status} (rc={proc.returncode}) after {info['elapsed_s']} s")
    return info


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _drain(proc: subprocess.Popen[str], lines: queue.Queue[str | None], log: Log, tag: str,
           deadline: float) -> str:
    while True:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            line = ""
        if line is None:
            proc.wait()
            return "ok" if proc.returncode == 0 else "failed"
        if line:
            log(f"[{tag}] {line}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            return "killed at its deadline"


def _flush(lines: queue.Queue[str | None], log: Log, tag: str) -> None:
    while not lines.empty():
        line = lines.get_nowait()
        if line:
            log(f"[{tag}] {line}")


def merge_parts(part_dir: Path, out_dir: Path, log: Log) -> tuple[Any, Any, dict[str, Any]]:
    """Concatenate the variants' tables with globally unique run ids; collect their meta."""
    import pandas as pd

    tiles, runs, metas, offset = [], [], {}, 0
    for variant in VARIANTS:
        try:
            r = pd.read_csv(part_dir / f"{variant}_runs.csv")
            t = pd.read_csv(part_dir / f"{variant}_tiles.csv")
            metas[variant] = json.loads((part_dir / f"{variant}_meta.json").read_text())
        except Exception as exc:  # worker died before (or while) saving
            metas[variant] = {"error": f"no results ({type(exc).__name__}: {exc})"[:300]}
            log(f"{variant}: {metas[variant]['error']}")
            continue
        r["run_id"] += offset
        t["run_id"] += offset
        offset = int(r["run_id"].max()) + 1 if len(r) else offset
        runs.append(r)
        tiles.append(t)
    runs_df = pd.concat(runs, ignore_index=True) if runs else pd.DataFrame()
    tiles_df = pd.concat(tiles, ignore_index=True) if tiles else pd.DataFrame()
    _write_csv(runs_df, out_dir / "measured_runs.csv", log)
    _write_csv(tiles_df, out_dir / "measured_tiles.csv", log)
    return runs_df, tiles_df, metas


def _write_csv(df: Any, path: Path, log: Log) -> None:
    df.to_csv(path, index=False)
    if path.stat().st_size > MAX_CSV_BYTES:
        gz = path.with_name(path.name + ".gz")
        df.to_csv(gz, index=False, compression="gzip")
        path.unlink()
        log(f"{path.name} exceeded {MAX_CSV_BYTES >> 20} MiB: written gzipped as {gz.name}")


# ----------------------------------------------------------------------------- summary


def summary_text(runs: Any, probe: dict[str, Any], metas: dict[str, Any]) -> str:
    """The short table printed last: device, ceilings, run counts, GB/s by stages."""
    parts = [_device_line(probe), _probe_lines(probe), _pipe_lines(probe),
             _count_lines(runs, metas)]
    if len(runs) and (runs.status == "ok").any():
        parts += _pivot_blocks(runs[runs.status == "ok"])
    return "\n".join(p for p in parts if p)


def pipe_line(name: str, r: dict[str, Any]) -> str:
    """One summary line per pipe probe (its error, if it failed)."""
    label = {"f2fp": "F2FP.PACK_AB", "clock_load": "SM clock, chip-filling load",
             "wgmma_exp": "wgmma + MUFU.EX2"}[name]
    if "error" in r:
        return f"{label}: FAILED {r['error']}"[:300]
    if name == "f2fp":
        return (f"{label}: {r['pack_per_clk_per_sm']:.1f} packs/clk/SM alone, MUFU.EX2 "
                f"{r['exp_per_clk_per_sm']:.1f}/clk/SM alone; mixed 1:2 {r['mixed_pack_per_clk_per_sm']:.1f}"
                f" + {r['mixed_exp_per_clk_per_sm']:.1f}/clk/SM, shared-pipe index "
                f"{r['shared_pipe_index']:.2f} (0 separate pipes, 1 one pipe)")
    if name == "clock_load":
        parts = []
        for key, what in (("wgmma_exp", "wgmma+MUFU"), ("ffma_exp", "FFMA+MUFU")):
            load = r.get(key, {})
            if "mhz" in load:
                m = load["mhz"]
                parts.append(f"{what} {m['median']:.0f} MHz median (min {m['min']:.0f}, "
                             f"max {m['max']:.0f}) over {load['sms']} SMs, {load['load_s']:.1f} s")
            else:
                parts.append(f"{what} FAILED {load.get('error', 'no result')}"[:160])
        return f"{label}: " + "; ".join(parts)
    flop, exp = r["flop_per_clk_per_sm"], r["exp_per_clk_per_sm"]
    return (f"{label}: wgmma {flop['mma_alone']:.0f} FLOP/clk/SM alone (2 warpgroups "
            f"{flop['mma_two_warpgroups']:.0f}), MUFU.EX2 {exp['exp_alone']:.1f}/clk/SM alone; "
            f"same warpgroup: tensor x{r['same_warpgroup_tensor_fraction']:.2f}, index "
            f"{r['same_warpgroup_index']:.2f}; other warpgroup: tensor "
            f"x{r['other_warpgroup_tensor_fraction']:.2f}, index {r['other_warpgroup_index']:.2f}")


def _pipe_lines(probe: dict[str, Any]) -> str:
    pipes = probe.get("pipes", {})
    return "\n".join(pipe_line(n, pipes[n]) for n in PIPE_PROBES if n in pipes)


def _device_line(probe: dict[str, Any]) -> str:
    meta = probe.get("metadata", {})
    dev = meta.get("device", {})
    smi = meta.get("nvidia_smi", {})
    return (f"device: {dev.get('name')} cc={dev.get('compute_capability')} "
            f"SMs={dev.get('multiprocessor_count')} driver={meta.get('driver_version')} "
            f"sm_clock={smi.get('clocks.sm')} max_sm_clock={smi.get('clocks.max.sm')} "
            f"numba-cuda={meta.get('packages', {}).get('numba-cuda')}")


def _probe_lines(probe: dict[str, Any]) -> str:
    copy, read, timer, clock = (probe.get(k, {}) for k in (
        "copy_bandwidth", "read_bandwidth", "globaltimer", "sm_clock"))
    return (f"copy D2D best {copy.get('gbps_best', float('nan')):.0f} GB/s (read+write), "
            f"read kernel best {read.get('gbps_best', float('nan')):.0f} GB/s, "
            f"%globaltimer min step {timer.get('min_step_ns')} ns, "
            f"update period {timer.get('update_period_ns')} ns, "
            f"SM clock under load {clock.get('sm_clock_ghz')} GHz")


def _count_lines(runs: Any, metas: dict[str, Any]) -> str:
    rows = []
    for variant in VARIANTS:
        sub = runs[runs.variant == variant] if len(runs) else runs
        ok = int((sub.status == "ok").sum()) if len(sub) else 0
        meta = metas.get(variant, {})
        note = meta.get("aborted") or meta.get("error") or ""
        rows.append(f"{variant:14s} ok={ok:4d} failed={len(sub) - ok:3d} "
                    f"skipped={len(meta.get('skipped', [])):3d} {note}"[:300])
    return "runs per variant:\n  " + "\n  ".join(rows)


def _pivot_blocks(ok: Any) -> list[str]:
    instr = ok[ok.instrumented.astype(str) == "True"]
    blocks = []
    iters = sorted(instr.compute_iters.unique())
    mid = iters[len(iters) // 2] if iters else None
    for ctas in sorted(instr.ctas.unique()):
        sel = instr[(instr.ctas == ctas) & (instr.compute_iters == mid)]
        if len(sel):
            table = sel.pivot_table(index=["variant", "tile_bytes"], columns="stages",
                                    values="gbps", aggfunc="median")
            blocks.append(f"GB/s (median of repeats), ctas={ctas}, compute_iters={mid}:\n"
                          + table.round(1).to_string())
    blocks.append(_overhead_line(ok))
    return blocks


def _overhead_line(ok: Any) -> str:
    keys = ["variant", "stages", "tile_bytes", "compute_iters", "ctas"]
    med = ok.groupby(keys + ["instrumented"]).kernel_ns.median().unstack("instrumented")
    med.columns = [str(c) for c in med.columns]
    if not {"True", "False"} <= set(med.columns):
        return "instrumentation overhead: not measured"
    ratio = (med["True"] / med["False"]).dropna()
    return (f"instrumentation overhead (kernel time with / without timestamps): median "
            f"{ratio.median():.3f}, max {ratio.max():.3f} over {len(ratio)} configurations")


# ----------------------------------------------------------------------------- main


def orchestrate(out_dir: Path, simulate: bool, budget_s: float) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    log = Log(out_dir / "log.txt")
    t_start = time.monotonic()
    deadline = t_start + budget_s
    part_dir = Path(tempfile.mkdtemp(prefix="tmasim_device_check_"))
    log(f"tmasim device check: out={out_dir} simulate={simulate} budget={budget_s:.0f} s "
        f"python={sys.version.split()[0]}")
    workers = [run_worker(["--worker", "probe", "--part-dir", str(part_dir)]
                          + (["--simulate"] if simulate else []),
                          min(PROBE_TIMEOUT_S, budget_s / 3), log, "probe", simulate)]
    # one process per pipe probe on a GPU (a faulting kernel loses only its probe);
    # the simulator runs them in one (its kernels cannot fault the device)
    groups = [list(PIPE_PROBES)] if simulate else [[n] for n in PIPE_PROBES]
    for names in groups:
        workers.append(run_worker(
            ["--worker", "pipes", "--pipes", ",".join(names), "--part-dir", str(part_dir)]
            + (["--simulate"] if simulate else []),
            PIPE_TIMEOUT_S * len(names), log, "pipes:" + ",".join(names), simulate))
    for i, variant in enumerate(VARIANTS):
        slot = (deadline - MERGE_RESERVE_S - time.monotonic()) / (len(VARIANTS) - i)
        workers.append(run_worker(
            ["--worker", "sweep", "--variant", variant, "--part-dir", str(part_dir),
             "--budget-s", f"{max(slot - WORKER_STARTUP_S, 0.0):.1f}"]
            + (["--simulate"] if simulate else []), slot, log, variant, simulate))
    code = finish(out_dir, part_dir, workers, log, time.monotonic() - t_start)
    shutil.rmtree(part_dir, ignore_errors=True)
    log.close()
    return code


def read_pipes(part_dir: Path) -> dict[str, Any]:
    """The pipe probes' results; a probe whose worker died before writing gets an error."""
    pipes = {}
    for name in PIPE_PROBES:
        try:
            pipes[name] = json.loads((part_dir / f"pipe_{name}.json").read_text())
        except Exception as exc:
            pipes[name] = {"error": f"no result ({type(exc).__name__})"}
    return pipes


def finish(out_dir: Path, part_dir: Path, workers: list[dict[str, Any]], log: Log,
           elapsed_s: float) -> int:
    try:
        probe = json.loads((part_dir / "probe.json").read_text())
    except Exception as exc:  # the probe worker died
        probe = {"error": f"{type(exc).__name__}: {exc}"}
    probe["pipes"] = read_pipes(part_dir)
    runs, tiles, metas = merge_parts(part_dir, out_dir, log)
    meta = {"device_check": {"workers": workers, "elapsed_s": round(elapsed_s, 1),
                             "argv": sys.argv[1:]}, "probe": probe, "sweeps": metas,
            # the rows written (a .gz copy counts as its CSV): tmasim refuses a copy cut at a row boundary
            "rows": {"measured_runs.csv": len(runs), "measured_tiles.csv": len(tiles)}}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    text = summary_text(runs, probe, metas)
    (out_dir / "summary.txt").write_text(text + "\n")
    n_ok = int((runs.status == "ok").sum()) if len(runs) else 0
    all_fine = all(w["status"] == "ok" for w in workers)
    verdict = "PASS" if all_fine and n_ok else ("PARTIAL" if n_ok else "FAIL")
    log(text)
    log(f"DEVICE CHECK {verdict}: {n_ok} verified runs in {elapsed_s:.0f} s; files in {out_dir}")
    return {"PASS": 0, "PARTIAL": 1, "FAIL": 2}[verdict]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", type=Path, help="folder for the result files")
    ap.add_argument("--simulate", action="store_true",
                    help="run on numba's CUDA simulator with tiny sizes (no GPU needed)")
    ap.add_argument("--budget-s", type=float, default=TOTAL_BUDGET_S,
                    help="wall-clock budget for the whole check (a worker: for its sweep)")
    ap.add_argument("--worker", choices=("probe", "pipes", "sweep"), help=argparse.SUPPRESS)
    ap.add_argument("--pipes", default="", help=argparse.SUPPRESS)
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--part-dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        sys.path.insert(0, str(REPO_ROOT))
        _quiet_numba()
        if args.worker == "probe":
            return worker_probe(args.part_dir, args.simulate)
        if args.worker == "pipes":
            return worker_pipes(args.part_dir, [n for n in args.pipes.split(",") if n],
                                args.simulate)
        return worker_sweep(args.part_dir, args.variant, args.budget_s, args.simulate)
    if args.out_dir is None:
        ap.error("OUTDIR is required")
    return orchestrate(args.out_dir, args.simulate, args.budget_s)


if __name__ == "__main__":
    sys.exit(main())
