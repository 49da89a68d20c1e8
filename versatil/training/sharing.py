"""How many fits share a fit's device while it is timed: a count sampled through each epoch.

The count comes from the caller, as a plain function (``tenants() -> int``, the fit itself
included); where it comes from (a registry of the processes a scheduler put on one GPU,
say) is no concern of training.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import lightning as L
from typing_extensions import override

from versatil.training.metric_names import DEVICE_TRIALS_MAX, DEVICE_TRIALS_MEAN, THROUGHPUT_SHARED

__all__ = ["SAMPLE_EVERY_S", "DeviceShareMonitor", "Tenants"]

Tenants = Callable[[], int]
"""How many fits hold the fit's device now, the fit itself included."""

SAMPLE_EVERY_S = 0.05
"""The least time between two samples of the count after training batches."""


class DeviceShareMonitor(L.Callback):
    """Samples how many fits share the device; read :attr:`epoch_metrics` at epoch end.

    The count is sampled at each training epoch's start and end, and after training
    batches at most every ``every_s`` seconds, so a fit of many short batches pays for a
    few samples only. Keys of :attr:`epoch_metrics`:

    - ``device_trials_max``: the most fits seen on the device during the epoch.
    - ``device_trials_mean``: the mean of the epoch's samples.
    - ``throughput_shared``: 1 when any epoch of the fit so far (since it started, or
      was restored) saw more than one: the fit's windowed throughput, which spans its
      epochs (:class:`~versatil.training.metrics.ThroughputMonitor`), was timed shared.
    """

    def __init__(self, tenants: Tenants, every_s: float = SAMPLE_EVERY_S) -> None:
        """Sets up the monitor.

        Args:
            tenants: How many fits hold the device now, this one included.
            every_s: The least time between two samples after training batches.
        """
        self.tenants = tenants
        self.every_s = every_s
        self.epoch_metrics: dict[str, float] = {}
        self._shared = False
        self._samples: list[int] = []
        self._last = -float("inf")

    def _sample(self) -> None:
        self._samples.append(max(int(self.tenants()), 1))
        self._last = time.perf_counter()

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._shared = False

    @override
    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._samples = []
        self._sample()

    @override
    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if time.perf_counter() - self._last >= self.every_s:
            self._sample()

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._sample()
        most = max(self._samples)
        self._shared = self._shared or most > 1
        self.epoch_metrics = {
            DEVICE_TRIALS_MAX: float(most),
            DEVICE_TRIALS_MEAN: statistics.fmean(self._samples),
            THROUGHPUT_SHARED: float(self._shared),
        }
