"""Post-training INT8 quantization of trained models.

INT8 cannot train (``PrecisionType.INT8``): it is reached only from a model trained in
another precision.

- ``backends``: the two INT8 backends (torchao, torch.ao) and how one is chosen.
"""

from versatil.quantization.backends import (
    QuantizationBackend,
    QuantizationError,
    quantize_int8,
    torchao_available,
)

__all__ = [
    "QuantizationBackend",
    "QuantizationError",
    "quantize_int8",
    "torchao_available",
]
