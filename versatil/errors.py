"""The errors users see (bad input; a service that would not start), and their formatting."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pydantic
    import yaml

__all__ = [
    "NO_SPACE",
    "ConfigError",
    "DiskFullError",
    "ServiceError",
    "describe_validation_error",
    "describe_yaml_error",
    "did_you_mean",
    "no_space_left",
]


class ConfigError(ValueError):
    """Bad user input: the message names each bad field, its value and the valid choices."""


class ServiceError(RuntimeError):
    """A service the command needs did not start or answer; the message says what to do."""


NO_SPACE = "no space left on "
"""How every message about a full disk begins (a trial's reason, a command's error)."""


class DiskFullError(RuntimeError):
    """A disk the command writes to is full; the message names it and what to do."""


def no_space_left(error: BaseException, where: str) -> str | None:
    """What a full disk made of ``error``, ``no space left on ...``; ``None`` for anything else.

    Python's ``OSError`` (``errno.ENOSPC``) and pyarrow's, whose errno is kept in its
    message, are found anywhere in the chain of causes.

    Args:
        error: What was raised.
        where: The disk to name when the error names no file (pyarrow's do not).
    """
    import errno

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        if isinstance(error, OSError) and (
            error.errno == errno.ENOSPC or "no space left on device" in text.lower()
        ):
            return f"{NO_SPACE}{error.filename or where} (errno {errno.ENOSPC}, ENOSPC)"
        error = error.__cause__ or error.__context__
    return None


def did_you_mean(value: str, choices: list[str]) -> str:
    """`` (did you mean 'lr'?)`` when ``value`` looks like a typo of one of ``choices``."""
    import difflib

    close = difflib.get_close_matches(value, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def describe_validation_error(
    error: pydantic.ValidationError,
    prefix: str = "",
    fields: list[str] | None = None,
    model: type[pydantic.BaseModel] | None = None,
) -> list[str]:
    """One line per problem in a pydantic ``ValidationError``, as ``field: value ...``.

    Args:
        error: The error pydantic raised.
        prefix: Dotted path of the validated object inside the user's file.
        fields: The model's valid field names, listed when a top-level field is unknown.
        model: The validated model; an unknown field at any depth then lists the valid
            fields of the section it is in.
    """
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in (prefix, *item["loc"]) if part != "")
        value = item.get("input")
        if item["type"] == "extra_forbidden":
            known = _fields_at(model, item["loc"]) if model is not None else None
            if known is None and len(item["loc"]) == 1:
                known = fields
            valid = f"; valid fields: {', '.join(known)}" if known else ""
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


def _fields_at(model: type[pydantic.BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The fields of the (nested) model that holds ``loc``'s last part, if it is a model."""
    import pydantic

    current = model
    for part in loc[:-1]:
        info = current.model_fields.get(part) if isinstance(part, str) else None
        annotation = info.annotation if info is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)):
            return None
        current = annotation
    return list(current.model_fields)


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """A YAML parse error on one line: where in the text, and what is wrong."""
    import yaml

    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        context = f" ({error.context})" if error.context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {error.problem}{context}"
    return " ".join(str(error).split())


def first_line(error: BaseException, limit: int = 300) -> str:
    """The first line of ``error``'s message (at most ``limit`` characters), or its type."""
    lines = str(error).strip().splitlines()
    return lines[0][:limit] if lines else type(error).__name__
