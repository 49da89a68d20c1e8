"""Loading a sweep file: read, parse, override, validate, and check its limits."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import pydantic

from versatil.errors import ConfigError, describe_validation_error
from versatil.sweep.config.axes import ENUM_AXES, is_grid
from versatil.sweep.config.cli_task import with_cli_config
from versatil.sweep.config.limits import MAX_SEED, MAX_TRIALS
from versatil.sweep.config.reference import reference_note
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.config.sweep_file import check_plain_data, parse_yaml, read_text

__all__ = [
    "apply_overrides",
    "check_limits",
    "load_sweep",
    "resolve_resources",
    "validate_sweep",
]


def load_sweep(
    path: Path | str, overrides: Mapping[str, Any] | None = None, notes: TextIO | None = None
) -> SweepConfig:
    """Reads and validates a sweep file, applying ``--set`` style overrides first.

    A valid sweep may still deserve a word: one that compares settings without eager fp32
    prints which setting is its reference (``note: ...``, see
    :func:`~versatil.sweep.config.reference.reference_note`) to ``notes``, standard error
    by default.

    Raises:
        ConfigError: listing every problem in the file; also when the file cannot be read
            or parsed (see :mod:`versatil.sweep.config.sweep_file`).
    """
    path = Path(path)
    source = str(path)
    data = parse_yaml(read_text(path), f"sweep file {source!r}")
    data = apply_overrides(data, overrides or {})
    try:
        check_plain_data(data)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    config = validate_sweep(data, source=source)
    check_limits(config, source)
    note = reference_note(config)
    if note is not None:
        print(f"note: {note}", file=notes or sys.stderr)
    return config


def validate_sweep(data: Mapping[str, Any], source: str = "sweep") -> SweepConfig:
    """Validates plain data into a SweepConfig, raising one ConfigError for all problems.

    A task given as a LightningCLI config (``task.config``) is read first, its Trainer
    options joining the trainer section (:func:`~versatil.sweep.config.cli_task.with_cli_config`).
    ``resources.gpu`` comes back resolved against ``trainer.accelerator`` (see
    :meth:`~versatil.sweep.config.sections.ResourcesSection.gpus_for`).
    """
    try:
        data = with_cli_config(data)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    try:
        config = SweepConfig.model_validate(data)
    except pydantic.ValidationError as error:
        lines = describe_validation_error(error, model=SweepConfig)
        raise ConfigError(f"{source}: " + "; ".join(lines)) from None
    return resolve_resources(config, source)


def resolve_resources(config: SweepConfig, source: str = "sweep") -> SweepConfig:
    """``config`` with ``resources.gpu`` set: as given, else from ``trainer.accelerator``.

    Raises:
        ConfigError: when ``trainer.accelerator`` trains on a GPU and ``resources.gpu``
            gives trials none.
    """
    accelerator = config.trainer.accelerator
    errors = config.resources.accelerator_errors(accelerator)
    if errors:
        raise ConfigError(f"{source}: " + "; ".join(errors))
    resources = config.resources.resolved(accelerator)
    return config.model_copy(update={"resources": resources})


def check_limits(config: SweepConfig, source: str = "sweep") -> None:
    """Rejects a valid-looking sweep that could not run: too many trials, seeds out of range.

    Raises:
        ConfigError: naming each field, its value and the limit.
    """
    errors = []
    for field, seed in (("search.seed", config.search.seed), ("trainer.seed", config.trainer.seed)):
        if seed is not None and not 0 <= seed <= MAX_SEED:
            errors.append(f"{field}: {seed} is out of range; use 0 to {MAX_SEED}")
    samples = config.search.num_samples
    combos = 1
    for name, axis in config.space.items():
        if name in ENUM_AXES and config.search.crosses_settings:
            combos *= len(axis)
        elif is_grid(axis):
            combos *= len(axis.args)
    replicates = config.replicates
    if samples > MAX_TRIALS or samples * combos * replicates > MAX_TRIALS:
        errors.append(
            f"search.num_samples: {samples} samples of {combos} grid combinations"
            + (f", {replicates} seeds each," if replicates > 1 else "")
            + f" are more than {MAX_TRIALS} trials"
        )
    last_seed = config.trainer.seed + replicates - 1
    if replicates > 1 and last_seed > MAX_SEED:
        errors.append(f"replicates: {replicates} seeds from trainer.seed run past {MAX_SEED}")
    if errors:
        raise ConfigError(f"{source}: " + "; ".join(errors))


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Sets dotted keys (``trainer.max_epochs``) in a copy of ``data``.

    Only the sections on an override's path are copied; ``data`` is left unchanged.

    Raises:
        ConfigError: when a dotted key has an empty part or runs through a value that is
            not a section.
    """
    result = dict(data)
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        if not all(part.strip() for part in (*parents, leaf)):
            raise ConfigError(f"--set {dotted}: empty name in the dotted key")
        node = result
        for depth, part in enumerate(parents):
            child = node.get(part, {})
            if not isinstance(child, Mapping):
                where = ".".join(parents[: depth + 1])
                raise ConfigError(f"--set {dotted}: {where} is not a section; it holds {child!r}")
            node[part] = dict(child)
            node = node[part]
        node[leaf] = value
    return result
