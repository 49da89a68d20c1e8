"""INT8 dynamic quantization of ``nn.Linear`` layers: the two backends and how to pick one.

``torchao`` (an optional dependency) is the maintained path:
``quantize_(model, Int8DynamicActivationInt8WeightConfig())`` swaps every Linear weight
for an int8 tensor subclass, in place. ``torch.ao`` is the fallback that ships with torch:
``torch.ao.quantization.quantize_dynamic`` swaps every Linear for a
``DynamicQuantizedLinear`` (deprecated in recent torch, still working). Both quantize the
weights to int8 ahead of time and the activations at run time, on CPU; the model must be
float32. Their state dicts differ, so a checkpoint records which backend wrote it
(:data:`QUANTIZATION_KEY`) and a reload quantizes the same way before loading the weights.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib.metadata
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
from torch import nn

__all__ = [
    "QUANTIZATION_KEY",
    "QuantizationBackend",
    "QuantizationError",
    "choose_and_quantize",
    "load_quantized_state",
    "quantization_info",
    "quantize_int8",
    "quantized_like",
    "quiet_torch_ao",
    "torchao_available",
]

M = TypeVar("M", bound=nn.Module)

QUANTIZATION_KEY = "quantization"
"""The checkpoint key of the INT8 metadata: ``{"backend": ..., "scheme": ..., ...}``."""

SCHEME = "int8-dynamic-linear"
"""The one scheme: int8 weights, int8 activations quantized per batch, ``nn.Linear`` only."""

# torch.ao's quantization modules warn on import and on use that they are deprecated;
# the backend that ran is reported instead.
_TORCH_AO_NOISE = (
    r"torch\.ao\.quantization is deprecated.*",
    r".*quantized tensor creation functions.*",
    r"TypedStorage is deprecated.*",
)


class QuantizationBackend(enum.StrEnum):
    """The library that quantizes (and reloads) an INT8 model."""

    TORCHAO = "torchao"
    TORCH_AO = "torch.ao"


class QuantizationError(RuntimeError):
    """A model could not be quantized, or an INT8 checkpoint cannot be reloaded here."""


@contextlib.contextmanager
def quiet_torch_ao() -> Iterator[None]:
    """Silences torch.ao's deprecation warnings for the block."""
    with warnings.catch_warnings():
        for pattern in _TORCH_AO_NOISE:
            warnings.filterwarnings("ignore", message=pattern)
        yield


