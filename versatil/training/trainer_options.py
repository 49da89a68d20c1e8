"""Lightning ``Trainer`` options a user passes through: checked against Lightning itself.

A sweep's ``trainer`` section (and a ``TrainConfig``'s ``trainer``) takes the arguments
of :class:`lightning.pytorch.Trainer` as the user's own Trainer takes them: a budget in
steps or time (``max_steps``, ``max_time``), ``limit_train_batches``,
``val_check_interval``, ``accumulate_grad_batches``, ``gradient_clip_val``, ... and
``callbacks`` in LightningCLI's form (``class_path`` and ``init_args``). The names and
types are read from ``Trainer.__init__``'s signature, not from a list kept here, so a
newer Lightning's arguments pass; then a Trainer is built with them on the CPU, so that
a value Lightning refuses is refused at load, in Lightning's words.

The options versatil sets itself are refused with where they belong (:data:`OWNED`).
Lightning is imported only when there are options to check.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import types
import typing
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from versatil.errors import ConfigError, did_you_mean

__all__ = [
    "BUDGET_OPTIONS",
    "OWNED",
    "QUIET_DEFAULTS",
    "check_trainer_options",
    "instantiate_callbacks",
    "lightning_quiet",
    "step_options",
    "trainer_arguments",
]

OWNED: dict[str, str] = {
    "precision": "versatil sets it per trial from space.precision",
    "devices": "versatil sets it from resources (gpu, workers_per_trial)",
    "num_nodes": "versatil sets it from resources.workers_per_trial",
    "strategy": "versatil sets it from resources.workers_per_trial",
    "plugins": "versatil sets the precision plugin from space.precision and the cluster "
    "from resources",
    "logger": "versatil's tracking logs every trial to MLflow (the mlflow section)",
    "enable_checkpointing": "versatil keeps every trial's checkpoints (mlflow.log_checkpoints)",
    "barebones": "versatil's measurements need Lightning's callbacks and logging",
}
"""The Trainer arguments versatil sets itself, each with where it belongs instead."""

QUIET_DEFAULTS: dict[str, Any] = {
    "num_sanity_val_steps": 0,
    "enable_progress_bar": False,
    "enable_model_summary": False,
}
"""Where a trial's Trainer differs from Lightning's defaults unless the section sets them:
no sanity validation (it would be timed as training), no progress bar or model summary in
the workers' logs."""

BUDGET_OPTIONS = ("max_steps", "max_time", "limit_train_batches")
"""The options that bound a training epoch that never ends (an endless stream)."""

_NOT_A_STEP = (
    *BUDGET_OPTIONS,
    "min_steps",
    "min_epochs",
    "limit_val_batches",
    "val_check_interval",
    "check_val_every_n_epoch",
    "num_sanity_val_steps",
    "fast_dev_run",
    "callbacks",
)

# Set by the section itself (``trainer.max_epochs``, ``trainer.accelerator``), or by
# versatil for every fit: not options.
_SECTION = ("max_epochs", "accelerator", "self")


def _signature() -> tuple[dict[str, inspect.Parameter], dict[str, Any]]:
    """``Trainer.__init__``'s parameters and their resolved type hints."""
    import lightning.pytorch as pl

    init = pl.Trainer.__init__
    return dict(inspect.signature(init).parameters), typing.get_type_hints(init)


def check_trainer_options(
    options: Mapping[str, Any], prefix: str = "trainer", fields: Sequence[str] = ()
) -> dict[str, Any]:
    """``options`` checked against ``lightning.pytorch.Trainer``: names, types, values.

    Args:
        options: Trainer arguments by name, as a YAML file gives them.
        prefix: Where the options sit in the user's file, named in every message.
        fields: The section's own fields, suggested and listed beside the options.

    Returns:
        The options, as given.

    Raises:
        ConfigError: naming every bad option, its value and what is valid: an unknown
            name (with the closest valid one), one versatil owns (with where it
            belongs), a value of the wrong type, a callback that does not import, and a
            combination Lightning itself refuses.
    """
    if not options:
        return {}
    import pydantic

    parameters, hints = _signature()
    valid = sorted(n for n in parameters if n not in _SECTION and n not in OWNED)
    own = f"the section's fields ({', '.join(fields)}) and " if fields else ""
    problems = []
    for name, value in options.items():
        where = f"{prefix}.{name}"
        if name in OWNED:
            problems.append(f"{where}: versatil owns this Trainer option: {OWNED[name]}")
        elif name not in parameters or name in _SECTION:
            problems.append(
                f"{where}: unknown field, and not an argument of lightning.pytorch.Trainer"
                f"{did_you_mean(name, [*fields, *valid])}; valid: {own}Lightning's Trainer "
                f"arguments ({', '.join(valid)})"
            )
        elif name == "callbacks":
            problems += _callback_problems(value, where)
        else:
            adapter = pydantic.TypeAdapter(
                hints[name], config=pydantic.ConfigDict(arbitrary_types_allowed=True)
            )
            try:
                adapter.validate_python(value, strict=True)
            except pydantic.ValidationError:
                problems.append(
                    f"{where}: {value!r} is not of type {_type_name(hints[name])} (Trainer's type)"
                )
    problems += _interval_problems(options, prefix)
    if not problems:
        problems += _lightning_refusal(options, prefix)
    if problems:
        raise ConfigError("; ".join(problems))
    return dict(options)


