"""Reading a sweep file into plain data: every way a file can be unusable is a ConfigError.

Bad input never escapes as a traceback: a missing, unreadable, non-UTF-8, oversized, empty
or malformed file, YAML that is not a mapping, and values no sweep needs (non-finite
numbers, nesting or YAML aliases that expand without bound) each give one message naming
the file or the field.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from versatil.errors import ConfigError, describe_yaml_error

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "check_plain_data", "parse_yaml", "read_text"]

MAX_BYTES = 1_000_000
"""The largest sweep file read; the shipped ones are under 1 kB."""

MAX_DEPTH = 32
"""How deeply a sweep file's mappings and lists may nest."""

MAX_VALUES = 100_000
"""How many values a sweep file may hold once YAML aliases are expanded."""


def read_text(path: Path) -> str:
    """The text of the sweep file at ``path``.

    Raises:
        ConfigError: naming the path and why it cannot be used.
    """
    label = f"sweep file {str(path)!r}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ConfigError(f"{label} does not exist") from None
    except (OSError, ValueError) as error:
        raise ConfigError(f"{label} cannot be read: {_reason(error)}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{label} is a directory, not a sweep file")
    if not stat.S_ISREG(mode):
        # A FIFO or a device could block or never end.
        raise ConfigError(f"{label} is not a regular file")
    try:
        with open(path, "rb") as stream:
            raw = stream.read(MAX_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"{label} cannot be read: {_reason(error)}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{label} is larger than {MAX_BYTES} bytes; is it a sweep file?")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{label} is not UTF-8 text: byte 0x{raw[error.start]:02x} at offset {error.start}"
        ) from None


def parse_yaml(text: str, label: str) -> dict[str, Any]:
    """The mapping a sweep file's YAML holds.

    Args:
        text: The file's text.
        label: Names the file in messages (``sweep file 'x.yaml'``).

    Raises:
        ConfigError: when the YAML is malformed, empty or not a mapping.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{label} is not valid YAML: {describe_yaml_error(error)}") from None
    except RecursionError:
        raise ConfigError(f"{label} nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise ConfigError(f"{label} is not valid YAML: {error}") from None
    if data is None:
        raise ConfigError(f"{label} is empty; a sweep file is a mapping with at least a name")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{label} must hold a mapping (name: ..., space: ...), not {type(data).__name__} "
            f"{_short(data)}"
        )
    return data


def check_plain_data(data: Mapping[str, Any]) -> None:
    """Rejects values no sweep needs, before validation walks them.

    Raises:
        ConfigError: naming the field of a non-finite number, of too deep a nesting, or
            saying that the data holds more than :data:`MAX_VALUES` values.
    """
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    seen = 0
    while stack:
        where, value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(
                f"the sweep holds more than {MAX_VALUES} values (YAML aliases expanded)"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{_clip(where)}: {value} is not a finite number")
        if isinstance(value, Mapping | list | tuple | set):
            if depth >= MAX_DEPTH:
                raise ConfigError(
                    f"{_clip(where)}: nests deeper than {MAX_DEPTH} levels "
                    "(a recursive YAML alias?)"
                )
            if isinstance(value, Mapping):
                children = [
                    (f"{where}.{key}" if where else str(key), v) for key, v in value.items()
                ]
            else:
                children = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
            stack.extend((child, v, depth + 1) for child, v in reversed(children))


def _reason(error: Exception) -> str:
    return getattr(error, "strerror", None) or str(error)


def _short(value: Any) -> str:
    return _clip(repr(value))


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
