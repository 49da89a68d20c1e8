"""Small helpers shared by the command-line entry points."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import yaml

from versatil.errors import ConfigError

__all__ = ["parse_assignment", "quiet_libraries", "run_cli"]


def parse_assignment(text: str) -> tuple[str, Any]:
    """Parses ``key=value`` with the value read as YAML (``lr=1e-3`` -> float)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not of the form key=value (e.g. lr=0.001)")
    return key.strip(), yaml.safe_load(value)


def quiet_libraries() -> None:
    """Silences Lightning's per-run banners (GPU available, tips) on the console.

    Call it after Lightning is imported: Lightning sets its loggers' levels on import.
    """
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Ray Train logs every persisted checkpoint at INFO level from inside the trial.
    for name in ("ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.WARNING)


def run_cli(main: Callable[[], int]) -> None:
    """Runs ``main``; bad input prints one paragraph to stderr and exits with status 2."""
    try:
        sys.exit(main())
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
