"""The names of what a fit measures, defined once (torch-free: the driver reads them too)."""

from __future__ import annotations

__all__ = [
    "COMPILE_TIME_S",
    "EPOCH_TIME_S",
    "PEAK_MEMORY_MB",
    "SAMPLES_PER_SEC",
    "THROUGHPUT_METRICS",
]

SAMPLES_PER_SEC = "samples_per_sec"
"""Steady-state training throughput of an epoch (its warm-up batches left out)."""

EPOCH_TIME_S = "epoch_time_s"
"""An epoch's wall time, warm-up and compilation included."""

PEAK_MEMORY_MB = "peak_memory_mb"
"""The epoch's peak memory: CUDA's allocator on a GPU, the process's resident set on CPU."""

COMPILE_TIME_S = "compile_time_s"
"""Time ``torch.compile`` took in the first batches, for compiled fits only."""

THROUGHPUT_METRICS = (SAMPLES_PER_SEC, EPOCH_TIME_S, PEAK_MEMORY_MB, COMPILE_TIME_S)
"""The measurements every trial reports beside its objective, in the tables' order."""
