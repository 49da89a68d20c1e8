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
    FP32 = "32"
    FP16_MIXED = "16-mixed"
    BF16_MIXED = "bf16-mixed"
    FP16_TRUE = "16-true"
    BF16_TRUE = "bf16-true"
    FP64 = "64"

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
    TOKENIZER_DIR = "tokenizer"
    DEFAULT_CHECKPOINT = "last.ckpt"


class CheckpointKey(enum.StrEnum):
    """Keys inside checkpoint dicts and normalizer parameters."""

    STATE_DICT = "state_dict"
    INPUT_STATS = "input_stats"


class CompileMode(enum.StrEnum):
    """A ``torch.compile(mode=...)`` value."""

    DEFAULT = "default"
    REDUCE_OVERHEAD = "reduce-overhead"
    MAX_AUTOTUNE = "max-autotune"
    MAX_AUTOTUNE_NO_CUDAGRAPHS = "max-autotune-no-cudagraphs"

    def uses_cuda_graphs(self) -> bool:
        """Whether this mode captures CUDA graphs (and so needs a CUDA device)."""
        return self in (CompileMode.REDUCE_OVERHEAD, CompileMode.MAX_AUTOTUNE)


class Float32MatmulPrecision(enum.StrEnum):
    """A ``torch.set_float32_matmul_precision`` value."""

    HIGHEST = "highest"
    HIGH = "high"
    MEDIUM = "medium"
