"""How a learner's answer is read: one parser and one tolerance for ``learn --predict``, the
prediction asked on a terminal, and every numeric answer of ``tmasim quiz``.

A time may carry its unit (``16 µs``, ``16µs``, ``16 μs``, ``16 us``, ``0.016 ms``,
``16000 ns``) or be a bare number in the question's unit (µs); a percentage may carry ``%``;
a count may carry its noun (``3 stages``). Anything else (``16 apples``) is a one-line
:class:`~tmasim.errors.ScenarioError`, never a wrong answer. Each reading says how it was
taken (:attr:`Reading.shown`), in a unit that suits its size (``23 s``, not ``2.3e+07 µs``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tmasim.errors import ScenarioError, TmasimError
from tmasim.values import format as fmt
from tmasim.values.units import PS_PER_US, parse

TOLERANCE = 0.05
TOLERANCE_TEXT = "within 5% of the simulated value counts as right"
TIME_UNIT = "us"   # the unit of a time question's bare number
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


@dataclass(frozen=True)
class Reading:
    """An answer as read: its value in the question's unit, how it was read, and a remark
    where the reading could be taken another way."""

    value: float
    shown: str
    note: str = ""


def read_answer(text: str, unit: str, where: str, *, signed: bool = False) -> Reading:
    """``text`` as a number in ``unit`` ("us" for times, "%", or a count's noun): finite always;
    unless ``signed`` (a quiz's differences and changes), a time or count >= 0 and a percentage
    from 0 to 100, the rules of every quantity (a lesson's predictions)."""
    cleaned = text.strip()
    if unit == TIME_UNIT:
        reading = _time(cleaned, where)
    elif unit == "%":
        reading = _percent(cleaned, where)
    else:
        reading = _count(cleaned, unit, where)
    if not signed:
        _check_range(reading, unit, cleaned, where)
    return reading


def _check_range(reading: Reading, unit: str, text: str, where: str) -> None:
    if unit == "%" and not 0 <= reading.value <= 100:
        raise ScenarioError(where, text, "must be a percentage from 0 to 100")
    if reading.value < 0:
        raise ScenarioError(where, text, "must be >= 0 (a time)" if unit == TIME_UNIT else "must be >= 0 (a count)")


def is_right(value: float, answer: float) -> bool:
    """Within :data:`TOLERANCE` of the answer (exactly, for an answer of zero)."""
    return abs(value - answer) <= TOLERANCE * abs(answer) if answer else value == 0


def answer_text(answer: float, unit: str) -> str:
    """The simulated answer in the question's unit, a time in a unit that suits it."""
    if unit == TIME_UNIT:
        return fmt.time(answer * PS_PER_US, 4)
    return f"{answer:.4g}%" if unit == "%" else f"{answer:.4g} {unit}".rstrip()


def _not_finite(text: str) -> bool:
    """``nan``, ``inf``, ``1e400``, with or without a unit after it."""
    head = re.match(r"\s*([-+]?(nan|inf(inity)?)\b|[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)", text, re.IGNORECASE)
    return head is not None and head.group(1) is not None and not math.isfinite(float(head.group(1)))


def _finite(text: str, where: str, rule: str) -> float:
    if not _NUMBER.fullmatch(text):
        raise ScenarioError(where, text, "must be a finite number" if _not_finite(text) else rule)
    value = float(text)
    if not math.isfinite(value):
        raise ScenarioError(where, text, "must be a finite number")
    return value


def _time(text: str, where: str) -> Reading:
    rule = (f"must be a time: a number of {fmt.micro()}s, or a number and its unit (16 us, 16 {fmt.micro()}s, "
            "16000 ns, 0.016 ms)")
    if _NUMBER.fullmatch(text):
        ps = _finite(text, where, rule) * PS_PER_US
    else:
        try:
            ps = parse(text, "time", where)
        except TmasimError:
            raise ScenarioError(where, text, "must be a finite number" if _not_finite(text) else rule) from None
    return Reading(ps / PS_PER_US, fmt.time(ps, 4))


def _percent(text: str, where: str) -> Reading:
    signed = text.endswith("%")
    value = _finite(text.removesuffix("%").strip(), where, "must be a percentage: a number, with or without % "
                                                           "(62.5 or 62.5%)")
    shown = f"{value:.4g}%"
    note = ""
    if not signed and 0 < abs(value) <= 1:
        note = (f"{value:g} was read as {shown}; if you meant the fraction {value:g}, that is "
                f"{value * 100:.4g}%: answer {value * 100:.4g}")
    return Reading(value, shown, note)


def _count(text: str, unit: str, where: str) -> Reading:
    noun = unit.rstrip("s")
    bare = re.sub(rf"\s*{re.escape(noun)}s?$", "", text) if noun else text
    what = f"a number of {unit}" if unit else "a number"
    value = _finite(bare.strip(), where, f"must be {what} (like 3{' ' + unit if unit else ''})")
    return Reading(value, f"{value:.4g}{' ' + unit if unit else ''}")
