"""FLOPs of one training step, counted in the fit itself, on its first training batch.

:class:`StepFlops` enters ``torch.utils.flop_counter.FlopCounterMode`` when the fit's first
training batch starts and leaves it when that batch ends: it counts the matrix products
and convolutions of the real step (forward and backward), the same FLOPs Lightning's and
torchtitan's MFU count. The step runs inside the Trainer as every other step does, so
whatever a ``training_step`` needs is there: ``self.optimizers()`` and
``self.manual_backward()`` under manual optimization (with any number of optimizers),
``self.trainer``, ``self.log``. The counter only observes the ops (the same kernels run on
the same tensors, and no random number is drawn), so counting changes no result of an
eager fit. Validation runs outside training batches and is not counted. Only the first
batch is counted: a step whose work changes from batch to batch reports its first.

What is counted and what is not:

- Everything between the batch's start and its end: the module's batch hooks, the step,
  its backward, the optimizer's step. Elementwise ops are not counted, nor are the
  optimizer steps of the usual optimizers (SGD, Adam: no matrix product); an optimizer
  whose step multiplies matrices (Shampoo, Muon) has those products counted as well.
- A compiled module does not count reliably (inductor's kernels are not the ops the
  counter sees), so a compiled fit runs its first training batch eagerly, under
  ``torch.compiler.set_stance("force_eager")``, and counts it: a compiled trial counts
  what its eager twin counts. This was chosen over counting an eager copy of the module
  outside the step, which cannot run a step that needs its trainer. The first step's
  results are then eager's (equal up to floating-point rounding), and the compilation
  moves to the second batch, still within the warm-up that the throughput leaves out. A
  compiled fit whose first epoch has a single training batch is not counted: its only
  step runs compiled, so that the fit does compile.
"""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch
from torch.utils.flop_counter import FlopCounterMode
from typing_extensions import override

from versatil.training.metrics import count_samples

__all__ = ["FlopCount", "StepFlops", "is_compiled"]


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


def is_compiled(module: torch.nn.Module) -> bool:
    """Whether ``module`` or any of its submodules has a ``torch.compile``'d forward."""
    return any(
        hasattr(sub.__dict__.get("forward"), "_torchdynamo_orig_callable")
        for sub in module.modules()
    )


def _single_batch(trainer: L.Trainer) -> bool:
    """Whether the fit's first epoch (or what is left of its steps) is one training batch."""
    batches = trainer.num_training_batches
    if trainer.max_steps is not None and trainer.max_steps >= 0:
        batches = min(batches, trainer.max_steps - trainer.global_step)
    return not math.isinf(batches) and batches < 2


def _reason(error: Exception) -> str:
    """An error as a one-line reason: its type and its message's first line."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}"[:500]


class StepFlops(L.Callback):
    """Counts the FLOPs of the fit's first training batch, as the fit trains it.

    Read :attr:`count` once the first training batch has ended: ``None`` before. Install
    one per fit; see the module docstring for what is counted.
    """

    def __init__(self) -> None:
        self.count: FlopCount | None = None
        self._counter: FlopCounterMode | None = None
        self._stance: Any = None
        self._samples = 0

    @override
    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.count is not None or self._counter is not None:
            return
        self._samples = count_samples(pl_module, batch)
        compiled = is_compiled(pl_module)
        if compiled and _single_batch(trainer):
            reason = "a compiled fit of one training batch: its only step runs compiled"
            self.count = FlopCount(None, self._samples, reason)
            return
        try:
            # set_stance sets the stance at once; its __exit__ puts the previous one back.
            self._stance = torch.compiler.set_stance("force_eager") if compiled else None
            counter = FlopCounterMode(display=False)
            counter.__enter__()
        except Exception as error:  # counting never stops a fit
            self._close()
            self.count = FlopCount(None, self._samples, _reason(error))
            return
        self._counter = counter

    @override
    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        flops = self._close()
        if flops is None:
            return
        if flops <= 0:
            reason = "the counter found no matrix product or convolution"
            self.count = FlopCount(None, self._samples, reason)
        else:
            self.count = FlopCount(flops, self._samples)

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._counter is not None:  # the batch never ended: on_train_batch_start said -1
            self._close()
            reason = "the first training batch did not run to its end"
            self.count = FlopCount(None, self._samples, reason)

    @override
    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        self._close()

    @override
    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._close()

    def _close(self) -> int | None:
        """Leaves the counter and the eager stance, if entered; the FLOPs counted."""
        counter, stance = self._counter, self._stance
        self._counter, self._stance = None, None
        try:
            if counter is not None:
                counter.__exit__(None, None, None)
        finally:
            if stance is not None:
                stance.__exit__(None, None, None)
        return int(counter.get_total_flops()) if counter is not None else None
