"""The names of what a fit measures, defined once (torch-free: the driver reads them too)."""

from __future__ import annotations

__all__ = [
    "CEILING_FRACTION",
    "CEILING_TFLOPS",
    "COMPILE_TIME_S",
    "DEVICE_TRIALS_MAX",
    "DEVICE_TRIALS_MEAN",
    "EPOCH_TIME_S",
    "FLOPS_PER_SAMPLE",
    "HARDWARE_METRICS",
    "JOULES_PER_SAMPLE",
    "MFU",
    "PEAK_MEMORY_MB",
    "PEAK_TFLOPS",
    "SAMPLES_PER_SEC",
    "TFLOPS",
    "THROUGHPUT_METRICS",
    "THROUGHPUT_SHARED",
]

SAMPLES_PER_SEC = "samples_per_sec"
"""Steady-state training throughput of an epoch (its warm-up batches left out)."""

EPOCH_TIME_S = "epoch_time_s"
"""An epoch's wall time, warm-up and compilation included."""

PEAK_MEMORY_MB = "peak_memory_mb"
"""The epoch's peak memory: CUDA's allocator on a GPU, the process's resident set on CPU."""

COMPILE_TIME_S = "compile_time_s"
"""Time ``torch.compile`` took in its compiling batches (the warm-up, and any recompile), for
compiled fits only."""

THROUGHPUT_METRICS = (SAMPLES_PER_SEC, EPOCH_TIME_S, PEAK_MEMORY_MB, COMPILE_TIME_S)
"""The measurements every trial reports beside its objective, in the tables' order."""

FLOPS_PER_SAMPLE = "flops_per_sample"
"""FLOPs of one training step (forward and backward) per sample, counted in the fit's first."""

TFLOPS = "tflops"
"""Achieved TFLOP/s (10^12 FLOP/s): ``flops_per_sample`` x the epoch's ``samples_per_sec``."""

CEILING_TFLOPS = "ceiling_tflops"
"""The device's measured dense matmul TFLOP/s in the trial's compute dtype."""

CEILING_FRACTION = "ceiling_fraction"
"""``tflops / ceiling_tflops``: the share of what the device measurably reaches."""

PEAK_TFLOPS = "peak_tflops"
"""The GPU's published dense peak TFLOP/s in the trial's compute dtype (known GPUs only)."""

MFU = "mfu"
"""Model FLOPs utilization: ``tflops / peak_tflops`` (known GPUs only)."""

JOULES_PER_SAMPLE = "joules_per_sample"
"""Energy per training sample over the epoch's measured batches (where a counter is readable)."""

HARDWARE_METRICS = (FLOPS_PER_SAMPLE, TFLOPS, CEILING_FRACTION, MFU, JOULES_PER_SAMPLE)
"""The hardware measurements every trial reports where they can be measured."""

DEVICE_TRIALS_MAX = "device_trials_max"
"""The most fits (trials, or a data-parallel trial's ranks) on the fit's device during the
epoch's training, the fit itself included: 1 is alone. Reported where a device is shared."""

DEVICE_TRIALS_MEAN = "device_trials_mean"
"""The mean of the same count over the epoch's samples of it (at least every 50 ms)."""

THROUGHPUT_SHARED = "throughput_shared"
"""1 when an epoch of the fit so far had ``device_trials_max`` above 1: its throughput
(whose windows span the fit's epochs) was timed against other fits, and is not ranked on."""
