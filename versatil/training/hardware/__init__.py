"""What a fit gets out of its device.

FLOPs per sample, achieved FLOP/s, the device's measured ceiling, MFU against published
peaks, and energy per sample.

- :mod:`.dtypes`: the compute dtype a setting's matmuls run in (``fp32-high``, ``bf16``, ...).
- :mod:`.flops`: FLOPs of one training step, counted in the fit's first training batch.
- :mod:`.ceiling`: the dense matmul FLOP/s the device reaches per compute dtype, measured
  once per host, device and torch version and cached in a shared directory.
- :mod:`.peaks`: published dense peaks of known GPUs, each with its source.
- :mod:`.energy`: NVML's and RAPL's energy counters, where readable.
- :mod:`.utilization`: the callback that puts them together in each epoch's metrics.
"""
