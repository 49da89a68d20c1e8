"""Per-epoch throughput of a fit: steady-state samples/s, epoch time, peak memory, compile time."""

from __future__ import annotations

import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.data import extract_batch_size
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from typing_extensions import override

from versatil.stats import median_ci
from versatil.training.compile_health import CompileActivity
from versatil.training.metric_names import (
    COMPILE_TIME_S,
    EPOCH_TIME_S,
    PEAK_MEMORY_MB,
    SAMPLES_PER_SEC,
)

__all__ = ["COUNT_SAMPLES_HOOK", "MIN_WINDOWS", "WINDOW_S", "ThroughputMonitor", "count_samples"]

WINDOW_S = 0.15
"""The least training time one throughput sample covers: shorter windows are mostly noise
(a 12 ms window measured 47,000 to 150,000 samples/s on one trial)."""

MIN_WINDOWS = 3
"""Windows a fit needs before its throughput is trusted (and ranked on)."""

COUNT_SAMPLES_HOOK = "count_samples"
"""The LightningModule method ``count_samples(batch) -> int`` that overrides sample counting."""

# Linux: writing "5" to clear_refs resets the process's peak resident set (VmHWM).
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def count_samples(module: L.LightningModule, batch: Any) -> int:
    """The samples in one training batch.

    The module's own ``count_samples(batch)`` when it defines one (tokens for a language
    model, say); otherwise the batch size as Lightning infers it for ``self.log``: the
    first dimension of the first tensor found in tensors, lists, tuples, dicts, dataclasses
    and any nesting of them. A batch without tensors counts its length, or 1.
    """
    hook = getattr(module, COUNT_SAMPLES_HOOK, None)
    if callable(hook):
        return int(hook(batch))
    try:
        return extract_batch_size(batch)
    except (MisconfigurationException, RecursionError):
        return len(batch) if hasattr(batch, "__len__") else 1


