"""Published dense peaks of known GPUs per compute dtype: the denominators of MFU.

Every value is the vendor's datasheet figure **without sparsity** (datasheets print the
tensor-core rates "with sparsity", twice the dense rate, and mark them with an asterisk;
those are halved here). ``fp32-highest`` is the plain FP32 rate (CUDA cores);
``fp32-high`` and ``fp32-medium`` are TF32 (torch lets cuBLAS use TF32 for both);
``fp64`` is the FP64 Tensor Core rate, which cuBLAS's double-precision GEMM uses.
A device that is not listed, or a dtype its datasheet does not give, has no peak: MFU is
then left out, never guessed.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["PEAKS", "Peak", "peak_for"]


@dataclasses.dataclass(frozen=True)
class Peak:
    """One GPU's dense peaks.

    Attributes:
        name: The GPU as the table names it.
        pattern: A regular expression matched against ``torch.cuda.get_device_name()``.
        tflops: Dense peak TFLOP/s per compute dtype.
        source: Where the figures come from.
    """

    name: str
    pattern: str
    tflops: dict[str, float]
    source: str


def _peaks(fp32: float, tf32: float, half: float, fp64: float | None) -> dict[str, float]:
    values = {"fp32-highest": fp32, "fp32-high": tf32, "fp32-medium": tf32}
    values |= {"bf16": half, "fp16": half}
    return values | ({"fp64": fp64} if fp64 is not None else {})


_HOPPER = "https://www.nvidia.com/en-us/data-center/h100/ (H100 datasheet)"
PEAKS: tuple[Peak, ...] = (
    Peak(
        "A100 (SXM4 and PCIe, 40 and 80 GB)",
        r"\bA100\b",
        _peaks(19.5, 156.0, 312.0, 19.5),
        "https://www.nvidia.com/en-us/data-center/a100/ (A100 datasheet)",
    ),
    Peak("H100 PCIe", r"\bH100\b.*\bPCIe\b", _peaks(51.0, 378.0, 756.0, 51.0), _HOPPER),
    Peak("H100 NVL", r"\bH100\b.*\bNVL\b", _peaks(60.0, 417.5, 835.5, 60.0), _HOPPER),
    Peak("H100 SXM", r"\bH100\b(?!.*\b(PCIe|NVL)\b)", _peaks(67.0, 494.5, 989.5, 67.0), _HOPPER),
    Peak(
        "H200 NVL",
        r"\bH200\b.*\bNVL\b",
        _peaks(60.0, 417.5, 835.5, 60.0),
        "https://www.nvidia.com/en-us/data-center/h200/ (H200 datasheet)",
    ),
    Peak(
        "H200 SXM",
        r"\bH200\b(?!.*\bNVL\b)",
        _peaks(67.0, 494.5, 989.5, 67.0),
        "https://www.nvidia.com/en-us/data-center/h200/ (H200 datasheet)",
    ),
    Peak(
        "L40S",
        r"\bL40S\b",
        _peaks(91.6, 183.0, 362.05, None),
        "https://www.nvidia.com/en-us/data-center/l40s/ (L40S datasheet)",
    ),
    Peak(
        "L4",
        r"\bL4\b",
        _peaks(30.3, 60.0, 121.0, None),
        "https://www.nvidia.com/en-us/data-center/l4/ (L4 datasheet)",
    ),
)
"""The table; the first entry whose pattern matches a device's name is its peak."""


def peak_for(device_name: str) -> Peak | None:
    """The published peaks of the GPU named ``device_name``; ``None`` when not listed."""
    for peak in PEAKS:
        if re.search(peak.pattern, device_name, flags=re.IGNORECASE):
            return peak
    return None
