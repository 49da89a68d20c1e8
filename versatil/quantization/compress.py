"""post_training_compress: a trained checkpoint directory in, an INT8 one out, measured."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
import yaml

from versatil.quantization.backends import (
    QUANTIZATION_KEY,
    QuantizationBackend,
    choose_and_quantize,
    quantization_info,
    quiet_torch_ao,
)
from versatil.quantization.benchmark import (
    call_forward,
    count_batch_samples,
    forward_inputs_for,
    samples_per_sec,
    state_dict_size_mb,
)
from versatil.quantization.evaluate import validate_objective, validation_batches
from versatil.training.checkpoint import atomic_write, build_module, read_checkpoint
from versatil.training.config import TrainConfig
from versatil.training.constants import CheckpointFilename, CheckpointKey, PrecisionType
from versatil.training.tasks import build_task

__all__ = ["CompressionResult", "post_training_compress"]

# A Lightning checkpoint's training state: an INT8 model cannot resume training, and
# these hold float32 copies of every weight (Adam keeps two).
_TRAINING_STATE = ("optimizer_states", "lr_schedulers", "loops", "callbacks")


@dataclasses.dataclass
class CompressionResult:
    """What :func:`post_training_compress` measured and wrote.

    Throughput and size are measured on this machine, for the float32 model and the INT8
    one alike; a small model may well not run faster in INT8.

    Attributes:
        objective: The validation metric compared (``val_loss``).
        objective_before: Its value for the float32 model.
        objective_after: Its value for the INT8 model.
        objective_delta: ``objective_after - objective_before``.
        samples_per_sec_before: Float32 inference throughput on the validation batches
            (forward passes only, warm-up excluded, median of the repeats).
        samples_per_sec_after: INT8 inference throughput on the same batches.
        speedup: ``samples_per_sec_after / samples_per_sec_before``.
        size_mb_before: The float32 model's serialized state dict, in MiB (2**20 bytes).
        size_mb_after: The INT8 model's serialized state dict, in MiB.
        backend: The library that quantized: ``torchao`` or ``torch.ao``.
        fallback_reason: Why torchao was not used when the backend was left to choose;
            ``None`` otherwise.
        batches: The validation batches the throughput was measured on.
        samples: The samples in those batches.
        output_dir: The compressed checkpoint directory.
        module: The INT8 model, in eval mode.
    """

    objective: str
    objective_before: float
    objective_after: float
    objective_delta: float
    samples_per_sec_before: float
    samples_per_sec_after: float
    speedup: float
    size_mb_before: float
    size_mb_after: float
    backend: QuantizationBackend
    fallback_reason: str | None
    batches: int
    samples: int
    output_dir: Path
    module: L.LightningModule = dataclasses.field(repr=False)


def post_training_compress(
    checkpoint_dir: Path | str,
    output_dir: Path | str | None = None,
    *,
    objective: str = "val_loss",
    backend: QuantizationBackend | str | None = None,
    repeats: int = 5,
    warmup: int = 1,
    max_batches: int | None = None,
    forward_inputs: Callable[[Any], Any] | None = None,
) -> CompressionResult:
    """Quantizes a trained checkpoint directory to INT8 and measures what that changed.

    The model is rebuilt as it was trained
    (:func:`~versatil.training.checkpoint.build_module`) and given its weights as the
    checkpoint stored them, in float32; a copy has its ``nn.Linear`` layers
    quantized to INT8 (dynamic: int8 weights, activations quantized per batch), on CPU.
    Both models then run the task's validation loop (a real ``lightning.Trainer.validate``)
    for ``objective``, and forward passes over the same validation batches for throughput;
    their state dicts are serialized for size.

    The compressed directory holds ``last.ckpt`` (the INT8 state dict, the task's own
    checkpoint entries such as normalizer statistics, and the backend under
    ``"quantization"``; no optimizer state), ``config.yaml`` (the run's config with
    ``precision: "8"``) and a copy of ``tokenizer/`` when there is one, so
    ``versatil.inference.load_for_inference(output_dir)`` rebuilds the INT8 model.

    Args:
        checkpoint_dir: A checkpoint directory written by training.
        output_dir: Where the compressed directory goes; by default beside
            ``checkpoint_dir``, named ``<name>-int8``. It must not be ``checkpoint_dir``.
        objective: The validation metric to compare.
        backend: ``torchao``, ``torch.ao``, or ``None``: torchao when it is installed and
            works on this model, torch.ao otherwise (see ``fallback_reason``).
        repeats: Timed passes over the validation batches per model; the median counts.
        warmup: Untimed passes per model before the timed ones.
        max_batches: Measure throughput on at most this many validation batches.
        forward_inputs: ``batch -> inputs`` for the forward pass (a tuple of positional
            arguments, a dict of keyword arguments or one argument); by default the
            module's ``forward_inputs(batch)`` if it has one, else the batch's tensor,
            first element, or the dict entries that ``forward`` names.

    Returns:
        The measurements and the compressed directory (:class:`CompressionResult`).

    Raises:
        ValueError: when ``output_dir`` is ``checkpoint_dir``.
        KeyError: when validation logs no ``objective``.
        QuantizationError: when the named backend cannot quantize the model.
    """
    source = Path(checkpoint_dir)
    target = Path(output_dir) if output_dir is not None else source.with_name(f"{source.name}-int8")
    if target.resolve() == source.resolve():
        raise ValueError(f"output_dir must differ from checkpoint_dir ({source})")
    with quiet_torch_ao():
        config, checkpoint, fp32 = _float_model(source)
        # Copied before a trainer is attached to fp32; each quantization attempt copies it.
        pristine = copy.deepcopy(fp32)
        datamodule = build_task(config.task, config.params)[1]
        before = validate_objective(fp32, datamodule, objective)
        batches = validation_batches(fp32, datamodule, max_batches)
        inputs_of = forward_inputs_for(fp32, forward_inputs)
        inputs = [inputs_of(batch) for batch in batches]
        samples = count_batch_samples(fp32, batches)

        def check(model: torch.nn.Module) -> None:
            with torch.no_grad():
                call_forward(model, inputs[0])

        quantized, chosen, fallback_reason = choose_and_quantize(
            pristine, backend, check if inputs else None
        )
        after = validate_objective(quantized, datamodule, objective)
        fp32_rate, int8_rate = samples_per_sec(
            [fp32, quantized], inputs, samples, repeats=repeats, warmup=warmup
        )
        size_before, size_after = state_dict_size_mb(fp32), state_dict_size_mb(quantized)
        _write(source, target, checkpoint, config, quantized, chosen)
    return CompressionResult(
        objective=objective,
        objective_before=before,
        objective_after=after,
        objective_delta=after - before,
        samples_per_sec_before=fp32_rate,
        samples_per_sec_after=int8_rate,
        speedup=int8_rate / fp32_rate,
        size_mb_before=size_before,
        size_mb_after=size_after,
        backend=chosen,
        fallback_reason=fallback_reason,
        batches=len(batches),
        samples=samples,
        output_dir=target,
        module=quantized,
    )


def _float_model(source: Path) -> tuple[Any, dict[str, Any], torch.nn.Module]:
    """The checkpoint's config, its contents and its model in float32, in eval mode.

    The weights as stored, in float32 (a mixed-precision checkpoint holds float32
    weights), and the task's own entries (normalizer statistics) restored.

    Raises:
        ValueError: when the checkpoint already holds an INT8 model.
    """
    config, checkpoint = read_checkpoint(source)
    if config.precision is PrecisionType.INT8:
        raise ValueError(f"{source} already holds an INT8 model")
    fp32 = build_module(config).to(torch.float32)
    fp32.load_state_dict(checkpoint[CheckpointKey.STATE_DICT.value])
    fp32.on_load_checkpoint(checkpoint)
    fp32.eval()
    return config, checkpoint, fp32


def _write(
    source: Path,
    target: Path,
    original: dict[str, Any],
    config: TrainConfig,
    quantized: torch.nn.Module,
    backend: QuantizationBackend,
) -> None:
    """Writes the compressed checkpoint directory, file by file, each atomically."""
    target.mkdir(parents=True, exist_ok=True)
    checkpoint = {k: v for k, v in original.items() if k not in _TRAINING_STATE}
    checkpoint[CheckpointKey.STATE_DICT.value] = quantized.state_dict()
    checkpoint[QUANTIZATION_KEY] = quantization_info(backend)
    atomic_write(
        target / CheckpointFilename.DEFAULT_CHECKPOINT, lambda tmp: torch.save(checkpoint, tmp)
    )
    int8 = TrainConfig.from_mapping(
        {**config.to_yaml_dict(), "precision": PrecisionType.INT8.value},
        prefix=str(CheckpointFilename.CONFIG),
    )
    atomic_write(
        target / CheckpointFilename.CONFIG,
        lambda tmp: tmp.write_text(yaml.safe_dump(int8.to_yaml_dict(), sort_keys=False)),
    )
    tokenizer = source / CheckpointFilename.TOKENIZER_DIR
    if tokenizer.is_dir():
        atomic_write(
            target / CheckpointFilename.TOKENIZER_DIR, lambda tmp: shutil.copytree(tokenizer, tmp)
        )