def reset_peak_rss() -> bool:
    """Resets the process's peak resident set; ``False`` where the OS does not allow it."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mb(since_reset: bool) -> float:
    """The process's peak resident set in MiB.

    ``VmHWM`` when ``since_reset`` (the peak since :func:`reset_peak_rss`); otherwise, or
    where ``/proc`` is missing, ``ru_maxrss``: the peak over the process's whole life.
    """
    if since_reset:
        try:
            for line in _STATUS.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
        except (OSError, ValueError, IndexError):
            pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024  # bytes vs kB


class ThroughputMonitor(L.Callback):
    """Measures each training epoch; read :attr:`epoch_metrics` at epoch end.

    The first ``warmup_steps`` training batches of each fit (compilation, allocator and
    cache warm-up) are left out of the throughput, and so is any later batch during which
    dynamo compiled (a recompile after a guard failed, a backward compiled late, a CUDA
    graph recorded: :class:`~versatil.training.compile_health.CompileActivity`), from the
    end of the batch before it to its own end. Keys of :attr:`epoch_metrics`:

    - ``samples_per_sec``: steady-state training throughput,
      ``throughput_samples / throughput_time_s``. When the epoch has no batch past the
      warm-up (``throughput_steps == 0``) it falls back to ``samples_seen / epoch_time_s``,
      warm-up included.
    - ``throughput_steps``: the epoch's batches past the warm-up that did not compile
      (those measured).
    - ``throughput_samples``: the samples in those batches.
    - ``throughput_time_s``: wall time of those batches, each from the end of the batch
      before it (its own start, when it opens the epoch) to its end. It includes loading
      each batch, the step and the per-batch hooks; it excludes the epoch's data-loader
      start-up, validation (a batch after a validation counts from its own start) and
      the batches that compiled.
    - ``throughput_compile_batches``: the fit's batches past the warm-up left out so far
      because dynamo compiled during them.
    - ``samples_seen``: the samples in all the epoch's training batches.
    - ``epoch_time_s``: from the epoch's start to the end of its last training batch,
      less the validations between its batches (``trainer.val_check_interval``).
    - ``peak_memory_mb``: on GPU the CUDA allocator's peak for the epoch; on CPU the
      process's peak resident set during the epoch (``VmHWM``, reset at the epoch's start;
      where that reset is unavailable, the process's lifetime ``ru_maxrss``).
    - ``samples_per_sec_median``, ``samples_per_sec_ci_low``, ``samples_per_sec_ci_high``,
      ``samples_per_sec_cv``: the fit's steady-state throughput as a measurement. The
      measured batches are cut into windows of at least ``window_s`` seconds of training
      (consecutive batches; a window may span epochs, validation left out), each window
      one throughput sample; these are the median of the fit's windows so far, its 95%
      confidence interval (order statistics) and their coefficient of variation. A batch
      that compiled is in no window: the window it fell in is discarded, and the next
      one starts after it.
    - ``throughput_windows``: how many windows were measured so far in the fit.
    - ``throughput_window_s``: the length a window must reach.
    - ``throughput_too_short``: 1 when fewer than ``min_windows`` windows were measured:
      the timed work is too short to trust, and rankings do not use its throughput.
    - ``torch_threads``: the threads torch computes with (a trial's CPU share).
    - ``compile_time_s`` (compiled runs only): the step time (a batch's start to its end)
      of the warm-up batches (at least the first) and of the later batches that compiled,
      beyond the median step time of the later batches that did not: where
      ``torch.compile`` traces and builds kernels, recompiles included. The warm-up's share
      is settled at the first epoch with later batches; a later recompile adds its own.

    Samples are counted by :func:`count_samples`: a LightningModule may define
    ``count_samples(self, batch) -> int`` to count tokens, pixels or anything else. Under
    data parallelism every number is the reporting process's own (one rank's share).
    """

    def __init__(
        self,
        compiled: bool = False,
        warmup_steps: int = 2,
        window_s: float = WINDOW_S,
        min_windows: int = MIN_WINDOWS,
    ) -> None:
        """Sets up the monitor.

        Args:
            compiled: Report ``compile_time_s``.
            warmup_steps: Training batches at the start of each fit left out of the
                throughput (a resumed fit warms up again).
            window_s: The least training time one throughput sample covers.
            min_windows: Windows a fit needs before its throughput is trusted.
        """
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        if window_s <= 0 or min_windows < 1:
            raise ValueError(
                f"window_s must be > 0 and min_windows >= 1, got {window_s}, {min_windows}"
            )
        self.compiled = compiled
        self.warmup_steps = warmup_steps
        self.window_s = window_s
        self.min_windows = min_windows
        self.epoch_metrics: dict[str, float] = {}
        self._activity = CompileActivity()
        self._reset_fit()

    def _reset_fit(self) -> None:
        self._fit_batches = 0
        self._windows: list[float] = []  # samples/s of each closed window
        self._open_samples = 0
        self._open_time = 0.0
        self._first_times: list[float] = []  # compute seconds of the fit's first batches
        self._later_times: list[float] = []
        self._recompile_times: list[float] = []  # compute seconds of later batches that compiled
        self._compile_time_s: float | None = None
        self._compile_batches = 0

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._reset_fit()
        self._activity.install()  # after the fit's dynamo reset, which clears callbacks

    @override
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._activity.remove()

    @override
    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._activity.remove()

    @override
    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if torch.cuda.is_available() and pl_module.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(pl_module.device)
        self._rss_reset = reset_peak_rss()
        self._samples = 0
        self._steady_samples = 0
        self._steady_steps = 0
        self._steady_time = 0.0
        self._epoch_start = time.perf_counter()
        self._last_end: float | None = None
        self._validation_s = 0.0  # the epoch's validations between its training batches
        self._pending_validation_s = 0.0
        self._batch_end = self._epoch_start

    @override
    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._validation_start = time.perf_counter()

    @override
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A validation between training batches (trainer.val_check_interval) is not
        # training: the next batch's share starts at its own start, and the epoch's time
        # leaves the validation out once a training batch follows it.
        if trainer.sanity_checking or getattr(self, "_last_end", None) is None:
            return
        self._pending_validation_s = time.perf_counter() - self._validation_start
        self._last_end = None

    @override
    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._batch_start = time.perf_counter()
        self._validation_s += self._pending_validation_s
        self._pending_validation_s = 0.0
        if self._last_end is None:  # the batch's share of the time starts here
            self._last_marker = self._activity.marker()

    @override
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
        now = time.perf_counter()
        marker = self._activity.marker()
        compiled = marker != self._last_marker
        samples = count_samples(pl_module, batch)
        self._samples += samples
        if self._fit_batches >= self.warmup_steps:
            if compiled:
                # Not steady state: the batch and the window it fell in are left out.
                self._compile_batches += 1
                self._open_samples, self._open_time = 0, 0.0
            else:
                # This batch's share of the training time: since the batch before it ended
                # (its loading included), or since its own start when it opens the epoch.
                since = self._batch_start if self._last_end is None else self._last_end
                self._steady_samples += samples
                self._steady_steps += 1
                self._steady_time += now - since
                self._window_add(samples, now - since)
        self._record_step(now - self._batch_start, compiled)
        self._fit_batches += 1
        self._last_end = self._batch_end = now
        self._last_marker = marker

    def _record_step(self, compute: float, compiled: bool) -> None:
        """Files a batch's step time for the compile time estimate."""
        if self._fit_batches < max(self.warmup_steps, 1):
            self._first_times.append(compute)
        elif compiled:
            self._recompile_times.append(compute)
        elif self._compile_time_s is None:
            self._later_times.append(compute)

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        epoch_time = max(self._batch_end - self._epoch_start - self._validation_s, 1e-9)
        if self._steady_steps:
            measured = max(self._steady_time, 1e-9)
            samples_per_sec = self._steady_samples / measured
        else:
            measured = 0.0
            samples_per_sec = self._samples / epoch_time
        if pl_module.device.type == "cuda":
            peak_mb = torch.cuda.max_memory_allocated(pl_module.device) / 2**20
        else:
            peak_mb = peak_rss_mb(since_reset=self._rss_reset)
        metrics = {
            SAMPLES_PER_SEC: samples_per_sec,
            "throughput_steps": float(self._steady_steps),
            "throughput_samples": float(self._steady_samples),
            "throughput_time_s": measured,
            "samples_seen": float(self._samples),
            "throughput_compile_batches": float(self._compile_batches),
            EPOCH_TIME_S: epoch_time,
            PEAK_MEMORY_MB: peak_mb,
        }
        metrics.update(self._window_metrics(samples_per_sec))
        if self.compiled:
            metrics[COMPILE_TIME_S] = self._compile_time()
        self.epoch_metrics = metrics

    def _window_add(self, samples: int, seconds: float) -> None:
        """Adds one measured batch to the open window; closes it once it is long enough."""
        self._open_samples += samples
        self._open_time += seconds
        if self._open_time >= self.window_s:
            self._windows.append(self._open_samples / self._open_time)
            self._open_samples, self._open_time = 0, 0.0

    def _window_metrics(self, fallback: float) -> dict[str, float]:
        """The fit's throughput so far as a median of its windows, with its uncertainty."""
        too_short = len(self._windows) < self.min_windows
        metrics = {
            "throughput_windows": float(len(self._windows)),
            "throughput_window_s": self.window_s,
            "throughput_too_short": float(too_short),
            "torch_threads": float(torch.get_num_threads()),
        }
        if not self._windows:
            metrics[f"{SAMPLES_PER_SEC}_median"] = fallback
            return metrics
        # One window has no interval and no spread: those keys are left out, not invented.
        estimate = median_ci(self._windows)
        metrics[f"{SAMPLES_PER_SEC}_median"] = estimate.value
        if estimate.bounded:
            metrics[f"{SAMPLES_PER_SEC}_ci_low"] = estimate.low
            metrics[f"{SAMPLES_PER_SEC}_ci_high"] = estimate.high
        if estimate.cv is not None:
            metrics[f"{SAMPLES_PER_SEC}_cv"] = estimate.cv
        return metrics

    def _compile_time(self) -> float:
        """Compile seconds: the warm-up's, plus each later batch's that compiled.

        The warm-up's share is settled at the first epoch end with later batches (an
        estimate until then); each batch counts its step time beyond a typical step.
        """
        typical = self._typical_step()
        warm_up = self._compile_time_s
        if warm_up is None:
            warm_up = sum(max(t - typical, 0.0) for t in self._first_times)
            if self._later_times:
                self._compile_time_s = warm_up
        return warm_up + sum(max(t - typical, 0.0) for t in self._recompile_times)

    def _typical_step(self) -> float:
        """A step without compiling: the median of the later batches that did not compile.

        Before any, the median of the warm-up batches after the first (else 0).
        """
        if self._later_times:
            return statistics.median(self._later_times)
        return statistics.median(self._first_times[1:]) if self._first_times[1:] else 0.0
