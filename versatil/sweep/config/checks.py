"""Checks of a sweep against its task and its storage path, before Ray starts.

The sweep file's schema is checked when it loads (:mod:`versatil.sweep.config.schema`); what
needs the task is checked here: the names and values of its params, when the task's
factory declares a pydantic ``params_model``. A factory without one takes any params, so
only the factory itself is checked (it must import); a typo in a param name then shows
only when the factory rejects or ignores it inside a trial.
"""

from __future__ import annotations

import os
from typing import Any

import pydantic

from versatil.errors import ConfigError, describe_validation_error, did_you_mean, first_line
from versatil.sweep.config.axes import ENUM_AXES, NumericAxis
from versatil.sweep.config.schema import SweepConfig
from versatil.sweep.storage import Storage
from versatil.sweep.vocab.keys import BOOKKEEPING, SEED
from versatil.training.metric_names import THROUGHPUT_METRICS
from versatil.training.tasks import params_model_for

__all__ = ["check_objectives", "check_storage", "check_task"]


def _samples(axis: Any) -> list[Any]:
    """Values an axis can take that stand for all of them: its choices, or its bounds."""
    if isinstance(axis, NumericAxis):
        return list(axis.args)
    return [axis]


def check_objectives(config: SweepConfig) -> None:
    """Checks that every objective can be a metric: not a bookkeeping key of a result.

    Whether the module logs it shows only in the first epoch (see
    :func:`~versatil.sweep.worker.reports.missing_objective`).

    Raises:
        ConfigError: naming each objective that is bookkeeping, and metrics to use instead.
    """
    field = "objective.metrics" if config.objective.metrics else "objective.metric"
    errors = [
        f"{field}: {metric!r} is bookkeeping of each result, not a metric; use a metric the "
        f"module logs (val_loss) or one versatil measures ({', '.join(THROUGHPUT_METRICS)})"
        for metric, _ in config.objective.objectives
        if metric in BOOKKEEPING
    ]
    if errors:
        raise ConfigError("; ".join(errors))


def check_task(config: SweepConfig) -> None:
    """Checks the objectives, then the task's params against its ``params_model``.

    The params are the fixed, swept and mutated ones.

    Raises:
        ConfigError: listing every unknown param name (with the valid ones) and every
            value the params model rejects, each under the field of the sweep file.
    """
    check_objectives(config)
    if config.task.config is not None:
        _check_cli_axes(config)
        return
    model = params_model_for(config.task.name)
    if model is None:
        return
    valid = sorted(model.model_fields)
    errors: list[str] = []
    named = [(f"task.params.{name}", name) for name in config.task.params]
    swept_params = [n for n in config.space if n not in ENUM_AXES and n != SEED]
    named += [(f"space.{name}", name) for name in swept_params]
    named += [
        (f"scheduler.hyperparam_mutations.{name}", name)
        for name in config.scheduler.hyperparam_mutations
        if name not in ENUM_AXES
    ]
    for field, name in named:
        if name not in model.model_fields:
            errors.append(
                f"{field}: {name!r} is not a param of task {config.task.name!r}"
                f"{did_you_mean(name, valid)}; valid params: {', '.join(valid)}"
            )
    if errors:
        raise ConfigError("; ".join(errors))
    # Values: the fixed params, then each swept value in turn (choices, or range bounds).
    errors += _value_errors(model, config.task.params, "task.params", None)
    swept = [("space", n, config.space[n]) for n in swept_params]
    mutations = config.scheduler.hyperparam_mutations.items()
    swept += [("scheduler.hyperparam_mutations", n, a) for n, a in mutations]
    for section, name, axis in swept:
        for value in _samples(axis):
            params = {**config.task.params, name: value}
            errors += _value_errors(model, params, section, name)
    if errors:
        raise ConfigError("; ".join(dict.fromkeys(errors)))


def _check_cli_axes(config: SweepConfig) -> None:
    """Checks every swept value of a LightningCLI config's keys against the file's classes.

    Raises:
        ConfigError: naming each axis whose value LightningCLI refuses, in its words.
    """
    from versatil.training.tasks.cli_config import read_cli_config

    text = config.task.config_text or ""
    swept = [n for n in config.space if n not in ENUM_AXES and n != SEED]
    mutations = config.scheduler.hyperparam_mutations
    swept += [n for n in mutations if n not in ENUM_AXES]
    errors = []
    for name in dict.fromkeys(swept):
        axis = config.space[name] if name in config.space else mutations[name]
        for value in _samples(axis):
            try:
                read_cli_config(text, {**config.task.params, name: value})
            except ConfigError as error:
                detail = str(error).removeprefix("task.config: ")
                errors.append(
                    f"space.{name}: {value!r} for task.config {config.task.config!r}: {detail}"
                )
    if errors:
        raise ConfigError("; ".join(errors))


def _value_errors(
    model: type[pydantic.BaseModel], params: dict[str, Any], section: str, only: str | None
) -> list[str]:
    """The params model's complaints about ``params``, under ``section`` (of ``only``)."""
    try:
        model(**params)
    except pydantic.ValidationError as error:
        fields = list(model.model_fields)
        return [
            f"{section}.{line}"
            for line in describe_validation_error(error, fields=fields)
            if only is None or line.startswith(f"{only}:")
        ]
    return []


def check_storage(config: SweepConfig) -> Storage:
    """Creates the storage path and proves it writable, before anything starts.

    On object storage, an object is written and deleted under the prefix: a missing
    bucket, wrong credentials or an unreachable endpoint fail here, not in a trial.

    Returns:
        The storage path, ready for Tune.

    Raises:
        ConfigError: naming ``storage_path``, its value and why it cannot be written.
    """
    storage = config.storage()
    if storage.remote:
        try:
            storage.probe()
        except (OSError, ValueError) as error:  # pyarrow's ArrowException is an OSError
            reason = first_line(error)
            raise ConfigError(
                f"storage_path: {storage.display()!r} cannot be written ({reason}); check "
                "that the bucket exists and that AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
                "AWS_ENDPOINT_URL (for an S3-compatible store), or the store's own "
                "credentials, are set where the sweep runs"
            ) from None
        return storage
    directory = config.storage_dir()
    probe = directory / f".versatil-write-check-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError(
            f"storage_path: {config.storage_path!r} cannot be written ({reason}: "
            f"{error.filename or directory}); choose a directory this user can create and "
            "write (every Ray node must reach it), e.g. storage_path: runs/sweeps"
        ) from None
    return storage
