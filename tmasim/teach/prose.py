"""How explanations are written: paragraphs wrapped to the terminal's width with a number and its
unit kept on one line, bullets, a formula on a line of its own, ordinals, moments."""

from __future__ import annotations

import re
import textwrap

from tmasim.values import format as fmt

WIDTH = 100


# A number and its unit stay on one line: the space between them is held while wrapping.
_QUANTITY = re.compile(r"(\d) (ps|ns|us|µs|ms|s|B|KiB|MiB|GiB|TB/s|GB/s|MB/s|TFLOP/s)(?=[\s,.;:)]|$)")


def paragraph(text: str, indent: str = "", first: str | None = None) -> str:
    held = _QUANTITY.sub("\\1\u00a0\\2", text)
    filled = textwrap.fill(held, WIDTH, initial_indent=indent if first is None else first,
                           subsequent_indent=indent, break_on_hyphens=False)
    return filled.replace("\u00a0", " ")


def bullet(text: str) -> str:
    return paragraph(text, "    ", first="  - ")



def formula_block(intro: str, formula: str, rest: str = "") -> str:
    """A sentence, the formula with this run's numbers on a line of its own, then the rest."""
    parts = [paragraph(intro), f"    {formula}"]
    if rest:
        parts.append(paragraph(rest))
    return "\n".join(parts)


def ordinal(n: int) -> str:
    names = {2: "a second", 3: "a third", 4: "a fourth", 5: "a fifth", 6: "a sixth", 7: "a seventh",
             8: "an eighth"}
    return names.get(n, f"stage {n} (one more)")


def moment(ps: float) -> str:
    """When something happened, for a sentence: ``at 3 µs``, or ``at the start (time 0)``, never
    ``at 0 ps``."""
    return "at the start (time 0)" if ps == 0 else f"at {fmt.time(ps, 4)}"
