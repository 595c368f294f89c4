"""pint's conversion factors for the units quantities are usually written in, so that reading a
scenario does not import pint (about 0.15-0.2 s of every ``tmasim run``, more than the reference
run's simulation): :func:`tmasim.units.parse` multiplies the number by the factor listed here
for its unit, which is the very operation pint performs (``value * factor``, the factor from
pint's own root units), so a listed unit reads bit for bit as pint would read it. A unit not
listed, or listed for another kind, goes through pint as before (and pint's message when it is
wrong). ``tests/test_units.py`` recomputes every factor with pint and checks each against it.

To add a unit: add its text to :data:`UNITS` and print the table with
``python -c "from tmasim import units; units.print_factors()"``.
"""

from __future__ import annotations

# The unit texts (spaces removed, as tmasim.units.parse reads them) per kind of quantity.
UNITS: dict[str, tuple[str, ...]] = {
    "time": ("ps", "ns", "us", "µs", "μs", "ms", "s"),
    "size": ("B", "bytes", "KiB", "MiB", "GiB", "TiB", "kB", "KB", "MB", "GB", "TB"),
    "bandwidth": ("B/s", "kB/s", "KB/s", "MB/s", "GB/s", "TB/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s", "B/ps", "B/ns"),
    "frequency": ("Hz", "kHz", "MHz", "GHz"),
    "flops": ("FLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"),
    "flop_rate": ("FLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"),
    "cycles": ("cycle", "cycles", "clk"),
    "bytes_per_cycle": ("B/cycle", "B/clk"),
}

# kind -> unit text -> factor to the engine's unit (tmasim.units.print_factors)
FACTORS: dict[str, dict[str, float]] = {
    "time": {
        "ps": 1.0,
        "ns": 1000.0000000000001,
        "us": 1000000.0,
        "µs": 1000000.0,
        "μs": 1000000.0,
        "ms": 1000000000.0,
        "s": 1000000000000.0,
    },
    "size": {
        "B": 1.0,
        "bytes": 1.0,
        "KiB": 1024.0,
        "MiB": 1048576.0,
        "GiB": 1073741824.0,
        "TiB": 1099511627776.0,
        "kB": 1000.0,
        "KB": 1000.0,
        "MB": 1000000.0,
        "GB": 1000000000.0,
        "TB": 1000000000000.0,
    },
    "bandwidth": {
        "B/s": 1e-12,
        "kB/s": 1e-09,
        "KB/s": 1e-09,
        "MB/s": 1e-06,
        "GB/s": 0.001,
        "TB/s": 1.0,
        "KiB/s": 1.024e-09,
        "MiB/s": 1.048576e-06,
        "GiB/s": 0.001073741824,
        "TiB/s": 1.099511627776,
        "B/ps": 1.0,
        "B/ns": 0.0009999999999999998,
    },
    "frequency": {
        "Hz": 1.0,
        "kHz": 1000.0,
        "MHz": 1000000.0,
        "GHz": 1000000000.0,
    },
    "flops": {
        "FLOP": 1.0,
        "MFLOP": 1000000.0,
        "GFLOP": 1000000000.0,
        "TFLOP": 1000000000000.0,
        "PFLOP": 1000000000000000.0,
    },
    "flop_rate": {
        "FLOP/s": 1e-12,
        "GFLOP/s": 0.001,
        "TFLOP/s": 1.0,
        "PFLOP/s": 1000.0,
    },
    "cycles": {
        "cycle": 1.0,
        "cycles": 1.0,
        "clk": 1.0,
    },
    "bytes_per_cycle": {
        "B/cycle": 1.0,
        "B/clk": 1.0,
    },
}
