"""Test instrumentation, not part of a user's task: what a module itself saw per epoch.

A module mixes this in and says how many samples a batch holds (``true_samples``); each
training epoch it logs ``truth/samples`` (the sum) and ``truth/span_s`` (from its first
batch's start to its last batch's end), so a test can recompute throughput independently
of versatil's own monitor.
"""

import time
from typing import Any


class SamplesTruth:
    """Mixin for a LightningModule; define ``true_samples(batch) -> int``."""

    def true_samples(self, batch: Any) -> int:
        raise NotImplementedError

    def on_train_epoch_start(self) -> None:
        self._truth_start = None

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self._truth_start is None:
            self._truth_start = time.perf_counter()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        span = time.perf_counter() - self._truth_start
        options = {"on_step": False, "on_epoch": True, "batch_size": 1}
        self.log("truth/samples", float(self.true_samples(batch)), reduce_fx="sum", **options)
        self.log("truth/span_s", span, reduce_fx="max", **options)
