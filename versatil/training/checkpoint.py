"""Checkpoint directories: ``last.ckpt`` + ``config.yaml`` (+ ``tokenizer/``), written atomically.

A checkpoint directory is self-describing: ``config.yaml`` holds the resolved
:class:`TrainConfig`, enough to rebuild the model, and ``last.ckpt`` is a normal Lightning
checkpoint (weights under ``CheckpointKey.STATE_DICT``, normalizer statistics under
``CheckpointKey.INPUT_STATS``), so plain ``LightningModule.load_from_checkpoint`` works too.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
import yaml

from versatil.training.config import TrainConfig
from versatil.training.constants import CheckpointFilename, CheckpointKey, PrecisionType
from versatil.training.settings import apply_settings
from versatil.training.tasks import build_task

__all__ = [
    "CheckpointDirWriter",
    "InferenceModel",
    "atomic_write",
    "load_for_inference",
    "read_config",
    "write_checkpoint_dir",
]


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Calls ``write(tmp)`` on a temporary path beside ``path``, then renames it over ``path``.

    A write that raises leaves ``path`` as it was and removes the temporary file or folder.
    """
    path = Path(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent)) / path.name
    try:
        write(tmp)
        if path.is_dir() and tmp.is_dir():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def write_checkpoint_dir(trainer: L.Trainer, directory: Path, config: TrainConfig) -> Path:
    """Writes the trainer's state as a checkpoint directory; returns the directory.

    Every rank must call this (Lightning gathers state collectively); rank 0 writes.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ckpt = directory / CheckpointFilename.DEFAULT_CHECKPOINT
    if not trainer.is_global_zero:
        trainer.save_checkpoint(ckpt)  # a collective call; writes nothing on this rank
        return directory
    atomic_write(ckpt, trainer.save_checkpoint)
    atomic_write(
        directory / CheckpointFilename.CONFIG,
        lambda tmp: tmp.write_text(yaml.safe_dump(config.to_yaml_dict(), sort_keys=False)),
    )
    tokenizer = getattr(trainer.lightning_module, "tokenizer", None)
    if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
        atomic_write(directory / CheckpointFilename.TOKENIZER_DIR, tokenizer.save_pretrained)
    return directory


class CheckpointDirWriter(L.Callback):
    """Writes a checkpoint directory at the end of every training epoch (after validation)."""

    def __init__(self, directory: Path, config: TrainConfig) -> None:
        self.directory = Path(directory)
        self.config = config

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        write_checkpoint_dir(trainer, self.directory, self.config)


def read_config(directory: Path) -> TrainConfig:
    """The :class:`TrainConfig` stored in a checkpoint directory."""
    text = (Path(directory) / CheckpointFilename.CONFIG).read_text()
    return TrainConfig.from_mapping(yaml.safe_load(text), prefix=str(CheckpointFilename.CONFIG))


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
        device = self.device
        inputs = inputs.to(device=device, dtype=self.dtype)
        with self.config.precision.autocast(device.type):
            return self.module(inputs)


def load_for_inference(directory: Path, device: str | torch.device = "cpu") -> InferenceModel:
    """Rebuilds the model of a checkpoint directory and loads its weights for inference.

    The model is built from ``config.yaml``, takes the dtype the checkpoint stored, and is
    cast to ``get_model_dtype()`` when ``should_convert_model()`` says so. An INT8
    checkpoint (``precision: "8"``, written by ``versatil.quantization``) is built in
    float32, quantized the way its ``"quantization"`` entry records (torchao or torch.ao),
    and then loaded: INT8 runs on CPU.
    """
    directory = Path(directory)
    config = read_config(directory)
    with warnings.catch_warnings():
        # Unpickling torch.ao's INT8 weights goes through TypedStorage, which warns.
        warnings.filterwarnings("ignore", message=r"TypedStorage is deprecated.*")
        checkpoint = torch.load(
            directory / CheckpointFilename.DEFAULT_CHECKPOINT,
            map_location="cpu",
            weights_only=False,
        )
    state_dict = checkpoint[CheckpointKey.STATE_DICT]
    # Inference never compiles: the settings' matmul precision and dtype still apply.
    settings = dataclasses.replace(config.settings, compile_mode=None)
    module = apply_settings(settings, lambda: build_task(config.task, config.params)[0])
    if config.precision is PrecisionType.INT8:
        _load_int8(module, checkpoint, directory)
    else:
        stored = next(
            (t.dtype for t in state_dict.values() if t.is_floating_point()), torch.float32
        )
        module = module.to(stored)
        module.load_state_dict(state_dict)
    module.on_load_checkpoint(checkpoint)
    if config.precision.should_convert_model():
        module = module.to(config.precision.get_model_dtype())
    tokenizer_dir = directory / CheckpointFilename.TOKENIZER_DIR
    return InferenceModel(
        module=module.to(device).eval(),
        config=config,
        input_stats=checkpoint.get(CheckpointKey.INPUT_STATS),
        tokenizer_dir=tokenizer_dir if tokenizer_dir.is_dir() else None,
    )


def _load_int8(module: L.LightningModule, checkpoint: dict[str, Any], directory: Path) -> None:
    """Quantizes the float32 ``module`` as the checkpoint records, then loads its weights."""
    # Imported here: versatil.quantization imports this module.
    from versatil.quantization.backends import (
        QUANTIZATION_KEY,
        QuantizationError,
        load_quantized_state,
        quantized_like,
    )

    info = checkpoint.get(QUANTIZATION_KEY)
    if not isinstance(info, dict):
        raise QuantizationError(
            f"{directory}: config.yaml says precision 8 (INT8), but last.ckpt has no "
            f"{QUANTIZATION_KEY!r} entry; write INT8 checkpoints with "
            f"versatil.quantization.post_training_compress"
        )
    quantized_like(module.float(), info)
    load_quantized_state(module, checkpoint[CheckpointKey.STATE_DICT])
