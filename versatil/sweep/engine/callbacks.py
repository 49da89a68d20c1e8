"""Tune callbacks that survive ``Tuner.restore``: they forward to the live driver's ones.

Tune pickles a run's callbacks with its experiment state and a restored Tuner uses the
pickled ones (its API takes no new callbacks). :class:`DriverCallbacks` holds only a key,
the experiment directory's name; each driver, the resumed one included, registers its
live callbacks (progress lines, MLflow logging, a caller's own) under that key.

:class:`JsonLogger` and :class:`CsvLogger` write each trial's ``result.json`` and
``progress.csv`` as Tune's loggers do, but never replace the driver's copy of a file with
the one on the storage path (see :class:`_KeepsDriverCopy`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

__all__ = ["CsvLogger", "DriverCallbacks", "JsonLogger", "registered"]

_LIVE: dict[str, list[Any]] = {}

_EVENTS = (
    "setup",
    "on_step_begin",
    "on_step_end",
    "on_trial_start",
    "on_trial_restore",
    "on_trial_save",
    "on_trial_result",
    "on_trial_complete",
    "on_trial_recover",
    "on_trial_error",
    "on_checkpoint",
    "on_experiment_end",
)


@contextlib.contextmanager
def registered(key: str, callbacks: Sequence[Any]) -> Iterator[None]:
    """Makes ``callbacks`` receive the events of every ``DriverCallbacks(key)`` meanwhile."""
    _LIVE[key] = list(callbacks)
    try:
        yield
    finally:
        _LIVE.pop(key, None)


class DriverCallbacks(tune.Callback):
    """Forwards each of Tune's events to the callbacks registered under ``key``.

    Args:
        key: The sweep invocation's experiment directory name.
    """

    def __init__(self, key: str) -> None:
        self.key = key


def _forwarder(event: str) -> Any:
    def forward(self: DriverCallbacks, *args: Any, **kwargs: Any) -> None:
        for callback in _LIVE.get(self.key, ()):
            getattr(callback, event)(*args, **kwargs)

    forward.__name__ = event
    forward.__doc__ = f"Forwards ``{event}`` to the live callbacks."
    return forward


for _event in _EVENTS:
    setattr(DriverCallbacks, _event, _forwarder(_event))


class _KeepsDriverCopy:
    """Restores a trial's log file from the storage path only when the driver has none.

    Tune's loggers copy a trial's file from the storage path over the driver's own copy
    each time the trial starts with a checkpoint: every restart of a paused trial (PBT
    pauses every trial at each perturbation) and every retry. The storage path holds
    the driver's copy as of Tune's last periodic upload of the experiment directory
    (every 10 s or more), so the lines logged since then would be lost, and Tune's final
    upload would put the truncated file in their place. The driver's copy is the only
    source of the one on the storage path: where it exists, it holds every line there
    and more. A resumed run stages the experiment directory anew, without the trials'
    files: those are restored.
    """

    def _restore_from_remote(self, file_name: str, trial: Any) -> None:
        if Path(trial.local_path, file_name).exists():
            return
        super()._restore_from_remote(file_name, trial)  # type: ignore[misc]


class JsonLogger(_KeepsDriverCopy, JsonLoggerCallback):
    """Tune's ``JsonLoggerCallback`` (``result.json``), the driver's copy kept on restarts."""


class CsvLogger(_KeepsDriverCopy, CSVLoggerCallback):
    """Tune's ``CSVLoggerCallback`` (``progress.csv``), the driver's copy kept on restarts."""