@contextlib.contextmanager
def _quiet_loggers(*names: str) -> Iterator[None]:
    """Raises the named loggers to ERROR for the block, then restores their levels."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@functools.cache
def _torchao() -> tuple[Any, Any] | None:
    """``(quantize_, Int8DynamicActivationInt8WeightConfig)``, or ``None`` without torchao.

    torchao logs a warning for each of its CUDA extensions that a CPU-only torch cannot
    load; those are silenced while it imports.
    """
    try:
        with _quiet_loggers("torchao", "torch.utils._pytree"):
            from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except Exception:  # ImportError, or a torchao built for another torch failing to load
        return None
    return quantize_, Int8DynamicActivationInt8WeightConfig


def torchao_available() -> bool:
    """Whether torchao imports here (it is an optional dependency)."""
    return _torchao() is not None


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def quantization_info(backend: QuantizationBackend) -> dict[str, str | None]:
    """The metadata stored under :data:`QUANTIZATION_KEY` in an INT8 checkpoint."""
    library = "torchao" if backend is QuantizationBackend.TORCHAO else "torch"
    return {"backend": backend.value, "scheme": SCHEME, "library_version": _version(library)}


def quantize_int8(model: M, backend: QuantizationBackend | str) -> M:
    """Quantizes every ``nn.Linear`` of a float32 ``model`` to INT8 (dynamic), in place.

    Args:
        model: A float32 model; it is changed in place and returned, in eval mode.
        backend: ``torchao`` or ``torch.ao``.

    Returns:
        ``model``, quantized.

    Raises:
        QuantizationError: when ``torchao`` is asked for and does not import, or the model
            is not float32.
    """
    backend = QuantizationBackend(backend)
    floating = [
        t.dtype
        for t in model.state_dict().values()
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]
    if any(dtype != torch.float32 for dtype in floating):
        raise QuantizationError(
            f"INT8 dynamic quantization needs a float32 model; this one holds "
            f"{sorted({str(d) for d in floating})}: convert it with model.float() first"
        )
    model.eval()
    if backend is QuantizationBackend.TORCHAO:
        torchao = _torchao()
        if torchao is None:
            raise QuantizationError(
                "the torchao backend needs the torchao package, which does not import here "
                "(pip install torchao)"
            )
        quantize_, config_type = torchao
        # set_inductor_config=False: the default would change torch._inductor's config for
        # the whole process, and workers are reused across trials.
        quantize_(model, config_type(set_inductor_config=False))
        return model
    with quiet_torch_ao():
        torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)
    return model


def choose_and_quantize(
    model: nn.Module,
    backend: QuantizationBackend | str | None,
    check: Callable[[nn.Module], object] | None = None,
) -> tuple[nn.Module, QuantizationBackend, str | None]:
    """Quantizes a copy of ``model`` with ``backend``, or picks one when it is ``None``.

    With ``backend=None`` torchao is tried first; when it is not installed, or quantizing
    or ``check`` (a forward pass, say) fails with it, the model is quantized with torch.ao
    instead. A backend named explicitly is used or fails.

    Args:
        model: The float32 model; left unchanged (each attempt quantizes a deep copy).
        backend: ``torchao``, ``torch.ao``, or ``None`` to choose.
        check: Called with the quantized model; raising rejects that backend.

    Returns:
        The quantized copy, the backend that produced it, and why torchao was not used
        (``None`` when it was, or when a backend was named).
    """
    import copy

    if backend is not None:
        chosen = QuantizationBackend(backend)
        quantized = quantize_int8(copy.deepcopy(model), chosen)
        if check is not None:
            with quiet_torch_ao():
                check(quantized)
        return quantized, chosen, None
    if not torchao_available():
        reason = "torchao is not installed"
    else:
        try:
            quantized = quantize_int8(copy.deepcopy(model), QuantizationBackend.TORCHAO)
            if check is not None:
                check(quantized)
            return quantized, QuantizationBackend.TORCHAO, None
        except Exception as error:
            reason = f"torchao failed on this model: {type(error).__name__}: {error}"
    quantized = quantize_int8(copy.deepcopy(model), QuantizationBackend.TORCH_AO)
    if check is not None:
        with quiet_torch_ao():
            check(quantized)
    return quantized, QuantizationBackend.TORCH_AO, reason


def quantized_like(model: M, info: dict[str, Any]) -> M:
    """Quantizes a freshly built float32 ``model`` the way ``info`` (from a checkpoint) says.

    Raises:
        QuantizationError: for an unknown backend or scheme, or torchao missing here.
    """
    try:
        backend = QuantizationBackend(info.get("backend"))
    except ValueError:
        raise QuantizationError(
            f"unknown INT8 backend {info.get('backend')!r} in the checkpoint; "
            f"known: {', '.join(b.value for b in QuantizationBackend)}"
        ) from None
    if info.get("scheme", SCHEME) != SCHEME:
        raise QuantizationError(f"unknown INT8 scheme {info.get('scheme')!r} in the checkpoint")
    if backend is QuantizationBackend.TORCHAO and not torchao_available():
        raise QuantizationError(
            "this INT8 checkpoint was quantized with torchao, which does not import here: "
            "pip install torchao to load it"
        )
    return quantize_int8(model, backend)


def load_quantized_state(model: nn.Module, state_dict: dict[str, Any]) -> None:
    """``model.load_state_dict(state_dict)`` with torch.ao's deprecation noise silenced."""
    with quiet_torch_ao():
        model.load_state_dict(state_dict)
