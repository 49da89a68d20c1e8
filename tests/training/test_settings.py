"""TrialSettings: parsing, every feasibility rule, and applying settings in one place."""

import pytest
import torch

from versatil.training.constants import CompileMode, Float32MatmulPrecision, PrecisionType
from versatil.training.settings import (
    DeviceInfo,
    SettingsError,
    TrialSettings,
    apply_settings,
    reset_process_state,
)
from versatil.training.tasks.reaching import BehaviorCloningPolicy

CPU = DeviceInfo(type="cpu", name="CPU", bf16_supported=True, compiler_available=True)
CPU_NO_COMPILER = DeviceInfo(type="cpu", name="CPU", bf16_supported=True, compiler_available=False)
AMPERE = DeviceInfo(type="cuda", name="A100", bf16_supported=True, compiler_available=True)
TURING = DeviceInfo(type="cuda", name="Tesla T4", bf16_supported=False, compiler_available=True)
CUDA_NO_TRITON = DeviceInfo(type="cuda", name="A100", bf16_supported=True, compiler_available=False)
MPS = DeviceInfo(type="mps", name="Apple MPS", bf16_supported=True, compiler_available=False)


def settings(**kwargs):
    return TrialSettings.from_config(kwargs)


def test_from_config_parses_strings_into_members():
    parsed = settings(precision="bf16-mixed", compile_mode="default", matmul_precision="high")
    assert parsed == TrialSettings(
        precision=PrecisionType.BF16_MIXED,
        compile_mode=CompileMode.DEFAULT,
        matmul_precision=Float32MatmulPrecision.HIGH,
    )
    assert TrialSettings.from_config(parsed.to_config()) == parsed


def test_from_config_defaults_and_none():
    assert settings() == TrialSettings()
    assert settings(precision="32", compile_mode="none", matmul_precision=None) == TrialSettings()


def test_unknown_precision_names_value_and_choices():
    with pytest.raises(SettingsError) as error:
        settings(precision="bf16-mix")
    assert str(error.value) == (
        "precision: 'bf16-mix' is not a PrecisionType; "
        "choose from 8, 32, 16-mixed, bf16-mixed, 16-true, bf16-true, 64"
    )


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(SettingsError) as error:
        settings(precision="fp32", compile_mode="fast", matmul_precision="low")
    message = str(error.value)
    assert "precision: 'fp32' is not a PrecisionType" in message
    assert (
        "compile_mode: 'fast' is not a CompileMode; choose from default, reduce-overhead, "
        "max-autotune, max-autotune-no-cudagraphs" in message
    )
    assert (
        "matmul_precision: 'low' is not a Float32MatmulPrecision; choose from highest, high, medium"
        in message
    )


@pytest.mark.parametrize("precision", ["32", "64", "bf16-mixed", "16-true", "bf16-true"])
def test_precisions_lightning_runs_on_cpu_are_feasible(precision):
    assert settings(precision=precision).infeasibility_reason(CPU) is None


def test_int8_is_infeasible_for_training():
    reason = settings(precision="8").infeasibility_reason(AMPERE)
    assert reason is not None and "post-training quantization" in reason


def test_fp16_mixed_is_infeasible_on_cpu():
    reason = settings(precision="16-mixed").infeasibility_reason(CPU)
    assert reason is not None and "silently run bf16-mixed" in reason


def test_fp16_mixed_is_feasible_on_cuda():
    assert settings(precision="16-mixed").infeasibility_reason(TURING) is None


@pytest.mark.parametrize("precision", ["bf16-mixed", "bf16-true"])
def test_bf16_needs_bf16_support_on_cuda(precision):
    reason = settings(precision=precision).infeasibility_reason(TURING)
    assert reason == f"precision {precision} needs bfloat16, which Tesla T4 does not support"
    assert settings(precision=precision).infeasibility_reason(AMPERE) is None


def test_fp64_is_infeasible_on_mps():
    reason = settings(precision="64").infeasibility_reason(MPS)
    assert reason is not None and "float64" in reason


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graph_modes_need_cuda(mode):
    reason = settings(compile_mode=mode).infeasibility_reason(CPU)
    assert reason is not None and "captures CUDA graphs and needs a cuda device, not cpu" in reason
    assert settings(compile_mode=mode).infeasibility_reason(AMPERE) is None


@pytest.mark.parametrize("mode", ["default", "max-autotune-no-cudagraphs"])
def test_non_graph_modes_run_on_cpu(mode):
    assert settings(compile_mode=mode).infeasibility_reason(CPU) is None


def test_compile_needs_a_compiler():
    assert "needs a C++ compiler on cpu" in settings(compile_mode="default").infeasibility_reason(
        CPU_NO_COMPILER
    )
    assert "needs Triton on cuda" in settings(compile_mode="default").infeasibility_reason(
        CUDA_NO_TRITON
    )
    assert settings().infeasibility_reason(CPU_NO_COMPILER) is None


@pytest.mark.parametrize("matmul", ["highest", "high", "medium"])
def test_matmul_precisions_are_feasible_everywhere(matmul):
    for device in (CPU, AMPERE, TURING, MPS):
        assert settings(matmul_precision=matmul).infeasibility_reason(device) is None


def test_detect_on_this_machine_is_cpu():
    device = DeviceInfo.detect("cpu")
    assert device.type == "cpu"


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
