"""Applying settings to torch and Lightning: the one module that does so.

Training (:func:`versatil.training.fit.train`), inference (through
:func:`versatil.training.checkpoint.build_module`) and quantization's validation all apply
a :class:`~versatil.training.spec.TrialSettings` here, in this order, which torch requires:

1. :func:`reset_process_state`: undo what an earlier trial in this process set (default
   dtype, matmul precision back to ``highest``, dynamo's caches and the compile counters),
   then seed every RNG. Workers are reused across trials.
2. :func:`apply_settings`: set the matmul precision (process-wide, in the worker), build
   the model in float32, convert it to the lower dtype for the ``*-true`` precisions and
   ``64``, and compile its :func:`compile_targets` last.
3. :func:`trainer_precision`: the ``Trainer(precision=...)`` argument, so the Trainer
   autocasts the mixed precisions.

:func:`convert_for_inference` casts a loaded model to the dtype it runs inference in.
What the settings mean, and whether a device can run them, is
:mod:`versatil.training.spec`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import lightning
import torch
from torch import nn

from versatil.training.compile_health import reset_compile_counters
from versatil.training.constants import Float32MatmulPrecision, PrecisionType
from versatil.training.spec import TrialSettings

__all__ = [
    "apply_settings",
    "compile_targets",
    "convert_for_inference",
    "reset_process_state",
    "trainer_precision",
]

M = TypeVar("M", bound=nn.Module)

_TRUE_PRECISIONS = (PrecisionType.FP16_TRUE, PrecisionType.BF16_TRUE, PrecisionType.FP64)
"""The precisions whose model is converted to the lower dtype throughout."""


def reset_process_state(seed: int) -> None:
    """Undoes what an earlier trial in this process set, then seeds every RNG.

    Workers are reused across trials, and these settings are process-wide.

    Args:
        seed: Seeds torch, numpy and Python (and dataloader workers).
    """
    torch.set_default_dtype(torch.float32)
    torch.set_float32_matmul_precision(Float32MatmulPrecision.HIGHEST.value)
    torch._dynamo.reset()
    # dynamo's reset leaves its statistics: a trial's compile health is its own only
    # when they start from zero too.
    reset_compile_counters()
    lightning.seed_everything(seed, workers=True, verbose=False)


def compile_targets(module: nn.Module) -> list[nn.Module]:
    """The submodules that ``torch.compile`` is applied to.

    A LightningModule may define ``compile_targets()``; by default every direct child
    that holds parameters is compiled. Compiling the whole LightningModule fails in
    dynamo.

    Args:
        module: The (LightningModule) model.
    """
    custom = getattr(module, "compile_targets", None)
    if callable(custom):
        return list(custom())
    return [child for child in module.children() if any(True for _ in child.parameters())]


def apply_settings(settings: TrialSettings, build_model: Callable[[], M]) -> M:
    """Applies ``settings`` and builds the model: the one place that does so.

    Call it inside the worker process that trains, after :func:`reset_process_state`.

    Args:
        settings: The trial's settings (already checked for feasibility).
        build_model: Builds the (LightningModule) model in float32.

    Returns:
        The model, converted and compiled as the settings say.
    """
    # (1) Matmul precision is process-wide: set it here, in the worker, never only in
    # the driver. None means torch's default, set explicitly so a reused worker does
    # not inherit the previous trial's value.
    matmul = settings.matmul_precision or Float32MatmulPrecision.HIGHEST
    torch.set_float32_matmul_precision(matmul.value)
    # (2) Build the model in float32.
    model = build_model()
    # (3) The *-true precisions train in the lower dtype throughout; the mixed ones keep
    # float32 parameters and Lightning's precision plugin autocasts (trainer_precision).
    if settings.precision in _TRUE_PRECISIONS:
        model = model.to(settings.precision.get_model_dtype())
    # (4) Compile last, inside the worker: compiled modules do not pickle.
    # Each target's forward is compiled in place: state-dict keys stay unchanged (no
    # ``_orig_mod.`` prefix), so compiled and eager checkpoints are interchangeable.
    # (``nn.Module.compile()`` silently runs eagerly in torch 2.13: dynamo skips
    # ``Module._call_impl``.)
    if settings.compile_mode is not None:
        for target in compile_targets(model):
            target.forward = torch.compile(target.forward, mode=settings.compile_mode.value)
    return model


def trainer_precision(settings: TrialSettings) -> str:
    """The ``Trainer(precision=...)`` argument for ``settings``: the precision's value.

    The Trainer is built after :func:`apply_settings`; its precision plugin autocasts the
    mixed precisions and leaves the others to the model's dtype.

    Args:
        settings: The settings the Trainer runs under.

    Returns:
        The precision as Lightning accepts it (``"32"``, ``"bf16-mixed"``, ...).
    """
    return settings.precision.value


def convert_for_inference(module: M, precision: PrecisionType) -> M:
    """Casts a loaded model to the dtype it runs inference in, when its precision says so.

    The mixed and ``*-true`` 16-bit precisions run inference in the lower dtype
    (:meth:`~versatil.training.constants.PrecisionType.should_convert_model`), which avoids
    bf16-input vs fp32-bias mismatches; the others keep the model's dtype.

    Args:
        module: The model, its weights loaded.
        precision: The precision it was trained in.

    Returns:
        The model, cast or unchanged.
    """
    if precision.should_convert_model():
        return module.to(precision.get_model_dtype())
    return module
