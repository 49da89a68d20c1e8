"""FLOPs of one training step, counted on an eager copy of the user's LightningModule.

``torch.utils.flop_counter.FlopCounterMode`` counts the matrix products and convolutions
of one ``training_step`` and its backward on a real batch: the same FLOPs Lightning's and
torchtitan's MFU count (the optimizer's step and elementwise ops are not counted).
Compiled modules do not count reliably, so the count runs on a deep copy whose compiled
forwards are removed: a compiled trial counts what its eager twin counts. The copy shares
nothing with the fit (its own parameters, gradients and buffers; the RNG state is restored
afterwards), so counting changes no training result.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from typing import Any

import lightning as L
import torch
from torch.utils.flop_counter import FlopCounterMode

from versatil.training.metrics import count_samples

__all__ = ["FlopCount", "count_training_flops"]


class FlopCount:
    """FLOPs of one training step, or why they could not be counted.

    Attributes:
        flops: FLOPs of the step (forward and backward); ``None`` when not counted.
        samples: The samples in the batch, counted the way throughput counts them.
        reason: Why the FLOPs were not counted; ``None`` when they were.
    """

    def __init__(self, flops: int | None, samples: int, reason: str | None = None) -> None:
        self.flops = flops
        self.samples = samples
        self.reason = reason

    @property
    def per_sample(self) -> float | None:
        """FLOPs per sample; ``None`` when not counted."""
        if self.flops is None or self.samples <= 0:
            return None
        return self.flops / self.samples


def _eager_copy(module: L.LightningModule, trainer: L.Trainer | None) -> L.LightningModule:
    """A deep copy of ``module`` without its trainer and without compiled forwards."""
    memo: dict[int, Any] = {}
    if trainer is not None:
        memo[id(trainer)] = None  # the copy is not attached to the fit's trainer
        if trainer.datamodule is not None:
            memo[id(trainer.datamodule)] = trainer.datamodule  # shared, not copied
    twin = copy.deepcopy(module, memo)
    for sub in twin.modules():
        forward = sub.__dict__.get("forward")
        if forward is not None and hasattr(forward, "_torchdynamo_orig_callable"):
            del sub.__dict__["forward"]  # back to the class's eager forward
    return twin


def _loss_of(output: Any) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and isinstance(output.get("loss"), torch.Tensor):
        return output["loss"]
    return None


def count_training_flops(
    module: L.LightningModule, batch: Any, trainer: L.Trainer | None = None
) -> FlopCount:
    """Counts one ``training_step`` and its backward on ``batch``, on an eager copy.

    Never raises: what stops the count (an op the counter does not know, a module that
    cannot be copied, a step that needs its trainer) becomes the result's ``reason``.

    Args:
        module: The LightningModule being trained (compiled or not).
        batch: A training batch as the step receives it (on the device, converted).
        trainer: The fit's trainer: its precision plugin's step context is used, and the
            copy is detached from it.
    """
    samples = count_samples(module, batch)
    context = trainer.precision_plugin.train_step_context() if trainer else contextlib.nullcontext()
    devices = [module.device] if module.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # self.log() without a trainer warns
            twin = _eager_copy(module, trainer)
            twin.train()
            counter = FlopCounterMode(display=False)
            with counter:
                with context:
                    loss = _loss_of(twin.training_step(batch, 0))
                if loss is None:
                    return FlopCount(None, samples, "training_step returned no loss tensor")
                if loss.requires_grad:
                    loss.backward()
            flops = counter.get_total_flops()
    except Exception as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return FlopCount(None, samples, f"{type(error).__name__}: {text}"[:500])
    finally:
        twin = None
    if flops <= 0:
        return FlopCount(None, samples, "the counter found no matrix product or convolution")
    return FlopCount(int(flops), samples)
