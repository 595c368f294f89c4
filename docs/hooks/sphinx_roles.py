"""A MkDocs hook: the package's docstrings use Sphinx roles (:class:`Result`, :func:`simulate`,
:class:`~tmasim.results.Result`), which mkdocstrings renders as literal text before the code.
Keep the code, drop the role; a leading ``~`` keeps the last name only, as Sphinx does."""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([^<]*)</code>")


def _code(match: re.Match[str]) -> str:
    short, name = match.group(1), match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if short else name}</code>"


def on_page_content(html: str, **_: Any) -> str:
    return ROLE.sub(_code, html)
