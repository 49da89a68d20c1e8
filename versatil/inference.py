"""Loading a checkpoint directory for inference, the way its model was trained.

It sits above both training (which writes checkpoint directories) and quantization (which
writes INT8 ones): a float checkpoint is rebuilt with its settings, an INT8 one is
quantized the way its ``"quantization"`` entry records, then loaded.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import torch

from versatil.quantization.backends import (
    QUANTIZATION_KEY,
    QuantizationError,
    load_quantized_state,
    quantized_like,
)
from versatil.training.apply import compile_targets, convert_for_inference
from versatil.training.checkpoint import build_module, read_checkpoint
from versatil.training.config import TrainConfig
from versatil.training.constants import CheckpointFilename, CheckpointKey, PrecisionType

__all__ = ["InferenceModel", "load_for_inference"]


@dataclasses.dataclass
class InferenceModel:
    """A trained model set up for inference the way it was trained.

    Calling it casts inputs to the model's dtype and runs under the precision's autocast.
    An INT8 model (``precision: "8"``, from ``versatil.quantization``) takes float32 inputs.

    Attributes:
        module: The LightningModule, in eval mode, converted per the precision.
        config: The run's configuration from ``config.yaml``.
        input_stats: The normalizer statistics stored under ``CheckpointKey.INPUT_STATS``.
        tokenizer_dir: ``tokenizer/`` inside the checkpoint directory, if the task has one.
    """

    module: L.LightningModule
    config: TrainConfig
    input_stats: Any
    tokenizer_dir: Path | None

    @property
    def dtype(self) -> torch.dtype:
        """The dtype inputs are cast to: the parameters' dtype; float32 for an INT8 model.

        (INT8 dynamic quantization keeps float32 activations and quantizes them per call.)
        """
        if self.config.precision is PrecisionType.INT8:
            return torch.float32
        return next(self.module.parameters()).dtype

    @property
    def device(self) -> torch.device:
        """The device of the model's first parameter or buffer (CPU for neither)."""
        for tensor in (*self.module.parameters(), *self.module.buffers()):
            return tensor.device
        return torch.device("cpu")

    @torch.no_grad()
    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        """The model's outputs for a batch, moved and cast as in training, without gradients."""
        device = self.device
        inputs = inputs.to(device=device, dtype=self.dtype)
        with self.config.precision.autocast(device.type):
            return self.module(inputs)


SETTING_FIELDS = ("precision", "compile_mode", "matmul_precision")
"""The settings :func:`load_for_inference` may apply instead of the checkpoint's."""

MODEL_URI_SCHEMES = ("models:/", "runs:/")
"""URIs :func:`load_for_inference` downloads from MLflow before loading them."""


def load_for_inference(
    directory: Path | str,
    device: str | torch.device = "cpu",
    settings: Mapping[str, Any] | None = None,
) -> InferenceModel:
    """Rebuilds the model of a checkpoint directory and loads its weights for inference.

    The model is built from ``config.yaml``, takes the dtype the checkpoint stored, and is
    cast to ``get_model_dtype()`` when ``should_convert_model()`` says so. An INT8
    checkpoint (``precision: "8"``, written by ``versatil.quantization``) is built in
    float32, quantized the way its ``"quantization"`` entry records (torchao or torch.ao),
    and then loaded: INT8 runs on CPU.

    Args:
        directory: A checkpoint directory, or an MLflow URI (``models:/NAME@recommended``,
            ``models:/m-...``, ``runs:/RUN_ID/checkpoint``) of a model a sweep logged or
            of a checkpoint artifact; it is downloaded first.
        device: Where the model runs.
        settings: ``precision``, ``compile_mode`` and ``matmul_precision`` to apply
            instead of the checkpoint's (any of them; ``"none"`` for eager or torch's
            default). The model is then cast to the precision's dtype, and compiled when
            a compile mode is given.
    """
    directory = _local_checkpoint(directory)
    config, checkpoint = read_checkpoint(directory)
    overridden = {k: v for k, v in (settings or {}).items() if k in SETTING_FIELDS}
    if overridden:
        config = TrainConfig.from_mapping(
            {**config.to_yaml_dict(), **overridden}, prefix="settings"
        )
    state_dict = checkpoint[CheckpointKey.STATE_DICT]
    module = build_module(config)
    if config.precision is PrecisionType.INT8:
        _load_int8(module, checkpoint, directory)
    else:
        stored = next(
            (t.dtype for t in state_dict.values() if t.is_floating_point()), torch.float32
        )
        module = module.to(stored)
        module.load_state_dict(state_dict)
    module.on_load_checkpoint(checkpoint)
    module = convert_for_inference(module, config.precision)
    if overridden and config.precision is not PrecisionType.INT8:
        module = module.to(config.precision.get_model_dtype())
    module = module.to(device).eval()
    if overridden and config.compile_mode is not None:
        for target in compile_targets(module):
            target.forward = torch.compile(target.forward, mode=config.compile_mode.value)
    tokenizer_dir = directory / CheckpointFilename.TOKENIZER_DIR
    return InferenceModel(
        module=module,
        config=config,
        input_stats=checkpoint.get(CheckpointKey.INPUT_STATS),
        tokenizer_dir=tokenizer_dir if tokenizer_dir.is_dir() else None,
    )


def _local_checkpoint(location: Path | str) -> Path:
    """A checkpoint directory on this machine: ``location``, or what its MLflow URI holds.

    A logged model (an ``MLmodel`` file at its root) holds the checkpoint under
    ``artifacts/``; a run's ``checkpoint`` artifact is the directory itself.
    """
    if not str(location).startswith(MODEL_URI_SCHEMES):
        return Path(location)
    import mlflow.artifacts

    target = tempfile.mkdtemp(prefix="versatil-model-")
    local = Path(mlflow.artifacts.download_artifacts(str(location), dst_path=target))
    if (local / CheckpointFilename.CONFIG).is_file():
        return local
    found = sorted(local.glob(f"artifacts/*/{CheckpointFilename.CONFIG}"))
    if not found:
        raise FileNotFoundError(f"{location}: no checkpoint directory (no config.yaml) in it")
    return found[0].parent


def _load_int8(module: L.LightningModule, checkpoint: dict[str, Any], directory: Path) -> None:
    """Quantizes the float32 ``module`` as the checkpoint records, then loads its weights."""
    info = checkpoint.get(QUANTIZATION_KEY)
    if not isinstance(info, dict):
        raise QuantizationError(
            f"{directory}: config.yaml says precision 8 (INT8), but last.ckpt has no "
            f"{QUANTIZATION_KEY!r} entry; write INT8 checkpoints with "
            f"versatil.quantization.post_training_compress"
        )
    quantized_like(module.float(), info)
    load_quantized_state(module, checkpoint[CheckpointKey.STATE_DICT])
