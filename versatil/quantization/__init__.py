"""Post-training INT8 quantization of trained checkpoints.

:func:`post_training_compress` turns a checkpoint directory into an INT8 one and measures
the validation objective, inference throughput and model size before and after;
``load_for_inference`` reloads the INT8 directory. INT8 cannot train
(``PrecisionType.INT8``): it is reached only from a model trained in another precision.

- ``backends``: the two INT8 backends (torchao, torch.ao) and how one is chosen.
- ``evaluate``: the validation objective and batches, through Lightning's loop.
- ``benchmark``: inference throughput and serialized size on the same batches.
- ``compress``: :func:`post_training_compress` and :class:`CompressionResult`.
"""

from versatil.quantization.backends import (
    QuantizationBackend,
    QuantizationError,
    quantize_int8,
    torchao_available,
)
from versatil.quantization.compress import CompressionResult, post_training_compress

__all__ = [
    "CompressionResult",
    "QuantizationBackend",
    "QuantizationError",
    "post_training_compress",
    "quantize_int8",
    "torchao_available",
]
