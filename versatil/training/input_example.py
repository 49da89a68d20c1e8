"""A checkpoint's input example: a few rows of a real batch and the module's outputs on them.

The worker writes ``input_example.json`` into the checkpoint directory so the driver, which
imports no torch, can give the logged model an input example and a signature. The rows
are what ``versatil.inference_model``'s ``predict`` feeds to the forward: one array (the
forward's only positional input) or a dict of arrays (its keyword inputs). The forward's
inputs in a batch are found as the INT8 benchmark finds them: the module's
``forward_inputs(batch)`` hook, else the batch itself (a tensor), its first item (a tuple
or list) or the items naming the forward's arguments (a dict). When they cannot be told
(several positional inputs, a non-tensor, a forward argument the batch does not name),
no example is written.

File format (every array as ``{"dtype": ..., "data": nested lists}``; floats as float32)::

    {"inputs": ARRAY | {"dict": {name: ARRAY}}, "outputs": ARRAY | {"dict": ...} | {"list": [...]}}
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import torch

from versatil.files import atomic_write

__all__ = [
    "FORWARD_INPUTS_HOOK",
    "INPUT_EXAMPLE_FILENAME",
    "MAX_ROWS",
    "example_inputs",
    "example_outputs",
    "write_input_example",
]

log = logging.getLogger(__name__)

INPUT_EXAMPLE_FILENAME = "input_example.json"
"""The input example's file inside a checkpoint directory."""

MAX_ROWS = 4
"""The most rows of a batch an input example keeps."""

FORWARD_INPUTS_HOOK = "forward_inputs"
"""The LightningModule method ``forward_inputs(batch)`` giving ``forward``'s inputs."""


def _forward_parameters(module: torch.nn.Module) -> list[inspect.Parameter]:
    return list(inspect.signature(module.forward).parameters.values())


def _from_mapping(module: torch.nn.Module, batch: Mapping[str, Any]) -> dict[str, Any] | None:
    """The batch's items the forward takes by name; ``None`` if a required one is missing."""
    parameters = _forward_parameters(module)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(batch)
    named = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)]
    required = {p.name for p in named if p.default is inspect.Parameter.empty}
    inputs = {k: v for k, v in batch.items() if k in {p.name for p in named}}
    return inputs if inputs and required <= inputs.keys() else None


def _has_forward(module: torch.nn.Module) -> bool:
    """Whether the module defines its own ``forward`` (Lightning's and torch's raise)."""
    forward = getattr(type(module), "forward", None)
    return forward not in (None, L.LightningModule.forward, torch.nn.Module.forward)


def _forward_inputs(module: torch.nn.Module, batch: Any) -> Any:
    """The forward's inputs in ``batch`` (a tuple, a dict or one object), or ``None``."""
    hook = getattr(module, FORWARD_INPUTS_HOOK, None)
    if callable(hook):
        return hook(batch)
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, tuple | list) and batch:
        return batch[0]
    if isinstance(batch, Mapping):
        return _from_mapping(module, batch)
    return None


def _rows(tensor: Any, rows: int) -> torch.Tensor | None:
    """The first rows of a batched tensor on the CPU (floats as float32), else ``None``."""
    if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0 or len(tensor) == 0:
        return None
    tensor = tensor[:rows].detach().cpu()
    return tensor.float() if tensor.is_floating_point() else tensor


def example_inputs(
    module: torch.nn.Module, batch: Any, rows: int = MAX_ROWS
) -> torch.Tensor | dict[str, torch.Tensor] | None:
    """The first ``rows`` rows of the forward's inputs in ``batch``, as ``predict`` takes them.

    Args:
        module: The module whose ``forward`` the inputs are for.
        batch: A batch of the module's dataloader.
        rows: The most rows to keep.

    Returns:
        One CPU tensor (the forward's only positional input), a dict of CPU tensors (its
        keyword inputs, all with the same number of rows) or ``None`` when the inputs
        cannot be told reliably. Floating tensors are float32.
    """
    if not _has_forward(module):  # a module that calls its layers itself: nothing to run
        return None
    try:
        inputs = _forward_inputs(module, batch)
    except Exception:  # a user hook or signature that cannot be read: no example
        log.debug("no input example: the forward's inputs cannot be told", exc_info=True)
        return None
    if isinstance(inputs, tuple | list):
        inputs = inputs[0] if len(inputs) == 1 else None  # predict passes one positional
    if isinstance(inputs, Mapping):
        kept = {str(k): _rows(v, rows) for k, v in inputs.items()}
        lengths = {len(v) for v in kept.values() if v is not None}
        if not kept or None in kept.values() or len(lengths) != 1:
            return None
        return kept
    return _rows(inputs, rows)


def example_outputs(
    module: L.LightningModule, inputs: torch.Tensor | dict[str, torch.Tensor], precision: Any
) -> Any:
    """The module's eval forward on ``inputs``, as ``predict`` runs it; CPU float32 tensors.

    Floating inputs are cast to the parameters' dtype and moved to their device; the
    precision's autocast applies. The forward runs eagerly (a compiled module is not
    recompiled for the example's shape), and the module's training mode is restored.
    """
    parameter = next(module.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    dtype = parameter.dtype if parameter is not None else torch.float32

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t.to(device=device, dtype=dtype if t.is_floating_point() else None)

    training = module.training
    module.eval()
    try:
        with (
            torch.no_grad(),
            torch.compiler.set_stance("force_eager"),
            precision.autocast(device.type),
        ):
            if isinstance(inputs, dict):
                out = module(**{k: cast(v) for k, v in inputs.items()})
            else:
                out = module(cast(inputs))
    finally:
        module.train(training)
    return _to_cpu(out)


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value.float() if value.is_floating_point() else value
    if isinstance(value, Mapping):
        return {str(k): _to_cpu(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_to_cpu(v) for v in value]
    raise TypeError(f"an output of type {type(value).__name__} has no JSON form")


def _encode(value: Any) -> Any:
    """Tensors (in dicts and lists) as ``{"dtype", "data"}`` JSON objects."""
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).removeprefix("torch."), "data": value.tolist()}
    if isinstance(value, Mapping):
        return {"dict": {k: _encode(v) for k, v in value.items()}}
    return {"list": [_encode(v) for v in value]}


def write_input_example(
    directory: Path, module: L.LightningModule, inputs: Any, precision: Any
) -> bool:
    """Writes ``input_example.json`` (the rows and the module's outputs on them) atomically.

    Never raises: a forward or an output that fails is logged and nothing is written.

    Returns:
        Whether the file was written.
    """
    try:
        outputs = example_outputs(module, inputs, precision)
        text = json.dumps({"inputs": _encode(inputs), "outputs": _encode(outputs)})
    except Exception as error:  # said once: the writer then stops trying
        log.warning(
            "no input example written: the forward on its rows failed (%s: %s)",
            type(error).__name__,
            str(error).strip().splitlines()[0][:300] if str(error).strip() else "",
        )
        return False
    atomic_write(Path(directory) / INPUT_EXAMPLE_FILENAME, lambda tmp: tmp.write_text(text))
    return True
