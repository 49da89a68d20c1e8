"""The enums against the table of members and values: one case per member and method."""

import pytest
import torch

from versatil.training.constants import (
    CheckpointFilename,
    CheckpointKey,
    CompileMode,
    Float32MatmulPrecision,
    PrecisionType,
)

P = PrecisionType


def test_enums_are_str_enums_with_the_designed_values():
    assert [m.value for m in PrecisionType] == [
        "8",
        "32",
        "16-mixed",
        "bf16-mixed",
        "16-true",
        "bf16-true",
        "64",
    ]
    assert {m.name: m.value for m in CheckpointFilename} == {
        "CONFIG": "config.yaml",
        "TOKENIZER_DIR": "tokenizer",
        "DEFAULT_CHECKPOINT": "last.ckpt",
    }
    assert {m.name: m.value for m in CheckpointKey} == {
        "STATE_DICT": "state_dict",
        "INPUT_STATS": "input_stats",
    }
    assert {m.name: m.value for m in CompileMode} == {
        "DEFAULT": "default",
        "REDUCE_OVERHEAD": "reduce-overhead",
        "MAX_AUTOTUNE": "max-autotune",
        "MAX_AUTOTUNE_NO_CUDAGRAPHS": "max-autotune-no-cudagraphs",
    }
    assert {m.name: m.value for m in Float32MatmulPrecision} == {
        "HIGHEST": "highest",
        "HIGH": "high",
        "MEDIUM": "medium",
    }
    assert P.FP32 == "32" and isinstance(P.FP32, str)


def test_int8_member_value():
    assert P.INT8.value == "8"


MODEL_DTYPE = {
    P.FP32: torch.float32,
    P.FP16_MIXED: torch.float16,
    P.BF16_MIXED: torch.bfloat16,
    P.FP16_TRUE: torch.float16,
    P.BF16_TRUE: torch.bfloat16,
    P.FP64: torch.float64,
}


def test_model_dtype_table_covers_every_trainable_precision():
    assert set(MODEL_DTYPE) | {P.INT8} == set(PrecisionType)


@pytest.mark.parametrize(("precision", "dtype"), list(MODEL_DTYPE.items()))
def test_get_model_dtype(precision, dtype):
    assert precision.get_model_dtype() is dtype


def test_int8_get_model_dtype_explains_quantization():
    with pytest.raises(NotImplementedError, match="INT8 needs post-training quantization"):
        P.INT8.get_model_dtype()


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        (P.INT8, False),
        (P.FP32, False),
        (P.FP16_MIXED, True),
        (P.BF16_MIXED, True),
        (P.FP16_TRUE, False),
        (P.BF16_TRUE, False),
        (P.FP64, False),
    ],
)
def test_is_mixed(precision, expected):
    assert precision.is_mixed() is expected


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        (P.INT8, False),
        (P.FP32, False),
        (P.FP16_MIXED, True),
        (P.BF16_MIXED, True),
        (P.FP16_TRUE, True),
        (P.BF16_TRUE, True),
        (P.FP64, False),
    ],
)
def test_should_convert_model(precision, expected):
    assert precision.should_convert_model() is expected


@pytest.mark.parametrize(
    ("precision", "enabled", "dtype"),
    [
        (P.FP32, False, None),
        (P.FP16_MIXED, True, torch.float16),
        (P.BF16_MIXED, True, torch.bfloat16),
        (P.FP16_TRUE, False, None),
        (P.BF16_TRUE, False, None),
        (P.FP64, False, None),
        (P.INT8, False, None),
    ],
)
def test_autocast(precision, enabled, dtype):
    context = precision.autocast("cpu")
    assert isinstance(context, torch.autocast)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with context:
        assert torch.is_autocast_enabled("cpu") is enabled
        result = a @ b
    assert result.dtype is (dtype or torch.float32)


@pytest.mark.parametrize(
    ("alias", "member"),
    [
        ("32-true", P.FP32),
        ("64-true", P.FP64),
        ("16", P.FP16_MIXED),
        ("bf16", P.BF16_MIXED),
        ("BF16-Mixed", P.BF16_MIXED),
        (32, P.FP32),
    ],
)
def test_lightning_aliases(alias, member):
    assert PrecisionType(alias) is member


def test_precision_round_trips_through_a_lightning_trainer():
    import lightning as L

    for value in ("32", "64", "bf16-mixed", "bf16-true", "16-true"):
        trainer = L.Trainer(precision=value, accelerator="cpu", logger=False)
        assert PrecisionType(str(trainer.precision)) is PrecisionType(value)


def test_unknown_precision_raises_value_error():
    with pytest.raises(ValueError, match="'bf16-mix' is not a valid PrecisionType"):
        PrecisionType("bf16-mix")


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (CompileMode.DEFAULT, False),
        (CompileMode.REDUCE_OVERHEAD, True),
        (CompileMode.MAX_AUTOTUNE, True),
        (CompileMode.MAX_AUTOTUNE_NO_CUDAGRAPHS, False),
    ],
)
def test_compile_mode_uses_cuda_graphs(mode, expected):
    assert mode.uses_cuda_graphs() is expected


def test_constants_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, versatil.training.constants; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
