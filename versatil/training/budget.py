"""A fit's budget: what bounds it, and the check that an endless epoch is bounded.

A task's training loader may have no length: an ``IterableDataset`` streaming tokens
forever. Its epoch never ends, so ``max_epochs`` alone never ends the fit; Lightning
would train until killed, printing nothing. Whether a stream ends cannot be known
without reading it to its end, so :class:`EndlessEpochCheck` stops any fit whose loader
has no length as it starts, unless a step, batch or time budget bounds it, naming the
options that would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import lightning as L

from versatil.errors import ConfigError

__all__ = ["EndlessEpochCheck", "EveryTrialError", "is_unbounded"]


class EveryTrialError(ConfigError):
    """A problem of the task or its Trainer options that every trial meets the same way."""


def is_unbounded(options: Mapping[str, Any]) -> bool:
    """Whether only epochs bound a fit with these Trainer options.

    Args:
        options: The fit's Trainer options (``max_steps``, ``max_time``, ...).
    """
    steps = options.get("max_steps", -1)
    if isinstance(steps, int) and steps >= 0:
        return False
    batches = options.get("limit_train_batches")
    return options.get("max_time") is None and not (
        isinstance(batches, int) and not isinstance(batches, bool)
    )


class EndlessEpochCheck(L.Callback):
    """Stops a fit whose training loader never ends while only epochs bound it.

    Args:
        task: The task's name, for the message.
        options: The fit's Trainer options.
    """

    def __init__(self, task: str, options: Mapping[str, Any]) -> None:
        self.task = task
        self.unbounded = is_unbounded(options)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Raises :class:`EveryTrialError` when the epoch is endless and unbounded."""
        if not self.unbounded or not math.isinf(trainer.num_training_batches):
            return
        raise EveryTrialError(
            f"trainer.max_steps: the training loader of task {self.task!r} has no length (a "
            "stream, such as an IterableDataset), so nothing says that an epoch ends, and "
            "trainer.max_epochs alone would train an endless stream forever; set "
            "trainer.max_steps to budget it in steps, trainer.limit_train_batches to the "
            "batches of an epoch of a stream that ends, or trainer.max_time"
        )
