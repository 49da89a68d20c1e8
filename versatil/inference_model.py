"""A trial's checkpoint as an MLflow pyfunc model, logged from this file (models from code).

The sweep's driver logs each completed trial's checkpoint directory as an MLflow logged
model whose code is this file and whose one artifact, ``checkpoint``, is the directory.
Loading it runs :meth:`CheckpointModel.load_context`, which rebuilds the module with
:func:`versatil.inference.load_for_inference` and applies the model config: the
precision (a dtype cast for ``*-true``, autocast for ``*-mixed``), the float32 matmul
precision, the compile mode and the device, each overridable at load::

    model = mlflow.pyfunc.load_model("models:/NAME@recommended", model_config={"device": "cpu"})
    actions = model.predict(observations)  # numpy in, numpy out

Why not ``mlflow.pytorch.log_model``: MLflow 3 serializes a torch model with
``torch.export`` by default, which needs a tensor input example at logging time (the
driver imports no torch and holds no batch) and fixes the device the program was
exported on; its pickle format needs ``MLFLOW_ALLOW_PICKLE_DESERIALIZATION``. This model
is code plus a state dict: it loads with pickle deserialization disallowed, on any device.

A model logged with an input example (``input_example.json`` in the checkpoint) has a
signature inferred from it: through ``mlflow.pyfunc``, ``predict`` then takes the
example's form (an array, or a dict of arrays) with its dtypes.

This file imports neither torch nor versatil's training at import time: MLflow runs it
when the model is logged, in the driver, which never imports torch.
"""

from __future__ import annotations

from typing import Any

import mlflow
import numpy as np
from mlflow.pyfunc import PythonModel

__all__ = ["CHECKPOINT_ARTIFACT", "DEFAULT_DEVICE", "CheckpointModel"]

CHECKPOINT_ARTIFACT = "checkpoint"
"""The name of the model's artifact: the trial's checkpoint directory."""

DEFAULT_DEVICE = "auto"
"""``cuda`` when the loading machine has a GPU, else ``cpu``."""


class CheckpointModel(PythonModel):
    """A trial's module, rebuilt from its checkpoint with its setting applied.

    ``model_config`` keys: ``precision``, ``compile_mode``, ``matmul_precision`` (as a
    sweep's axes spell them; ``"none"`` runs eagerly, or keeps torch's default) and
    ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:1``, ...).
    """

    def __init__(self) -> None:
        self.model: Any = None

    def load_context(self, context: Any) -> None:
        """Loads the checkpoint artifact with the model config's setting, on its device."""
        import torch

        from versatil.inference import SETTING_FIELDS, load_for_inference

        config = dict(context.model_config or {})
        device = str(config.get("device") or DEFAULT_DEVICE)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        settings = {k: config[k] for k in SETTING_FIELDS if k in config}
        self.model = load_for_inference(
            context.artifacts[CHECKPOINT_ARTIFACT], device=device, settings=settings
        )

    def predict(self, context, model_input: np.ndarray, params=None):
        """The module's eval forward on ``model_input``, as numpy.

        Typed as an array, the common case: MLflow reads no schema from that hint (it would
        from most others), so the signature stays the one inferred from the logged input
        example, and MLflow does not advise adding hints.

        Args:
            context: MLflow's context (unused: :meth:`load_context` kept the model).
            model_input: A numpy array (the forward's one input), a dict of arrays (its
                keyword inputs) or a DataFrame (its columns as one float array).
            params: Unused.

        Returns:
            The outputs as numpy (16-bit floats as float32, which numpy holds exactly); a
            dict or tuple of outputs as a dict or list of arrays.
        """
        import torch

        model = self.model
        args, kwargs = _as_tensors(model_input, model.device, model.dtype)
        with torch.no_grad(), model.config.precision.autocast(model.device.type):
            return _as_numpy(model.module(*args, **kwargs))


def _as_tensors(model_input: Any, device: Any, dtype: Any) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword tensors for the forward; floats cast to the model's dtype."""
    import numpy as np
    import torch

    def tensor(value: Any) -> torch.Tensor:
        data = torch.as_tensor(np.asarray(value))
        cast = dtype if data.is_floating_point() else None
        return data.to(device=device, dtype=cast)

    if isinstance(model_input, dict):
        return [], {str(k): tensor(v) for k, v in model_input.items()}
    if hasattr(model_input, "to_numpy"):  # a pandas DataFrame
        return [tensor(model_input.to_numpy(dtype=np.float32))], {}
    return [tensor(model_input)], {}


def _as_numpy(output: Any) -> Any:
    """Tensors as numpy arrays (on the CPU; bfloat16 and float16 as float32)."""
    import torch

    if isinstance(output, torch.Tensor):
        output = output.detach().cpu()
        if output.dtype in (torch.bfloat16, torch.float16):
            output = output.float()
        return output.numpy()
    if isinstance(output, dict):
        return {k: _as_numpy(v) for k, v in output.items()}
    if isinstance(output, list | tuple):
        return [_as_numpy(v) for v in output]
    return output


mlflow.models.set_model(CheckpointModel())
