"""Small helpers shared by the command-line entry points."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import yaml

from versatil.errors import (
    ConfigError,
    DiskFullError,
    ServiceError,
    describe_yaml_error,
    no_space_left,
)

__all__ = ["exit_now", "parse_assignment", "quiet_libraries", "run_cli", "run_main"]


def parse_assignment(text: str) -> tuple[str, Any]:
    """Parses ``key=value`` with the value read as YAML (``lr=1e-3`` -> float).

    Raises:
        ConfigError: when there is no ``=``, the key is empty or the value is not YAML.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} is not of the form key=value (e.g. lr=0.001)")
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError as error:
        raise ConfigError(
            f"override {text!r}: the value {value!r} is not valid YAML "
            f"({describe_yaml_error(error)})"
        ) from None
    except (ValueError, RecursionError) as error:  # a 5000-digit integer, deep nesting
        reason = str(error) or type(error).__name__
        raise ConfigError(
            f"override {text!r}: the value {value!r} is not valid YAML ({reason})"
        ) from None


def quiet_libraries() -> None:
    """Silences Lightning's per-run banners (GPU available, tips) on the console.

    Call it after Lightning is imported: Lightning sets its loggers' levels on import.
    """
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Ray Train logs every persisted checkpoint at INFO level from inside the trial.
    for name in ("ray.train", "ray.tune"):
        logging.getLogger(name).setLevel(logging.WARNING)


def run_main(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Runs ``main(argv)`` and returns the exit status the command ends with.

    Bad input prints one paragraph, ``error: ...``, to stderr and returns 2 (1 for a
    service that would not start, :class:`ServiceError`, and for a full disk); argparse's
    own errors (also status 2) and ``--help`` (status 0) are returned, not raised.
    """
    try:
        return main(argv)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (ServiceError, DiskFullError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # a disk the command writes to filled up
        full = no_space_left(error, "a disk this command writes to")
        if full is None:
            raise
        print(f"error: {full}; free space there, then run the command again", file=sys.stderr)
        return 1
    except SystemExit as exit_:
        code = exit_.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1


def exit_now(code: int) -> NoReturn:
    """Ends the process with ``code`` once its output is flushed, skipping the teardown.

    A command's work is done and written when it returns; the interpreter's teardown of
    torch, Lightning, Ray and MLflow would add seconds after the last line.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def run_cli(main: Callable[[list[str]], int]) -> None:
    """Runs ``main`` on the command line's arguments and exits with its status (see run_main)."""
    sys.exit(run_main(main, sys.argv[1:]))
