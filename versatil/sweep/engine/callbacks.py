"""Tune callbacks that survive ``Tuner.restore``: they forward to the live driver's ones.

Tune pickles a run's callbacks with its experiment state and a restored Tuner uses the
pickled ones (its API takes no new callbacks). :class:`DriverCallbacks` holds only a key,
the experiment directory's name; each driver, the resumed one included, registers its
live callbacks (progress lines, MLflow logging, a caller's own) under that key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from ray import tune

__all__ = ["DriverCallbacks", "registered"]

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
