"""The one error type users see for bad input, and its formatting of pydantic errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pydantic

__all__ = ["ConfigError", "describe_validation_error", "did_you_mean"]


class ConfigError(ValueError):
    """Bad user input: the message names each bad field, its value and the valid choices."""


def did_you_mean(value: str, choices: list[str]) -> str:
    """`` (did you mean 'lr'?)`` when ``value`` looks like a typo of one of ``choices``."""
    import difflib

    close = difflib.get_close_matches(value, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def describe_validation_error(
    error: pydantic.ValidationError, prefix: str = "", fields: list[str] | None = None
) -> list[str]:
    """One line per problem in a pydantic ``ValidationError``, as ``field: value ...``.

    Args:
        error: The error pydantic raised.
        prefix: Dotted path of the validated object inside the user's file.
        fields: The model's valid field names, listed when a field is unknown.
    """
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in (prefix, *item["loc"]) if part != "")
        value = item.get("input")
        if item["type"] == "extra_forbidden":
            valid = f"; valid fields: {', '.join(fields)}" if fields else ""
            lines.append(f"{location}: unknown field{valid}")
        elif item["type"] == "missing":
            lines.append(f"{location}: required field is missing")
        elif not item["loc"]:
            # A model-level check: its message already carries the values.
            message = item["msg"].removeprefix("Value error, ")
            lines.append(f"{location}: {message}" if location else message)
        else:
            message = item["msg"].removeprefix("Value error, ")
            field = str(item["loc"][-1])
            if message.startswith((f"{field}: ", f"{field}.")):
                # Our own validators already name the field, the value and the choices.
                parent = location.rpartition(".")[0]
                lines.append(f"{parent}.{message}" if parent else message)
            else:
                lines.append(f"{location}: {value!r} is invalid: {message}")
    return lines
