"""A sweep's axes: the settings axes drawn from their enums, numeric axes, fixed values."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal

import pydantic

from versatil.errors import ConfigError, describe_validation_error
from versatil.training.constants import PrecisionType
from versatil.training.spec import (
    NONE,
    SETTING_ENUMS,
    SettingsError,
    parse_setting,
)

__all__ = [
    "ENUM_AXES",
    "NUMERIC_KINDS",
    "EnumAxis",
    "NumericAxis",
    "axis_choices",
    "is_grid",
    "parse_axis",
]


ENUM_AXES: dict[str, type[enum.StrEnum]] = SETTING_ENUMS
"""The settings axes, each drawn from its enum."""

NUMERIC_KINDS = ("choice", "grid", "uniform", "loguniform", "randint")


def axis_choices(name: str) -> list[str]:
    """Every value an enum axis can take in a sweep.

    ``all`` means exactly these: the precisions valid for training (INT8 is not), every
    compile mode plus ``none`` (eager), and every matmul precision.
    """
    enum_type = ENUM_AXES[name]
    values = [m.value for m in enum_type if m is not PrecisionType.INT8]
    return [NONE, *values] if name == "compile_mode" else values


class EnumAxis(pydantic.BaseModel):
    """An enum axis: ``all``, a list of values, or ``{values: all, exclude: [...]}``.

    Values are parsed by :func:`~versatil.training.spec.parse_setting`, as everywhere
    else: Lightning's aliases (``bf16``, ``32-true``, ...) are accepted.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    values: list[Any] | Literal["all"] = pydantic.Field(
        "all",
        description="`all` (every value of the axis valid for training), or a list of values, "
        "each by its value or one of Lightning's aliases.",
    )
    exclude: list[Any] = pydantic.Field(
        [], description="Values left out of `values`, e.g. `{values: all, exclude: [64]}`."
    )

    def resolve(self, name: str) -> list[str]:
        """The axis's canonical values, without duplicates and ``exclude``.

        ``all`` is in enum order; listed values keep their order.

        Raises:
            ConfigError: naming each value that is not valid for training.
        """
        valid = axis_choices(name)
        listed = [] if self.values == "all" else self.values
        errors: list[str] = []
        chosen = [_enum_value(name, v, errors) for v in listed]
        excluded = {_enum_value(name, v, errors) for v in self.exclude}
        if errors:
            raise ConfigError("; ".join(errors))
        values = valid if self.values == "all" else list(dict.fromkeys(chosen))
        return [v for v in values if v not in excluded]


def _enum_value(name: str, value: Any, errors: list[str]) -> str:
    """The canonical value of an enum axis's ``value``; appends to ``errors`` if invalid."""
    valid = axis_choices(name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # YAML reads 32 and 64 as numbers
    try:
        member = parse_setting(name, value)
    except SettingsError:
        canonical = None
    else:
        canonical = NONE if member is None else member.value
    if canonical not in valid:
        kind = ENUM_AXES[name].__name__
        errors.append(
            f"space.{name}: {value!r} is not a {kind} valid for training; "
            f"choose from {', '.join(valid)}"
        )
        return str(value)
    return canonical


class NumericAxis(pydantic.BaseModel):
    """A numeric (or categorical) task-param axis: exactly one of the kinds below.

    ``choice``/``grid`` take a list of values; ``uniform``, ``loguniform`` and ``randint``
    take ``[low, high]``.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    choice: list[Any] | None = pydantic.Field(
        None, description="A list of values, one of them drawn at a time (`tune.choice`)."
    )
    grid: list[Any] | None = pydantic.Field(
        None,
        description="A list of values, each one tried (`tune.grid_search`), crossed with the "
        "other grid axes; not with `search.algorithm: optuna`.",
    )
    uniform: tuple[float, float] | None = pydantic.Field(
        None,
        description="`[low, high]`: a number drawn uniformly between the two (`tune.uniform`).",
    )
    loguniform: tuple[float, float] | None = pydantic.Field(
        None,
        description="`[low, high]`, low above 0: a number drawn uniformly on a log scale "
        "(`tune.loguniform`), as for a learning rate.",
    )
    randint: tuple[int, int] | None = pydantic.Field(
        None, description="`[low, high]`: an integer between the two, both included."
    )

    @pydantic.model_validator(mode="after")
    def _exactly_one(self) -> NumericAxis:
        given = [kind for kind in NUMERIC_KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of {', '.join(NUMERIC_KINDS)}; got {given or 'none'}"
            )
        low_high = getattr(self, given[0])
        if given[0] in ("uniform", "loguniform", "randint") and not low_high[0] < low_high[1]:
            raise ValueError(f"{given[0]} needs low < high; got {list(low_high)}")
        if given[0] == "loguniform" and low_high[0] <= 0:
            raise ValueError(f"loguniform needs low > 0; got {list(low_high)}")
        if given[0] in ("choice", "grid") and not low_high:
            raise ValueError(f"{given[0]} needs at least one value")
        return self

    @property
    def kind(self) -> str:
        """Which of :data:`NUMERIC_KINDS` this axis is."""
        return next(kind for kind in NUMERIC_KINDS if getattr(self, kind) is not None)

    @property
    def args(self) -> Any:
        """The values (or bounds) of the axis."""
        return getattr(self, self.kind)


def is_grid(axis: Any) -> bool:
    """Whether ``axis`` is a numeric grid axis (every value is tried)."""
    return isinstance(axis, NumericAxis) and axis.kind == "grid"


def parse_axis(name: str, raw: Any) -> Any:
    """An enum axis (list of values), a NumericAxis, or a fixed value."""
    if name in ENUM_AXES:
        if isinstance(raw, Mapping):
            try:
                axis = EnumAxis.model_validate(raw)
            except pydantic.ValidationError as error:
                lines = describe_validation_error(error, f"space.{name}", model=EnumAxis)
                raise ConfigError("; ".join(lines)) from None
        elif raw == "all":
            axis = EnumAxis()
        elif isinstance(raw, list | str | int | float):
            axis = EnumAxis(values=raw if isinstance(raw, list) else [raw])
        else:
            raise ConfigError(f"space.{name}: {raw!r} is not 'all', a list or {{values, exclude}}")
        values = axis.resolve(name)
        if not values:
            raise ConfigError(f"space.{name}: no values left after exclude {axis.exclude}")
        return values
    if isinstance(raw, Mapping) and set(raw) & set(NUMERIC_KINDS):
        try:
            return NumericAxis.model_validate(raw)
        except pydantic.ValidationError as error:
            lines = describe_validation_error(error, f"space.{name}", fields=list(NUMERIC_KINDS))
            raise ConfigError("; ".join(lines)) from None
    if isinstance(raw, Mapping):
        raise ConfigError(
            f"space.{name}: {dict(raw)!r} is not an axis; use one of "
            f"{', '.join(NUMERIC_KINDS)} (e.g. {{loguniform: [1e-4, 1e-2]}}) or a fixed value"
        )
    return raw
