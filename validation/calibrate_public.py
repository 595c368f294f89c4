"""Regenerate the public-microbenchmark calibration: per source, the fit, the point table, the
predicted-against-measured figure, and the preset values with their sources.

    python validation/calibrate_public.py                 # every source, about 5 minutes on 2 cores
    python validation/calibrate_public.py h200-l2-bandwidth
    python validation/calibrate_public.py b200-umma-depth   # the MMA pipe's rule, checked, not fitted
    python validation/calibrate_public.py b200-l2-sharing   # implicit L2 sharing: clusters checked, neighbours fitted

Writes validation/public/results/<source>.csv and .png, and results/summary.md (the README's
Validation table); prints each fitted value as a preset line to paste into tmasim/presets/.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "public"
sys.path.insert(0, str(ROOT.parent.parent))

from tmasim.validation import l2_sharing, public, umma_depth  # noqa: E402
from tmasim.validation.figures import _pyplot  # noqa: E402


def figure(source: public.Source, table, path: Path, text: str) -> None:  # noqa: ANN001 (a DataFrame)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    scale, unit = (1e12, "TB/s") if source.predict.endswith("bytes_per_s") else (1.0, "ns")
    if source.measure.startswith("slice_"):  # a sixth of the chip was simulated: show the whole chip
        from tmasim.validation import public_hopper as hopper

        scale /= hopper.H800_SMS / hopper.SLICE_SMS
    rows = table.sort_values(source.x)
    ax.scatter(rows[source.x], rows["predicted"] / scale, marker="x", s=30, color="#4C72B0", zorder=4,
               label="tmasim with the fitted values (every point)")
    for split, marker in (("train", "o"), ("holdout", "s")):
        part = rows[rows["split"] == split]
        ax.scatter(part[source.x], part["measured"] / scale, marker=marker, s=26, zorder=3,
                   facecolors="#DD8452" if split == "train" else "white", edgecolors="#DD8452",
                   label=f"measured, {'fitted' if split == 'train' else 'held out'} ({len(part)})")
    if source.log_x:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(source.x_label)
    chip = " (all SMs)" if source.measure.startswith("slice_") else ""
    ax.set_ylabel(source.y_label or f"{'bandwidth' if unit == 'TB/s' else 'latency'}{chip} ({unit})")
    ax.set_title(f"{source.name}: {text}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def hopper_closed_form_rows() -> list[str]:
    """The Hopper mechanisms fitted in closed form, not by simulation (tmasim/validation/public_hopper.py):
    the remote-SM hop of distributed shared memory and the clock under back-to-back wgmma."""
    import pandas as pd

    from tmasim.validation import public_hopper as hopper

    dsmem = hopper.dsmem_fit(pd.read_csv(ROOT / "h800-pcie" / "dsmem_latency.csv"))
    wgmma = hopper.wgmma_fit(pd.read_csv(ROOT / "h800-pcie" / "wgmma.csv"))
    return [f"| `h800-pcie/dsmem_latency.csv` | h100-sxm, h200 | {dsmem.train} | {dsmem.held_out} | local "
            f"{dsmem.local:.0f} cycles, hop {dsmem.hop:.1f} cycles (cluster_arrive_latency = local + hop = "
            f"{dsmem.arrive:.0f} cycles) | {dsmem.holdout_mape:.1f}% | {dsmem.holdout_mape:.1f}% |",
            f"| `h800-pcie/wgmma.csv` | h100-sxm, h200 | 1 | 2 | II {wgmma.ii_cycles:.0f} cycles (m64n256k16), "
            f"clock under load {wgmma.clock_ghz:.3f} GHz ({wgmma.share_of_nominal:.1%} of 1.755) | "
            f"{wgmma.holdout_mape:.1f}% | {wgmma.holdout_mape:.1f}% |"]


DEPTH_CHECK = "b200-umma-depth"


def depth_check(out: Path) -> None:
    """The MMA pipe's latency + II rule against cycles per MMA by MMAs in flight (no fit)."""
    table = umma_depth.check(ROOT)
    table.to_csv(out / f"{DEPTH_CHECK}.csv", index=False)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    for (group, m), rows in table.groupby(["CTAGroup", "M"]):
        n128 = rows[rows["N"] == 128]
        line = ax.plot(n128["PipelineDepth"], n128["CyclesPerMMA"], "o",
                       label=f"measured, M = {m}, {group} SM(s), N = 128")
        ax.plot(n128["PipelineDepth"], n128["predicted"], "x--", color=line[0].get_color(),
                label=f"tmasim: (latency + (D - 1) x II) / D, M = {m}, {group} SM(s)")
    ax.set_xlabel("independent MMAs in flight D (TS, BF16)")
    ax.set_ylabel("cycles per MMA")
    ax.set_title(f"{DEPTH_CHECK}: MAPE {umma_depth.mape(table):.1f}% over all {len(table)} rows (N = 64-256; "
                 "N = 128 drawn)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(out / f"{DEPTH_CHECK}.png", dpi=120)
    plt.close(fig)
    worst = table.loc[table["error_pct"].abs().idxmax()]
    text = (f"{DEPTH_CHECK}: {len(table)} rows, MAPE {umma_depth.mape(table):.1f}%, worst {worst['error_pct']:+.1f}% "
            f"(D = {worst['PipelineDepth']}, M = {worst['M']}, N = {worst['N']}, {worst['CTAGroup']} SM(s))")
    (out / f"{DEPTH_CHECK}.md").write_text(text + "\n")
    print(text)


SHARING_CHECK = "b200-l2-sharing"


def sharing_check(out: Path) -> None:
    """L2 reads per shared tile by sharing mode and group size, measured and modelled: multicast
    checked (nothing fitted); the merge windows of launch-order neighbours and of a cluster's CTAs
    each fitted on half the tile shapes."""
    table = l2_sharing.check(ROOT)
    merge, inside = table.attrs["l2_merge_bytes"], table.attrs["cluster_l2_merge_bytes"]
    table.to_csv(out / f"{SHARING_CHECK}.csv", index=False)
    summary = l2_sharing.summary(table)
    plt = _pyplot()
    fig, (ax, by_box) = plt.subplots(1, 2, figsize=(12.5, 4.8), layout="constrained")
    _sharing_by_box(by_box, table)
    modes = (("implicit_l2_intra", "o"), ("explicit_mcast", "s"), ("implicit_l2_cross", "^"), ("no_sharing", "D"))
    for k, (mode, marker) in enumerate(modes):
        rows = table[table["mode_name"] == mode]
        line = ax.plot(rows["group"], rows["measured"], marker, alpha=0.35, label=f"measured, {mode} (every tile)")
        model = rows.groupby("group")["predicted"].mean()
        # earlier series larger: where two modes read L2 alike (once a tile), each still shows around the next
        ax.plot(model.index, model.values, marker + "--", color=line[0].get_color(), mfc="none",
                ms=10 + 3 * (len(modes) - 1 - k), mew=1.4, label=f"tmasim, {mode} (mean over tiles)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("CTAs wanting each tile (cluster size, or sharing group in launch order)")
    ax.set_ylabel("L2 reads for the SMs per shared tile (x one CTA's)")
    ax.set_title(f"{SHARING_CHECK}: same-address loads merge in the GPC, a cluster's and neighbours'", fontsize=9)
    fig.suptitle(f"B200 tma2dmcast sweep, L2 reads for the SMs (lts_sectors_tex_read); "
                 f"fitted: l2_merge_bytes {merge // 1024} KiB, cluster_l2_merge_bytes {inside // 1024} KiB",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(out / f"{SHARING_CHECK}.png", dpi=120)
    plt.close(fig)
    lines = [f"fitted on the rows of 23 tile shapes (22 held out, seed 0): l2_merge_bytes {merge // 1024} KiB "
             f"(launch-order rows), cluster_l2_merge_bytes {inside // 1024} KiB (implicit cluster rows)",
             "", "| mode | group | split | rows | measured | tmasim | MAPE | worst |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.mode_name} | {r.group} | {r.split} | {r.rows} | {r.measured:.3f} | {r.predicted:.3f} | "
              f"{r.mape:.1f}% | {r.worst:+.1f}% |" for r in summary.itertuples()]
    (out / f"{SHARING_CHECK}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _sharing_by_box(ax, table) -> None:  # noqa: ANN001 (an Axes, a DataFrame)
    """Launch-order neighbours and clusters by box size: the merge fails more as bytes in flight grow."""
    cases = (("implicit_l2_cross", 32, "#2CA02C"), ("implicit_l2_cross", 16, "#9467BD"),
             ("implicit_l2_cross", 8, "#8C564B"), ("implicit_l2_intra", 4, "#1F77B4"),
             ("implicit_l2_intra", 2, "#17BECF"))
    for k, (mode, group, color) in enumerate(cases):
        rows = table[(table["mode_name"] == mode) & (table["group"] == group)].sort_values("tile_bytes")
        kib = rows["tile_bytes"] / 1024
        held = rows["split"] == "holdout"
        name = f"clusters of {group}" if mode == "implicit_l2_intra" else f"groups of {group} neighbours"
        ax.scatter(kib[~held], rows["measured"][~held], color=color, s=18, zorder=3, label=f"{name}: measured (fitted)")
        if held.any():
            ax.scatter(kib[held], rows["measured"][held], facecolors="white", edgecolors=color, s=18, zorder=3,
                       label=f"{name}: measured (held out)")
        model = rows.groupby("tile_bytes")["predicted"].mean()
        # earlier lines wider: clusters of 4 and of 2 both read about once for small boxes
        ax.plot(model.index / 1024, model.values, "-", color=color, lw=1.2 + 0.6 * (len(cases) - 1 - k),
                zorder=1, label=f"{name}: tmasim")  # under the measured points
    ax.set_xlabel("box (tile) bytes, KiB (4 boxes in flight per CTA)")
    ax.set_ylabel("L2 reads for the SMs per shared tile (x one CTA's)")
    ax.set_title("by box size: bigger boxes, more bytes in flight, fewer merges", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)


CHECKS = {DEPTH_CHECK: depth_check, SHARING_CHECK: sharing_check}


def main(names: list[str]) -> None:
    out = ROOT / "results"
    for check, run in CHECKS.items():
        if not names or check in names:
            run(out)
    if names and all(n in CHECKS for n in names):
        return
    names = [n for n in names if n not in CHECKS]
    work = Path(tempfile.mkdtemp(prefix="tmasim-public-"))  # the derived point tables, not kept
    lines = ["| source | GPU | rows fitted | rows held out | fitted | held-out MAPE | shipped preset's MAPE |",
             "|---|---|---|---|---|---|---|"]
    for name in names or list(public.SOURCES):
        source = public.SOURCES[name]
        cal = public.run(source, ROOT, work, overrides=source.start)
        print(cal.text())
        table = public.points_table(source, ROOT, cal)
        table.to_csv(out / f"{name}.csv", index=False)
        counts = table["split"].value_counts()
        fitted = ", ".join(f"{p.name} {p.show(cal.fitted[p.name])}" for p in cal.parameters)
        shipped = cal.split_mape("holdout", "start_error_pct")
        if source.start:  # the fit started elsewhere: the shipped preset's error, on the same split
            check = public.run(source, ROOT, work, fit=source.fit[:1], max_evals=3)
            shipped = check.split_mape("holdout", "start_error_pct")
        figure(source, table, out / f"{name}.png",
               f"held-out MAPE {cal.holdout_mape:.1f}% ({counts.get('holdout', 0)} of {len(table)} points)")
        lines.append(f"| `{source.table}` | {source.gpu} | {counts.get('train', 0)} | {counts.get('holdout', 0)} | "
                     f"{fitted} | {cal.holdout_mape:.1f}% | {shipped:.1f}% |")
        for p in cal.parameters:
            print(f'{p.name} = {{ value = "{p.preset_value(cal.fitted[p.name])}", '
                  f'source = "{public.source_text(source, cal)}" }}')
    lines += hopper_closed_form_rows()  # cheap: always refreshed
    summary = out / "summary.md"
    if names and summary.is_file():  # a subset: keep the other sources' rows
        mine = {line.split("|")[1] for line in lines[2:]}
        kept = [line for line in summary.read_text().splitlines()[2:] if line.split("|")[1] not in mine]
        order = [f" `{s.table}` " for s in public.SOURCES.values()]
        rows = sorted(kept + lines[2:], key=lambda line: order.index(line.split("|")[1])
                      if line.split("|")[1] in order else len(order))  # closed-form rows last
        lines = lines[:2] + rows
    summary.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
