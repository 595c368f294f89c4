"""Exception types a user can cause, each with a message that names what went wrong.

The CLI catches :class:`TmasimError` and prints its message in one or two lines (exit 2 for
bad input, 3 for a model that cannot run to completion), never a traceback.
"""

from __future__ import annotations

from typing import Any


class TmasimError(Exception):
    """Base class for every error a user can cause through a scenario or the command line."""

    exit_code = 2


class ScenarioError(TmasimError, ValueError):
    """A scenario field has a value that breaks a rule: names the field, the value and the rule."""

    def __init__(self, field: str, value: Any, rule: str) -> None:
        self.field = field
        self.value = value
        self.rule = rule
        super().__init__(f"{_name(field)}: {_show(value)} {rule}")


class UnitError(ScenarioError):
    """A quantity that cannot be parsed or has the wrong kind (a size given for a time)."""


class DescriptorError(ScenarioError):
    """A TMA tensor descriptor or box breaks one of the hardware's rules."""


class ResidencyError(ScenarioError):
    """A CTA that fits on no SM (shared memory, threads or barriers over the limits)."""


class ResourceError(TmasimError):
    """A run or sweep whose estimated time or memory is past the stated limits (tmasim.budget):
    names the estimate and how to lift the limit."""


class ModelError(TmasimError):
    """The modelled program cannot run to completion: deadlock or synchronization misuse."""

    exit_code = 3
    records: Any = None  # the run's Recorder up to the failure, where it kept one


class DeadlockError(ModelError):
    """The event queue emptied while processes still waited: names who waits on what."""


class BarrierError(ModelError):
    """An mbarrier used against its rules: tx-count underflow, more arrivals than expected."""


def _name(field: str) -> str:
    """A field's name as given, unless it would break the one-line message (a key with a newline)."""
    text = field if isinstance(field, str) and field.isprintable() else repr(field)
    return text if len(text) <= 120 else f"{text[:100]}... ({len(text)} characters)"


def _show(value: Any) -> str:
    text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)
    if len(text) > 120:  # a message stays one readable line, whatever was given
        text = f"{text[:100]}... ({len(text)} characters)"
    return text
