"""Tasks: factories that build a LightningModule and a LightningDataModule.

A task is named by a built-in name (``reaching``) or by ``"package.module:factory"``.
A factory takes the task's params (a mapping) and returns ``(module, datamodule)``, or the
module alone when it owns its dataloaders; it may carry a pydantic ``params_model``
attribute, used to validate params (before Ray starts) and fill defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import pydantic

from versatil.errors import ConfigError, describe_validation_error

__all__ = [
    "BUILTIN_TASKS",
    "TaskFactory",
    "build_task",
    "load_task",
    "params_model_for",
    "resolve_params",
]

TaskFactory = Callable[[Mapping[str, Any]], Any]

BUILTIN_TASKS: dict[str, str] = {"reaching": "versatil.training.tasks.reaching:build"}

# The built-in tasks' params models live in light modules: checking a sweep's params
# must not import torch or Lightning into the driver.
_BUILTIN_PARAMS: dict[str, tuple[str, str]] = {
    "reaching": ("versatil.training.tasks.reaching_params", "ReachingParams")
}


def _task_error(spec: str, problem: str) -> ConfigError:
    builtins = ", ".join(BUILTIN_TASKS)
    return ConfigError(
        f"task: {spec!r} {problem}; use a built-in task ({builtins}) or "
        f"'package.module:factory' naming an importable callable"
    )


def load_task(spec: str) -> TaskFactory:
    """Resolves a task name to its factory, importing the module.

    Raises:
        ConfigError: when the module, the attribute or the format is wrong.
    """
    path = BUILTIN_TASKS.get(spec, spec)
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise _task_error(spec, "is not a built-in task nor of the form 'package.module:factory'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise _task_error(spec, f"cannot be imported (no module named {error.name!r})") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise _task_error(spec, f"names no callable {attribute!r} in module {module_name!r}")
    return factory


def params_model_for(spec: str) -> type[pydantic.BaseModel] | None:
    """The pydantic model of the task's params, or ``None`` when the factory declares none.

    A user task's module is imported to find it (with whatever that module imports).
    """
    if spec in _BUILTIN_PARAMS:
        module_name, name = _BUILTIN_PARAMS[spec]
        return getattr(importlib.import_module(module_name), name)
    return getattr(load_task(spec), "params_model", None)


def resolve_params(spec: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The task's params with its defaults filled in from the factory's ``params_model``.

    A factory that declares no pydantic ``params_model`` gets ``params`` back as given.
    """
    model = params_model_for(spec)
    if model is None:
        return dict(params)
    return _validate(spec, model, params).model_dump(mode="json")


def build_task(spec: str, params: Mapping[str, Any]) -> tuple[Any, Any]:
    """Builds ``(module, datamodule)`` for ``spec``; bad params raise :class:`ConfigError`.

    The datamodule is ``None`` when the factory returns the module alone (or with
    ``None``): the module then brings its own dataloaders.
    """
    factory = load_task(spec)
    model = getattr(factory, "params_model", None)
    if model is not None:
        _validate(spec, model, params)
    built = factory(params)
    if isinstance(built, tuple | list):
        if len(built) != 2:
            raise _task_error(
                spec, f"returned {len(built)} values; a factory returns (module, datamodule)"
            )
        return built[0], built[1]
    return built, None


def _validate(spec: str, model: type[pydantic.BaseModel], params: Mapping[str, Any]) -> Any:
    try:
        return model(**params)
    except pydantic.ValidationError as error:
        lines = describe_validation_error(
            error, prefix="task.params", fields=list(model.model_fields)
        )
        raise ConfigError(f"task {spec!r}: " + "; ".join(lines)) from None
