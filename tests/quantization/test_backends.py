"""The INT8 backends and how one is chosen."""

import pytest
import torch
from torch import nn

import versatil.quantization.backends as backends
from versatil.quantization import QuantizationBackend, QuantizationError, quantize_int8
from versatil.quantization.backends import choose_and_quantize


def mlp(seed=0):
    torch.manual_seed(seed)
    layers = [nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 3)]
    return nn.Sequential(*layers).eval()


INPUTS = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("backend", list(QuantizationBackend))
def test_each_backend_quantizes_linear_layers_close_to_float(backend):
    if backend is QuantizationBackend.TORCHAO and not backends.torchao_available():
        pytest.skip("torchao is not installed")
    model = mlp()
    expected = model(INPUTS)
    quantized = quantize_int8(mlp(), backend)
    with torch.no_grad():
        torch.testing.assert_close(quantized(INPUTS), expected, atol=0.05, rtol=0)


def test_float32_only():
    with pytest.raises(QuantizationError, match="float32"):
        quantize_int8(mlp().double(), "torch.ao")


def test_auto_uses_torch_ao_without_torchao(monkeypatch):
    monkeypatch.setattr(backends, "torchao_available", lambda: False)
    model = mlp()
    _, backend, reason = choose_and_quantize(model, None)
    assert backend is QuantizationBackend.TORCH_AO and reason == "torchao is not installed"
    assert isinstance(model[0], nn.Linear) and type(model[0].weight) is nn.Parameter  # untouched


def test_auto_falls_back_when_torchao_fails_on_the_model():
    if not backends.torchao_available():
        pytest.skip("torchao is not installed")

    def check(model):
        if model[0].weight.__class__.__module__.startswith("torchao"):
            raise RuntimeError("no kernel for this shape")
        model(INPUTS)

    _, backend, reason = choose_and_quantize(mlp(), None, check)
    assert backend is QuantizationBackend.TORCH_AO
    assert reason == "torchao failed on this model: RuntimeError: no kernel for this shape"


def test_a_named_backend_is_used_or_fails(monkeypatch):
    monkeypatch.setattr(backends, "_torchao", lambda: None)
    with pytest.raises(QuantizationError, match="pip install torchao"):
        choose_and_quantize(mlp(), "torchao")
    with pytest.raises(ValueError):
        choose_and_quantize(mlp(), "fbgemm")
