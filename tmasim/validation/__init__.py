"""Validation against measured tables, and calibration of GPU presets to them (docs/design.md §7).

    >>> from tmasim.validation import validate, calibrate
    >>> v = validate("out/measured_runs.csv")            # the backend's files, mapped built-in
    >>> print(v.text()); v.save("out/validation")
    >>> cal = calibrate("out/measured_runs.csv", ["copy_latency", "sm_port_bandwidth"])
    >>> cal.write_preset("my-h100.toml")

Modules: ``mapping`` (--map, the backend's map, units), ``measured`` (tables, provenance,
repeats), ``study`` (base scenario + mapping = one scenario per point), ``runner`` (parallel,
deduplicated, resumable simulation), ``compare`` (:func:`validate`), ``fit``
(scipy least squares), ``calibration`` (:func:`calibrate`), ``preset`` (writing a preset),
``timeline`` and ``figures``, ``synthetic`` (backend files from the simulator, for tests),
``command`` (the subcommands). Heavy modules load on first use, so that registering the
subcommands keeps ``tmasim --help`` fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tmasim.validation.command import register

if TYPE_CHECKING:
    from tmasim.validation.calibration import calibrate
    from tmasim.validation.compare import validate
    from tmasim.validation.study import Options

__all__ = ["Options", "calibrate", "register", "validate"]


def __getattr__(name: str) -> Any:
    if name == "validate":
        from tmasim.validation.compare import validate

        return validate
    if name == "calibrate":
        from tmasim.validation.calibration import calibrate

        return calibrate
    if name == "Options":
        from tmasim.validation.study import Options

        return Options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
