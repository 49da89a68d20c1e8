"""Inference throughput and serialized size of models, measured on the same batches.

A forward pass needs the model's inputs out of a validation batch: a LightningModule may
say how with ``forward_inputs(batch)`` (:data:`FORWARD_INPUTS_HOOK`); otherwise a tensor
batch is the input, a tuple or list batch's first element is (``(inputs, target)``), and
a dict batch passes the keys that ``forward`` names as keyword arguments.
"""

from __future__ import annotations

import inspect
import io
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from versatil.training.metric_names import SAMPLES_PER_SEC
from versatil.training.metrics import count_samples

__all__ = [
    "FORWARD_INPUTS_HOOK",
    "ForwardInputs",
    "call_forward",
    "count_batch_samples",
    "forward_inputs_for",
    SAMPLES_PER_SEC,
    "state_dict_size_mb",
]

FORWARD_INPUTS_HOOK = "forward_inputs"
"""The LightningModule method ``forward_inputs(batch)`` giving ``forward``'s inputs.

It returns a tuple (positional arguments), a dict (keyword arguments) or one object (the
only positional argument).
"""

ForwardInputs = Callable[[Any], Any]
"""``batch -> inputs``: a tuple (positional), a dict (keyword) or one positional argument."""


def _default_inputs(module: nn.Module, batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return (batch,)
    if isinstance(batch, tuple | list) and batch:
        return (batch[0],)
    if isinstance(batch, Mapping):
        parameters = inspect.signature(module.forward).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return dict(batch)
        names = {p.name for p in parameters}
        inputs = {key: value for key, value in batch.items() if key in names}
        if inputs:
            return inputs
        raise ValueError(
            f"the batch's keys {sorted(map(str, batch))} name no argument of "
            f"{type(module).__name__}.forward {sorted(names)}; define "
            f"{FORWARD_INPUTS_HOOK}(batch) on the module or pass forward_inputs"
        )
    raise ValueError(
        f"cannot tell the forward inputs of a {type(batch).__name__} batch; define "
        f"{FORWARD_INPUTS_HOOK}(batch) on the module or pass forward_inputs"
    )


def forward_inputs_for(
    module: nn.Module, forward_inputs: ForwardInputs | None = None
) -> ForwardInputs:
    """How to get ``module``'s forward inputs from a batch.

    The given function, else the module's ``forward_inputs`` hook, else the default rules
    (see the module docstring).
    """
    if forward_inputs is not None:
        return forward_inputs
    hook = getattr(module, FORWARD_INPUTS_HOOK, None)
    if callable(hook):
        return hook
    return lambda batch: _default_inputs(module, batch)


def call_forward(module: nn.Module, inputs: Any) -> Any:
    """``module(*inputs)``, ``module(**inputs)`` or ``module(inputs)`` per the inputs' type."""
    if isinstance(inputs, tuple):
        return module(*inputs)
    if isinstance(inputs, Mapping):
        return module(**inputs)
    return module(inputs)


def samples_per_sec(
    models: Sequence[nn.Module],
    inputs: Sequence[Any],
    samples: int,
    *,
    repeats: int = 5,
    warmup: int = 1,
) -> list[float]:
    """Inference throughput of each model over the same inputs: forward passes only.

    Each model runs ``warmup`` untimed passes over ``inputs``, then ``repeats`` timed
    passes; the models take turns pass by pass, so a slow spell on a shared machine hits
    them alike. A model's throughput is ``samples`` over its median pass time.

    Args:
        models: The models, in eval mode, on the inputs' device.
        inputs: Each batch's forward inputs (see :func:`call_forward`).
        samples: The samples in one pass over ``inputs`` (see :func:`count_batch_samples`).
        repeats: Timed passes per model (at least 1).
        warmup: Untimed passes per model before the timed ones.

    Returns:
        Samples per second, one per model.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if not inputs:
        raise ValueError("no batches to measure throughput on")
    times: list[list[float]] = [[] for _ in models]
    with torch.no_grad():
        for _ in range(warmup):
            for model in models:
                _run_pass(model, inputs)
        for _ in range(repeats):
            for index, model in enumerate(models):
                times[index].append(_run_pass(model, inputs))
    return [samples / max(statistics.median(t), 1e-12) for t in times]


def count_batch_samples(module: nn.Module, batches: Iterable[Any]) -> int:
    """The samples in ``batches``, counted as the training throughput counts them.

    The module's ``count_samples(batch)`` hook if it has one, else Lightning's batch size.
    """
    return sum(count_samples(module, batch) for batch in batches)


def _run_pass(model: nn.Module, inputs: Iterable[Any]) -> float:
    start = time.perf_counter()
    for item in inputs:
        call_forward(model, item)
    return time.perf_counter() - start


def state_dict_size_mb(module: nn.Module) -> float:
    """The size of ``torch.save(module.state_dict())`` in MiB (2**20 bytes)."""
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    return buffer.getbuffer().nbytes / 2**20
