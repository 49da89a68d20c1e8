"""The public enums of versatil: precisions, checkpoint names, compile and matmul modes.

Strings live at the edges (YAML, CLI, Ray Tune's ``param_space``, MLflow params); code
inside versatil speaks these members. This module imports torch only when a method that
returns a torch object is called, so the sweep driver can validate files without it.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "CheckpointFilename",
    "CheckpointKey",
    "CompileMode",
    "Float32MatmulPrecision",
    "PrecisionType",
]


class PrecisionType(enum.StrEnum):
    """A Lightning ``Trainer(precision=...)`` value.

    Lightning's own spellings are accepted as aliases, so
    ``PrecisionType(str(trainer.precision))`` works: ``"32-true"`` and ``"64-true"`` map
    to ``FP32``/``FP64``, the legacy ``"16"`` and ``"bf16"`` to the mixed types.
    """

    INT8 = "8"
    """Int8 weights: only for a trained model quantized after training, never trained in."""

    FP32 = "32"
    """Every weight, activation and gradient in float32 (Lightning's ``32-true``)."""

    FP16_MIXED = "16-mixed"
    """Float32 weights, float16 autocast for the ops that allow it, the loss scaled."""

    BF16_MIXED = "bf16-mixed"
    """Float32 weights, bfloat16 autocast for the ops that allow it; no loss scaling."""

    FP16_TRUE = "16-true"
    """Every weight and activation in float16, no float32 copy of the weights."""

    BF16_TRUE = "bf16-true"
    """Every weight and activation in bfloat16, no float32 copy of the weights."""

    FP64 = "64"
    """Every weight, activation and gradient in float64 (Lightning's ``64-true``)."""

    @classmethod
    def _missing_(cls, value: object) -> PrecisionType | None:
        text = str(value).strip().lower()
        return _PRECISION_ALIASES.get(text) or cls._value2member_map_.get(text)

    def model_dtype_name(self) -> str:
        """The name of :meth:`get_model_dtype`'s dtype (``"bfloat16"``), without torch.

        Raises:
            NotImplementedError: for ``INT8``, which needs post-training quantization.
        """
        if self is PrecisionType.INT8:
            raise NotImplementedError(
                "PrecisionType.INT8 has no training dtype: INT8 needs post-training "
                "quantization of a model trained in another precision (e.g. torch.ao."
                "quantization); train in 32, bf16-mixed or 16-mixed instead."
            )
        return _MODEL_DTYPE_NAMES[self]

    def get_model_dtype(self) -> torch.dtype:
        """The dtype a model of this precision computes in.

        For the mixed types this is the *lower* dtype: inference casts the model to it,
        which avoids bf16-input vs fp32-bias mismatches.

        Raises:
            NotImplementedError: for ``INT8``, which needs post-training quantization.
        """
        import torch

        return getattr(torch, self.model_dtype_name())

    def is_mixed(self) -> bool:
        """Whether parameters stay float32 while ops run in the lower dtype.

        Trainable parameters must stay float32 so that optimizer updates are not rounded away.
        """
        return self in (PrecisionType.FP16_MIXED, PrecisionType.BF16_MIXED)

    def autocast(self, device_type: str) -> torch.autocast:
        """An autocast context for ``device_type`` (``"cpu"``, ``"cuda"``, ...).

        Enabled only for the mixed types, with dtype :meth:`get_model_dtype`; for every
        other precision the context is disabled and changes nothing.
        """
        import torch

        if self.is_mixed():
            return torch.autocast(device_type=device_type, dtype=self.get_model_dtype())
        return torch.autocast(device_type=device_type, enabled=False)

    def should_convert_model(self) -> bool:
        """Whether the model is cast to :meth:`get_model_dtype` for inference."""
        return self in (
            PrecisionType.FP16_MIXED,
            PrecisionType.BF16_MIXED,
            PrecisionType.FP16_TRUE,
            PrecisionType.BF16_TRUE,
        )


_PRECISION_ALIASES: dict[str, PrecisionType] = {
    "32-true": PrecisionType.FP32,
    "64-true": PrecisionType.FP64,
    "16": PrecisionType.FP16_MIXED,
    "bf16": PrecisionType.BF16_MIXED,
}

# The lower dtype each trainable precision computes in (see get_model_dtype).
_MODEL_DTYPE_NAMES: dict[PrecisionType, str] = {
    PrecisionType.FP32: "float32",
    PrecisionType.FP16_MIXED: "float16",
    PrecisionType.BF16_MIXED: "bfloat16",
    PrecisionType.FP16_TRUE: "float16",
    PrecisionType.BF16_TRUE: "bfloat16",
    PrecisionType.FP64: "float64",
}


class CheckpointFilename(enum.StrEnum):
    """Names inside a checkpoint directory."""

    CONFIG = "config.yaml"
    """The run's resolved ``TrainConfig``, enough to rebuild the model."""

    TOKENIZER_DIR = "tokenizer"
    """The task's tokenizer (``save_pretrained``), for a task that has one."""

    DEFAULT_CHECKPOINT = "last.ckpt"
    """The Lightning checkpoint of the last epoch written."""


class CheckpointKey(enum.StrEnum):
    """Keys inside checkpoint dicts and normalizer parameters."""

    STATE_DICT = "state_dict"
    """The model's weights, in Lightning's checkpoint dict."""

    INPUT_STATS = "input_stats"
    """The input normalizer's statistics, as plain lists."""


class CompileMode(enum.StrEnum):
    """A ``torch.compile(mode=...)`` value."""

    DEFAULT = "default"
    """Inductor's fused kernels, balancing compile time against speed; no CUDA graphs."""

    REDUCE_OVERHEAD = "reduce-overhead"
    """CUDA graphs cut Python and kernel-launch overhead, at the cost of memory."""

    MAX_AUTOTUNE = "max-autotune"
    """Kernels autotuned (a long compile), plus CUDA graphs on a GPU."""

    MAX_AUTOTUNE_NO_CUDAGRAPHS = "max-autotune-no-cudagraphs"
    """Kernels autotuned, as ``max-autotune``, without CUDA graphs."""

    def uses_cuda_graphs(self) -> bool:
        """Whether this mode captures CUDA graphs (and so needs a CUDA device)."""
        return self in (CompileMode.REDUCE_OVERHEAD, CompileMode.MAX_AUTOTUNE)


class Float32MatmulPrecision(enum.StrEnum):
    """A ``torch.set_float32_matmul_precision`` value."""

    HIGHEST = "highest"
    """Float32 matmuls computed in float32 (torch's default)."""

    HIGH = "high"
    """Float32 matmuls may use TensorFloat32 or two bfloat16s each, where faster."""

    MEDIUM = "medium"
    """Float32 matmuls may use bfloat16 internally, where faster."""
