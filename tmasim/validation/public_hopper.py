"""The Hopper sources of the public calibration (``validation/public/h800-pcie/``).

Luo et al.'s microbenchmarks ("Dissecting the NVIDIA Hopper Architecture through
Microbenchmarking and Multiple Level Analysis", arXiv 2501.12084; HPMLL/NVIDIA-Hopper-Benchmark,
commit ded6f57) on an H800 PCIe: 114 SMs at 1.755 GHz, the GH100 SM and TMA unit of H100/H200,
with its own HBM2e. Each table isolates one mechanism of the TMA unit:

- ``tma_throughput_boxes.csv`` (the 2-D and 3-D tables): boxes of equal bytes and different
  row widths, 1-4 copies in flight per SM; fits the unit's time per request
  (``tma_request_time``) with the copy latency and this card's HBM bandwidth.
- ``latency_tma.csv``: a pointer chase of 16-byte TMA copies; fits the copy latency of an L2
  hit (``copy_latency``) and what HBM adds (``hbm_latency``). Against ``latency_ld.csv`` (the
  same chase with plain loads) it gives the TMA unit's own overhead.
- ``tma_throughput_bulk.csv``: bytes in flight against the HBM plateau (Little's law); a
  held-out check of latency and bandwidth together, nothing fitted on it.
- ``dsmem_latency.csv``: a 4 KiB read of another SM's shared memory in the cluster
  (``cluster_arrive_latency``: see :func:`dsmem_fit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

H800_SMS = 114
H800_GHZ = 1.755
BOXES_PER_CTA = 12
# The throughput scenarios run a sixth of the chip (19 SMs, a sixth of its L2 and HBM bandwidth):
# each SM's share is the same, and drifting SMs (not aggregated) cost six times less to simulate.
SLICE_SMS = 19


def box_points(frame: pd.DataFrame) -> pd.DataFrame:
    """A fp32 box of x (innermost) by y by z elements; each CTA streams BOXES_PER_CTA of them."""
    out = frame.copy()
    out["box"] = [f"[{z}, {y}, {x}]" for x, y, z in zip(out["x"], out["y"], out["z"], strict=True)]
    out["shape"] = [f"[{z * BOXES_PER_CTA * SLICE_SMS * c}, {y}, {x}]"
                    for x, y, z, c in zip(out["x"], out["y"], out["z"], out["ctas_per_sm"], strict=True)]
    out["slice_gbps"] = out["throughput_gbps"] * SLICE_SMS / H800_SMS
    out["row_bytes"] = out["x"] * 4
    out["bytes_in_flight_kib"] = out["load_kib"] * out["ctas_per_sm"]
    return out


def bulk_points(frame: pd.DataFrame) -> pd.DataFrame:
    """A bulk copy of load_kib contiguous bytes: as k rows of 1 KiB (256 fp32, a box's widest
    dim), the same requests of 128 B; bytes in flight per SM against the HBM plateau."""
    out = frame.copy()
    rows = out["load_kib"].astype(int)
    out["box"] = [f"[{k}, 256]" for k in rows]
    out["shape"] = [f"[{k * BOXES_PER_CTA * SLICE_SMS * c}, 256]" for k, c in zip(rows, out["ctas_per_sm"],
                                                                                strict=True)]
    out["slice_gbps"] = out["throughput_gbps"] * SLICE_SMS / H800_SMS
    out["bytes_in_flight_kib"] = out["load_kib"] * out["ctas_per_sm"]
    return out


def chase_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Every row; the latency in ns from the cycles column at the benchmark's 1.755 GHz."""
    return frame.assign(latency_ns=frame["cycles_per_access"] / H800_GHZ).reset_index(drop=True)


@dataclass(frozen=True)
class DsmemFit:
    """Distributed shared memory on Hopper, from a 4 KiB read of a cluster peer's shared memory.

    A read on the SM's own shared memory costs ``local`` cycles; a peer's costs ``local`` plus
    two crossings of the SM-to-SM network (request out, data back), ``hop`` cycles each. A remote
    mbarrier arrive crosses once and updates the barrier in the peer's shared memory, so it costs
    ``local + hop`` (``arrive``), and nothing comes back to wait for."""

    local: float
    hop: float
    train: int
    held_out: int
    holdout_mape: float

    @property
    def arrive(self) -> float:
        return self.local + self.hop


def dsmem_fit(frame: pd.DataFrame, seed: int = 0, holdout: float = 0.5) -> DsmemFit:
    """``local`` from the own-SM rows; ``hop`` from a seeded half of the remote rows (least squares
    of local + 2 hop: their mean); the held-out MAPE on the other half."""
    import numpy as np

    from tmasim.validation.calibration import split

    local = float(frame.loc[frame["src_sm"] == frame["dst_sm"], "cycles"].mean())
    remote = frame.loc[frame["src_sm"] != frame["dst_sm"], "cycles"].to_numpy(dtype=float)
    train, held = split(list(range(len(remote))), holdout, seed)
    hop = (float(remote[train].mean()) - local) / 2
    errors = np.abs((local + 2 * hop) / remote[held] - 1) * 100
    return DsmemFit(local, hop, len(train), len(held), float(errors.mean()))


NOMINAL_FMA_PER_CYCLE = 2048  # dense fp16 FMA per cycle per SM (Hopper whitepaper); fp8 twice the FLOP


@dataclass(frozen=True)
class WgmmaFit:
    """One warpgroup issuing ``wgmma`` back to back on every SM (Luo et al., IPDPS 2024, Table VIII).

    The measured latency of m64n256k16 in SM cycles (128) is the full-rate issue interval
    (64 x 256 x 16 FMA at 2048 FMA per cycle), so in cycles the tensor core issues without gaps;
    the throughput, timed in seconds, falls short of 114 SMs x 4096 FLOP per cycle x 1.755 GHz
    only through the clock: ``clock_ghz`` is the clock the SMs ran at under that load, fitted on
    the fp16 SS row; the fp16 RS and fp8 rows are held out."""

    ii_cycles: float
    clock_ghz: float
    holdout_mape: float

    @property
    def share_of_nominal(self) -> float:
        return self.clock_ghz / H800_GHZ


def wgmma_fit(frame: pd.DataFrame) -> WgmmaFit:
    fp16 = frame[(frame["dtype"] == "fp16") & (frame["operands"] == "SS")].iloc[0]
    ii = float(fp16["latency_cycles"])
    clock = float(fp16["throughput_tflops"]) * 1e12 * ii / (float(fp16["flop_per_instruction"]) * H800_SMS) / 1e9
    held = frame.drop(index=fp16.name)
    predicted = held["flop_per_instruction"] * H800_SMS * clock * 1e9 / ii / 1e12
    mape = float((abs(predicted / held["throughput_tflops"] - 1) * 100).mean())
    return WgmmaFit(ii, clock, mape)
