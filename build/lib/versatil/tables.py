"""The one table formatter: the sweep summary, the report, the dry run and training output.

Every table is rendered by ``tabulate``; cells are formatted here, once (4 significant
digits for floats, ``-`` for a missing value).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from tabulate import tabulate

__all__ = ["cell", "format_table"]


def cell(value: Any, missing: str = "-") -> str:
    """A value as a table shows it."""
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    style: Literal["plain", "markdown"] = "plain",
    missing: str = "-",
) -> str:
    """Rows under headers: aligned plain text, or a GitHub markdown table."""
    body = [[cell(value, missing) for value in row] for row in rows]
    return tabulate(
        body,
        headers=list(headers),
        tablefmt="github" if style == "markdown" else "plain",
        disable_numparse=True,
        stralign="left",
    )
