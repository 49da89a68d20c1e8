"""The settings spec: parsing, every feasibility rule, labels, and no torch at import."""

import subprocess
import sys

import pytest
import torch

from versatil.training.constants import CompileMode, Float32MatmulPrecision, PrecisionType
from versatil.training.spec import (
    NONE,
    DeviceInfo,
    SettingsError,
    TrialSettings,
    setting_label,
)

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


def test_detect_cpu_reports_what_torch_says_of_this_machine():
    device = DeviceInfo.detect("cpu")
    # The CPU, even where a GPU is present: accelerator "cpu" is what Lightning trains on.
    assert (device.type, device.name) == ("cpu", "CPU")
    # bf16 is claimed on every CPU: torch computes in it here, autocast included.
    assert device.bf16_supported
    a = torch.randn(8, 8)
    exact = a @ a
    assert torch.allclose((a.bfloat16() @ a.bfloat16()).float(), exact, rtol=0.05, atol=0.2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    # The compiler flag is inductor's own answer: it finds a C++ compiler here or not.
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        found = bool(get_cpp_compiler())
    except InvalidCxxCompiler:
        found = False
    assert device.compiler_available is found
    # So a CPU trial's feasibility follows: fp16 autocast never, compiling where it can.
    assert settings(precision="16-mixed").infeasibility_reason(device) is not None
    assert settings(precision="bf16-mixed").infeasibility_reason(device) is None
    compiled = settings(compile_mode="default").infeasibility_reason(device)
    assert (compiled is None) is found


@pytest.mark.parametrize(
    ("setting", "label"),
    [
        (("32",), "32 + eager"),
        (("32", None, None), "32 + eager"),
        (("32", NONE, NONE), "32 + eager"),
        (("32", "default"), "32 + default"),
        (("bf16-mixed", "default"), "bf16-mixed + default"),
        (("16-true", "max-autotune-no-cudagraphs"), "16-true + max-autotune-no-cudagraphs"),
        (("32", "default", "high"), "32 + default + matmul high"),
        (("bf16-true", None, "medium"), "bf16-true + eager + matmul medium"),
        (("32", "default", "highest"), "32 + default"),
        (
            (PrecisionType.BF16_MIXED, CompileMode.REDUCE_OVERHEAD, Float32MatmulPrecision.HIGH),
            "bf16-mixed + reduce-overhead + matmul high",
        ),
    ],
)
def test_setting_label_spellings(setting, label):
    assert setting_label(*setting) == label


def test_setting_label_shows_matmul_as_asked():
    assert setting_label("32", show_matmul=True) == "32 + eager + matmul highest"
    assert setting_label("32", "default", "highest", show_matmul=True) == (
        "32 + default + matmul highest"
    )
    assert setting_label("64", "default", "medium", show_matmul=False) == "64 + default"


def test_trial_settings_label():
    assert TrialSettings().label() == "32 + eager"
    parsed = settings(precision="bf16-mixed", compile_mode="default", matmul_precision="high")
    assert parsed.label() == "bf16-mixed + default + matmul high"
    assert parsed.label(show_matmul=False) == "bf16-mixed + default"
    assert settings(compile_mode="default").label(show_matmul=True) == (
        "32 + default + matmul highest"
    )


def test_importing_the_spec_leaves_torch_and_lightning_out():
    code = (
        "import sys, versatil.training.spec; "
        "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"


def test_the_default_settings_as_axes_are_eager_fp32_the_verdicts_baseline():
    from versatil.sweep.results.verdict import BASELINE

    assert TrialSettings().as_axes() == {
        "precision": "32",
        "compile_mode": "none",
        "matmul_precision": "highest",
    }
    assert TrialSettings().as_axes() == BASELINE
    compiled = TrialSettings.from_config(
        {"precision": "bf16-mixed", "compile_mode": "default", "matmul_precision": "medium"}
    )
    assert compiled.as_axes() == {
        "precision": "bf16-mixed",
        "compile_mode": "default",
        "matmul_precision": "medium",
    }
