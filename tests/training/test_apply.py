"""Applying settings in one place: process reset, matmul, dtype, compile, Trainer precision."""

import pytest
import torch

from versatil.training.apply import (
    apply_settings,
    convert_for_inference,
    reset_process_state,
    trainer_precision,
)
from versatil.training.constants import PrecisionType
from versatil.training.spec import TrialSettings
from versatil.training.tasks.reaching import BehaviorCloningPolicy


def settings(**kwargs):
    return TrialSettings.from_config(kwargs)


def build():
    return BehaviorCloningPolicy(width=8, depth=1)


@pytest.mark.parametrize(
    ("precision", "param_dtype"),
    [
        ("32", torch.float32),
        ("bf16-mixed", torch.float32),  # mixed: parameters stay float32
        ("16-true", torch.float16),
        ("bf16-true", torch.bfloat16),
        ("64", torch.float64),
    ],
)
def test_apply_settings_converts_true_precisions_only(precision, param_dtype):
    model = apply_settings(settings(precision=precision), build)
    assert {p.dtype for p in model.parameters()} == {param_dtype}


def test_apply_settings_sets_matmul_precision_and_compiles_the_policy():
    reset_process_state(0)
    model = apply_settings(settings(compile_mode="default", matmul_precision="medium"), build)
    assert torch.get_float32_matmul_precision() == "medium"
    assert hasattr(model.policy.forward, "_torchdynamo_orig_callable")
    assert not hasattr(model.normalizer.forward, "_torchdynamo_orig_callable")
    # Compiling forward in place keeps the state-dict keys: checkpoints stay interchangeable.
    assert set(model.state_dict()) == set(build().state_dict())
    reset_process_state(0)


def test_apply_settings_without_matmul_restores_the_default():
    torch.set_float32_matmul_precision("medium")
    apply_settings(settings(), build)
    assert torch.get_float32_matmul_precision() == "highest"


def test_reset_process_state_undoes_process_wide_settings():
    torch.set_default_dtype(torch.float64)
    torch.set_float32_matmul_precision("medium")
    reset_process_state(7)
    assert torch.get_default_dtype() is torch.float32
    assert torch.get_float32_matmul_precision() == "highest"
    first = torch.rand(3)
    reset_process_state(7)
    assert torch.equal(first, torch.rand(3))


@pytest.mark.parametrize(
    ("precision", "argument"),
    [
        ("32", "32"),
        ("32-true", "32"),
        ("64", "64"),
        ("16-mixed", "16-mixed"),
        ("bf16-mixed", "bf16-mixed"),
        ("16-true", "16-true"),
        ("bf16-true", "bf16-true"),
    ],
)
def test_trainer_precision_is_the_precision_lightning_accepts(precision, argument):
    assert trainer_precision(settings(precision=precision)) == argument


def test_trainer_precision_builds_the_trainer_precision():
    import lightning as L

    trainer = L.Trainer(
        accelerator="cpu",
        precision=trainer_precision(settings(precision="bf16-mixed")),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    assert PrecisionType(str(trainer.precision)) is PrecisionType.BF16_MIXED


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [
        ("32", torch.float32),
        ("64", torch.float64),
        ("bf16-mixed", torch.bfloat16),
        ("16-mixed", torch.float16),
        ("bf16-true", torch.bfloat16),
        ("16-true", torch.float16),
    ],
)
def test_convert_for_inference_casts_as_the_precision_says(precision, dtype):
    model = apply_settings(settings(precision=precision), build)
    converted = convert_for_inference(model, PrecisionType(precision))
    assert {p.dtype for p in converted.parameters()} == {dtype}
