"""The compute dtype a setting's matrix products run in: the key of ceilings and peaks."""

from __future__ import annotations

from versatil.training.constants import Float32MatmulPrecision, PrecisionType
from versatil.training.spec import TrialSettings

__all__ = ["COMPUTE_DTYPES", "compute_dtype", "torch_dtype_of"]

COMPUTE_DTYPES = ("fp32-highest", "fp32-high", "fp32-medium", "bf16", "fp16", "fp64")
"""Every compute dtype, in the tables' order. ``fp32-<p>``: float32 tensors under
``torch.set_float32_matmul_precision(p)`` (on CUDA ``high`` and ``medium`` both let cuBLAS
use TF32; on CPU ``medium`` lets oneDNN use bfloat16)."""

_BY_PRECISION = {
    PrecisionType.FP16_MIXED: "fp16",
    PrecisionType.FP16_TRUE: "fp16",
    PrecisionType.BF16_MIXED: "bf16",
    PrecisionType.BF16_TRUE: "bf16",
    PrecisionType.FP64: "fp64",
}


def compute_dtype(settings: TrialSettings) -> str | None:
    """The compute dtype of ``settings``' matmuls; ``None`` for INT8 (no float matmuls).

    The mixed precisions autocast matmuls to their 16-bit dtype; the ``*-true`` ones and
    ``64`` compute in the model's dtype; ``32`` computes in float32 at the trial's matmul
    precision.
    """
    precision = settings.precision
    if precision is PrecisionType.INT8:
        return None
    if precision in _BY_PRECISION:
        return _BY_PRECISION[precision]
    matmul = settings.matmul_precision or Float32MatmulPrecision.HIGHEST
    return f"fp32-{matmul.value}"


def torch_dtype_of(key: str) -> tuple[str, str]:
    """``(torch dtype name, float32 matmul precision)`` a compute dtype is measured with."""
    if key.startswith("fp32-"):
        return "float32", key.removeprefix("fp32-")
    names = {"bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}
    if key not in names:
        raise ValueError(f"unknown compute dtype {key!r}; valid: {', '.join(COMPUTE_DTYPES)}")
    return names[key], "highest"
