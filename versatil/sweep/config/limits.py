"""The limits of a sweep file: how many trials, which seeds, what a name may hold."""

from __future__ import annotations

import re

from versatil.errors import ConfigError

__all__ = ["MAX_SEED", "MAX_TRIALS", "NAME_RULE", "check_name"]


MAX_TRIALS = 10_000
"""The most trials a sweep may expand to (``--dry-run`` lists each one)."""

MAX_SEED = 2**32 - 1
"""The largest seed numpy, Optuna and Lightning accept (the smallest is 0)."""

NAME_RULE = (
    "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 100 characters"
)
"""What a sweep name or an MLflow experiment name may hold: it names directories."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(field: str, value: str) -> str:
    """Returns ``value`` when it follows :data:`NAME_RULE`.

    Raises:
        ConfigError: naming the field, the value and the rule.
    """
    if not _NAME.fullmatch(value):
        raise ConfigError(f"{field}: {value!r} is not a valid name: use {NAME_RULE}")
    return value
