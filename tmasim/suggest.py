"""``did you mean ...``: the nearest known name to a mistyped one (difflib), for error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(word: object, known: Iterable[str]) -> str | None:
    """The known name closest to ``word``, if one is close enough to be what was meant."""
    if not isinstance(word, str):
        return None
    matches = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: object, known: Iterable[str]) -> str:
    """``"; did you mean 'stages'?"``, or nothing when no known name is close."""
    match = nearest(word, known)
    return f"; did you mean {match!r}?" if match else ""