def _type_name(hint: Any) -> str:
    """A type hint as a YAML file's reader writes it: ``int | float | null``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(dict.fromkeys(_type_name(a) for a in args))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if hint is type(None):
        return "null"
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


def _interval_problems(options: Mapping[str, Any], prefix: str) -> list[str]:
    """Lightning's rule for an integer ``val_check_interval`` longer than an epoch.

    Lightning refuses it at fit time unless ``check_val_every_n_epoch`` is null (it then
    counts the interval across epochs); where the epoch's length is known here (an
    integer ``limit_train_batches``), it is said at load.
    """
    interval = options.get("val_check_interval")
    batches = options.get("limit_train_batches")
    per_epoch = options.get("check_val_every_n_epoch", 1)
    if not isinstance(interval, int) or isinstance(interval, bool) or per_epoch is None:
        return []
    if not isinstance(batches, int) or isinstance(batches, bool) or interval <= batches:
        return []
    return [
        f"{prefix}.val_check_interval: {interval} training batches is longer than an epoch "
        f"({prefix}.limit_train_batches: {batches}); set {prefix}.check_val_every_n_epoch: "
        "null to validate every "
        f"{interval} batches across epochs, as Lightning requires"
    ]


_LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric", "lightning_fabric")


@contextlib.contextmanager
def lightning_quiet() -> Iterator[None]:
    """Keeps Lightning's info lines and warnings off, while it lasts.

    ``GPU available: ...``, ``Seed set to ...``, jsonargparse's deprecations: what building
    a Trainer or parsing a LightningCLI config prints, none of it actionable here.
    """
    loggers = [logging.getLogger(name) for name in _LIGHTNING_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _lightning_refusal(options: Mapping[str, Any], prefix: str) -> list[str]:
    """What Lightning says of ``options``, building a CPU Trainer with them; ``[]`` if fine."""
    import lightning.pytorch as pl

    kwargs = {k: v for k, v in options.items() if k != "callbacks"}
    try:
        with lightning_quiet():
            pl.Trainer(
                accelerator="cpu",
                devices=1,
                logger=False,
                enable_checkpointing=False,
                default_root_dir=None,
                **kwargs,
            )
    except Exception as error:  # Lightning's MisconfigurationException, ValueError, ...
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        names = ", ".join(f"{prefix}.{k}" for k in kwargs)
        return [f"{names}: Lightning refuses these Trainer options: {first}"]
    return []


def _callback_problems(value: Any, where: str) -> list[str]:
    """What is wrong with ``callbacks``: each a ``class_path``/``init_args`` mapping."""
    items = value if isinstance(value, list) else [value]
    problems = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]" if isinstance(value, list) else where
        try:
            _callback_class(item, at)
        except ConfigError as error:
            problems.append(str(error))
    return problems


def _callback_class(item: Any, at: str) -> tuple[type, dict[str, Any]]:
    """The callback class and init args of one ``class_path``/``init_args`` mapping.

    Raises:
        ConfigError: when ``item`` is not such a mapping, its class does not import or
            is not a Lightning callback, or its init args do not fit the class.
    """
    import lightning.pytorch as pl

    if not isinstance(item, Mapping) or not isinstance(item.get("class_path"), str):
        raise ConfigError(
            f"{at}: {item!r} is not a callback; give it as LightningCLI does: "
            "{class_path: package.module.Class, init_args: {...}}"
        )
    unknown = sorted(set(item) - {"class_path", "init_args"})
    if unknown:
        raise ConfigError(f"{at}: unknown keys {unknown}; valid keys: class_path, init_args")
    path, args = item["class_path"], item.get("init_args") or {}
    module_name, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ConfigError(
            f"{at}.class_path: {path!r} does not import ({error}); give a Callback class "
            "as package.module.Class, such as lightning.pytorch.callbacks.EarlyStopping"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, pl.Callback)):
        raise ConfigError(f"{at}.class_path: {path!r} is not a lightning.pytorch.Callback")
    if not isinstance(args, Mapping):
        raise ConfigError(f"{at}.init_args: {args!r} is not a mapping of {cls.__name__}'s args")
    try:
        inspect.signature(cls).bind(**args)
    except TypeError as error:
        raise ConfigError(f"{at}.init_args: {dict(args)!r} do not fit {path}: {error}") from None
    return cls, dict(args)


def instantiate_callbacks(options: Mapping[str, Any]) -> list[Any]:
    """The callbacks ``options["callbacks"]`` names, built (each fit gets new ones)."""
    value = options.get("callbacks") or []
    items = value if isinstance(value, list) else [value]
    built = []
    for index, item in enumerate(items):
        cls, args = _callback_class(item, f"trainer.callbacks[{index}]")
        built.append(cls(**args))
    return built


def step_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options that shape a training step (accumulation, clipping, ...).

    Without the budget, the validation cadence and the callbacks: what a timed fit of a
    few steps keeps.
    """
    return {k: v for k, v in options.items() if k not in _NOT_A_STEP}


def trainer_arguments() -> list[tuple[str, str, Any, str | None]]:
    """Every argument of ``lightning.pytorch.Trainer`` as the trainer section sees it.

    Returns:
        ``(name, type, a trial's default, where it belongs)`` in the signature's order
        (a trial's default is Lightning's but for :data:`QUIET_DEFAULTS`);
        the last is ``None`` for an option the section passes through, else why versatil
        owns it. The section's own fields (``max_epochs``, ``accelerator``) are left out.
    """
    parameters, hints = _signature()
    return [
        (
            name,
            _type_name(hints[name]),
            QUIET_DEFAULTS.get(name, parameter.default),
            OWNED.get(name),
        )
        for name, parameter in parameters.items()
        if name not in _SECTION
    ]
