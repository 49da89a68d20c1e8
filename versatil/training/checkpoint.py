"""Checkpoint directories: ``last.ckpt``, ``config.yaml`` (+ ``tokenizer/``, input example).

A checkpoint directory is self-describing: ``config.yaml`` holds the resolved
:class:`TrainConfig`, enough to rebuild the model, and ``last.ckpt`` is a normal Lightning
checkpoint (weights under ``CheckpointKey.STATE_DICT``, normalizer statistics under
``CheckpointKey.INPUT_STATS``), so plain ``LightningModule.load_from_checkpoint`` works too.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import torch
import yaml
from typing_extensions import override

from versatil.files import atomic_write
from versatil.training.apply import apply_settings
from versatil.training.config import TrainConfig
from versatil.training.constants import CheckpointFilename
from versatil.training.input_example import example_inputs, write_input_example
from versatil.training.tasks import build_task

__all__ = [
    "CheckpointDirWriter",
    "atomic_write",  # versatil.files's, re-exported: quantization writes its directory with it
    "build_module",
    "read_checkpoint",
    "read_config",
    "write_checkpoint_dir",
]


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
    """Writes a checkpoint directory at the end of every training epoch (after validation).

    The first rows of the fit's first training batch are kept (once per fit) as the input
    example; each write adds ``input_example.json``, those rows with the module's outputs
    on them (see :mod:`versatil.training.input_example`), so the outputs are the written
    weights'. A batch whose forward inputs cannot be told gives no example.
    """

    def __init__(self, directory: Path, config: TrainConfig) -> None:
        self.directory = Path(directory)
        self.config = config
        self._example: Any = None
        self._example_taken = False

    @override
    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if not self._example_taken and trainer.is_global_zero:
            self._example_taken = True
            self._example = example_inputs(pl_module, batch)

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        write_checkpoint_dir(trainer, self.directory, self.config)
        if self._example is not None and trainer.is_global_zero:
            example, precision = self._example, self.config.precision
            if not write_input_example(self.directory, pl_module, example, precision):
                self._example = None  # it failed once: said once, not tried again


def read_config(directory: Path) -> TrainConfig:
    """The :class:`TrainConfig` stored in a checkpoint directory."""
    text = (Path(directory) / CheckpointFilename.CONFIG).read_text()
    return TrainConfig.from_mapping(yaml.safe_load(text), prefix=str(CheckpointFilename.CONFIG))


def read_checkpoint(directory: Path) -> tuple[TrainConfig, dict[str, Any]]:
    """A checkpoint directory's run config and its ``last.ckpt``, loaded on the CPU."""
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
    return config, checkpoint


def build_module(config: TrainConfig) -> L.LightningModule:
    """The run's module rebuilt with its settings applied, never compiled, no weights loaded."""
    # Inference never compiles: the settings' matmul precision and dtype still apply.
    settings = dataclasses.replace(config.settings, compile_mode=None)
    return apply_settings(settings, lambda: build_task(config.task, config.params)[0])
