"""What a measurement was taken on: device, clocks, driver, software versions, date.

Every field is read defensively: a missing tool (nvidia-smi), an attribute the
driver does not know, or the simulator must leave a note in the metadata rather
than lose the measurements it describes.
"""

from __future__ import annotations

import datetime as _dt
import platform
import shutil
import subprocess
from importlib import metadata as _im
from typing import Any

_PACKAGES = ("numba", "numba-cuda", "cuda-bindings", "cuda-core", "numpy", "pandas", "llvmlite")
_DEVICE_ATTRS = ("MULTIPROCESSOR_COUNT", "L2_CACHE_SIZE", "MAX_SHARED_MEMORY_PER_BLOCK",
                 "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
                 "CLOCK_RATE", "MEMORY_CLOCK_RATE", "GLOBAL_MEMORY_BUS_WIDTH")
_SMI_FIELDS = ("name", "driver_version", "pstate", "clocks.sm", "clocks.mem",
               "clocks.max.sm", "clocks.max.mem", "power.limit", "temperature.gpu")


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = _im.version(name)
        except _im.PackageNotFoundError:
            out[name] = "not installed"
    return out


def nvidia_smi() -> dict[str, str]:
    """Current and maximum clocks etc. from nvidia-smi (empty with a note if unavailable)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"note": "nvidia-smi not found"}
    cmd = [exe, f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"note": f"nvidia-smi failed: {exc}"}
    if res.returncode != 0:
        return {"note": f"nvidia-smi exit {res.returncode}: {res.stderr.strip()[:200]}"}
    values = [v.strip() for v in res.stdout.splitlines()[0].split(",")] if res.stdout else []
    return dict(zip(_SMI_FIELDS, values, strict=False))


def driver_version() -> str:
    """cuDriverGetVersion via cuda-bindings, e.g. '13.0' (return code checked)."""
    from tmasim.gpu.tensormap import check, driver_module

    d = driver_module()
    err, version = d.cuDriverGetVersion()
    check(err, "cuDriverGetVersion")
    return f"{version // 1000}.{(version % 1000) // 10}"


def device_info() -> dict[str, Any]:
    """Name, compute capability and attributes of the current numba device."""
    from numba import cuda

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    info: dict[str, Any] = {"name": name, "compute_capability": list(dev.compute_capability)}
    for attr in _DEVICE_ATTRS:
        try:
            info[attr.lower()] = int(getattr(dev, attr))
        except Exception as exc:  # attribute unknown to this driver/numba pairing
            info[attr.lower()] = f"unavailable: {type(exc).__name__}"
    return info


def collect(simulator: bool) -> dict[str, Any]:
    """All metadata for one measurement session."""
    meta: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "simulator": simulator,
    }
    if simulator:
        meta["device"] = {"name": "numba CUDA simulator", "multiprocessor_count": 1}
        return meta
    meta["device"] = device_info()
    try:
        meta["driver_version"] = driver_version()
    except Exception as exc:
        meta["driver_version"] = f"unavailable: {exc}"
    meta["nvidia_smi"] = nvidia_smi()
    return meta
