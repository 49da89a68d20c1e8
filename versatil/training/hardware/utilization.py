"""The callback that reports FLOPs, achieved FLOP/s, ceiling fraction, MFU and energy."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from typing_extensions import override

from versatil.training.hardware.ceiling import Ceiling, CeilingCache
from versatil.training.hardware.dtypes import compute_dtype
from versatil.training.hardware.energy import EnergyCounter, open_counter
from versatil.training.hardware.flops import StepFlops
from versatil.training.hardware.peaks import peak_for
from versatil.training.metric_names import (
    CEILING_FRACTION,
    CEILING_TFLOPS,
    FLOPS_PER_SAMPLE,
    JOULES_PER_SAMPLE,
    MFU,
    PEAK_TFLOPS,
    TFLOPS,
)
from versatil.training.metrics import count_samples
from versatil.training.spec import TrialSettings

__all__ = ["UtilizationMonitor", "utilization_of"]


class UtilizationMonitor(L.Callback):
    """Measures what a fit gets out of its device; read :meth:`epoch_metrics` at epoch end.

    - At fit start: the device's ceiling in the trial's compute dtype, from ``ceilings``
      (measured there once per machine), and the GPU's published peak where it is listed.
    - At the fit's first training batch: FLOPs per sample, counted in the real step by
      ``flops`` (:class:`~versatil.training.hardware.flops.StepFlops`, installed in the
      fit beside this monitor).
    - Over each epoch's batches past the warm-up: the energy counter's joules per sample.

    What cannot be measured is left out of the metrics, and :attr:`notes` says why.

    Args:
        settings: The trial's settings (its compute dtype).
        ceilings: Where the device's ceilings are cached; ``None``: no ceiling.
        warmup_steps: Training batches at the fit's start left out of the energy, as
            they are of the throughput.
        flops: The fit's FLOPs counter; ``None``: no FLOPs are reported.
    """

    def __init__(
        self,
        settings: TrialSettings,
        ceilings: CeilingCache | None,
        warmup_steps: int = 2,
        flops: StepFlops | None = None,
    ) -> None:
        self.dtype = compute_dtype(settings)
        self.ceilings = ceilings
        self.warmup_steps = warmup_steps
        self.flops = flops
        self.ceiling: Ceiling | None = None
        self.peak_tflops: float | None = None
        self.notes: dict[str, str] = {}
        self._counter: EnergyCounter | None = None
        self._fit_batches = 0
        self._span: tuple[float, int] | None = None  # (joules at its start, samples since)
        self._last_joules: float | None = None

    @override
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        device = pl_module.device
        if self.dtype is None:
            self.notes["ceiling"] = "INT8 runs no floating-point matrix products"
        elif self.ceilings is None:
            self.notes["ceiling"] = "no ceiling cache was given to this fit"
        else:
            try:
                self.ceiling = self.ceilings.get(device, [self.dtype])
            except Exception as error:
                self.notes["ceiling"] = f"measuring the ceiling failed: {error}"[:300]
        if device.type == "cuda":
            name = torch.cuda.get_device_name(device)
            peak = peak_for(name)
            if peak is None or self.dtype not in peak.tflops:
                self.notes["mfu"] = f"no published dense peak for {self.dtype} on {name}"
            else:
                self.peak_tflops = peak.tflops[self.dtype]
        else:
            self.notes["mfu"] = f"no published peak is used for {device.type} devices"
        self._counter, reason = open_counter(device)
        if reason is not None:
            self.notes["energy"] = reason

    @property
    def flops_per_sample(self) -> float | None:
        """The FLOPs of one training sample; ``None`` until counted, or when not counted."""
        count = self.flops.count if self.flops is not None else None
        return count.per_sample if count is not None else None

    @override
    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._span, self._last_joules = None, None
        if self._counter is not None and self._fit_batches >= self.warmup_steps:
            self._span = (self._counter.joules(), 0)

    @override
    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._fit_batches += 1
        if self._counter is None:
            return
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)  # read after the batch's kernels ran
        if self._span is not None:
            self._last_joules = self._counter.joules()
            self._span = (self._span[0], self._span[1] + count_samples(pl_module, batch))
        elif self._fit_batches == self.warmup_steps:
            self._span = (self._counter.joules(), 0)
            self._last_joules = None

    def epoch_metrics(self, samples_per_sec: float | None) -> dict[str, float]:
        """The epoch's hardware metrics, given its steady-state samples/s."""
        metrics: dict[str, float] = {}
        flops_per_sample = self.flops_per_sample
        count = self.flops.count if self.flops is not None else None
        if count is not None and count.reason is not None:
            self.notes["flops"] = f"FLOPs not counted: {count.reason}"
        if flops_per_sample is not None:
            metrics[FLOPS_PER_SAMPLE] = flops_per_sample
            if samples_per_sec:
                metrics[TFLOPS] = flops_per_sample * samples_per_sec / 1e12
        ceiling = self.ceiling.tflops.get(self.dtype or "") if self.ceiling else None
        if ceiling:
            metrics[CEILING_TFLOPS] = ceiling
            if TFLOPS in metrics:
                metrics[CEILING_FRACTION] = metrics[TFLOPS] / ceiling
        if self.peak_tflops:
            metrics[PEAK_TFLOPS] = self.peak_tflops
            if TFLOPS in metrics:
                metrics[MFU] = metrics[TFLOPS] / self.peak_tflops
        if self._span is not None and self._span[1] > 0 and self._last_joules is not None:
            metrics[JOULES_PER_SAMPLE] = (self._last_joules - self._span[0]) / self._span[1]
        elif self._counter is not None and "energy" not in self.notes:
            self.notes["energy"] = "no training batch past the warm-up to measure energy over"
        return metrics


def utilization_of(trainer: L.Trainer) -> UtilizationMonitor | None:
    """The fit's :class:`UtilizationMonitor` among the trainer's callbacks, if any."""
    for callback in trainer.callbacks:
        if isinstance(callback, UtilizationMonitor):
            return callback
    return None
