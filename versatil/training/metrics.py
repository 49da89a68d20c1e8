"""Per-epoch throughput of a fit: samples/s, epoch time, peak memory, compile time."""

from __future__ import annotations

import resource
import time
from typing import Any

import lightning as L
import torch

__all__ = ["ThroughputMonitor"]


class ThroughputMonitor(L.Callback):
    """Measures each training epoch; read :attr:`epoch_metrics` at epoch end.

    ``epoch_time_s`` spans the epoch's training batches (validation excluded), so
    ``samples_per_sec`` is training throughput. ``peak_memory_mb`` is the CUDA allocator's
    peak for the epoch on GPU, and the process's peak resident set on CPU.
    ``compile_time_s`` (compiled runs only) is the first batch's time beyond a typical
    batch: where ``torch.compile`` traces and builds kernels.
    """

    def __init__(self, compiled: bool = False) -> None:
        self.compiled = compiled
        self.epoch_metrics: dict[str, float] = {}
        self._first_batch_s: float | None = None
        self._batch_times: list[float] = []

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if torch.cuda.is_available() and pl_module.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(pl_module.device)
        self._samples = 0
        self._batch_times = []
        self._epoch_start = self._last_end = time.perf_counter()

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._batch_start = time.perf_counter()

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        self._last_end = time.perf_counter()
        self._batch_times.append(self._last_end - self._batch_start)
        first = batch[0] if isinstance(batch, list | tuple) else batch
        self._samples += len(first)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        epoch_time = max(self._last_end - self._epoch_start, 1e-9)
        if pl_module.device.type == "cuda":
            peak_mb = torch.cuda.max_memory_allocated(pl_module.device) / 2**20
        else:
            peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        metrics = {
            "samples_per_sec": self._samples / epoch_time,
            "epoch_time_s": epoch_time,
            "peak_memory_mb": peak_mb,
        }
        if self.compiled:
            if self._first_batch_s is None and self._batch_times:
                rest = sorted(self._batch_times[1:]) or [0.0]
                self._first_batch_s = max(self._batch_times[0] - rest[len(rest) // 2], 0.0)
            metrics["compile_time_s"] = self._first_batch_s or 0.0
        self.epoch_metrics = metrics
