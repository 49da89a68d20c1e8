"""The INT8 backends, how one is chosen, and how forward inputs come out of a batch."""

import pytest
import torch
from torch import nn

import versatil.quantization.backends as backends
from versatil.quantization import QuantizationBackend, QuantizationError, quantize_int8
from versatil.quantization.backends import choose_and_quantize
from versatil.quantization.benchmark import (
    call_forward,
    forward_inputs_for,
    samples_per_sec,
    state_dict_size_mb,
)
from versatil.training.constants import PrecisionType

INT8_MESSAGE = (
    "PrecisionType.INT8 has no training dtype: INT8 needs post-training "
    "quantization of a model trained in another precision (e.g. torch.ao."
    "quantization); train in 32, bf16-mixed or 16-mixed instead."
)


def mlp(seed=0):
    torch.manual_seed(seed)
    layers = [nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 3)]
    return nn.Sequential(*layers).eval()


INPUTS = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))


def test_int8_message_is_unchanged_and_quantization_exists():
    with pytest.raises(NotImplementedError) as raised:
        PrecisionType.INT8.get_model_dtype()
    assert str(raised.value) == INT8_MESSAGE
    from versatil.quantization import post_training_compress

    assert callable(post_training_compress)
    assert callable(torch.ao.quantization.quantize_dynamic)


@pytest.mark.parametrize("backend", list(QuantizationBackend))
def test_each_backend_quantizes_linear_layers_close_to_float(backend):
    if backend is QuantizationBackend.TORCHAO and not backends.torchao_available():
        pytest.skip("torchao is not installed")
    model = mlp()
    expected = model(INPUTS)
    quantized = quantize_int8(mlp(), backend)
    with torch.no_grad():
        torch.testing.assert_close(quantized(INPUTS), expected, atol=0.05, rtol=0)
    assert state_dict_size_mb(quantized) < 0.5 * state_dict_size_mb(model)


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


class Keywords(nn.Module):
    def forward(self, features, mask=None):
        return features if mask is None else features * mask


class Hooked(Keywords):
    def forward_inputs(self, batch):
        return batch["x"], batch["m"]


@pytest.mark.parametrize(
    ("module", "batch", "expected"),
    [
        (Keywords(), torch.ones(2), torch.ones(2)),
        (Keywords(), (torch.ones(2), torch.zeros(2)), torch.ones(2)),
        (Keywords(), {"features": torch.ones(2), "target": torch.zeros(2)}, torch.ones(2)),
        (Keywords(), {"features": torch.ones(2), "mask": torch.zeros(2)}, torch.zeros(2)),
        (Hooked(), {"x": torch.ones(2), "m": torch.full((2,), 3.0)}, torch.full((2,), 3.0)),
    ],
    ids=["tensor", "tuple", "dict", "dict-two-keys", "hook"],
)
def test_forward_inputs(module, batch, expected):
    inputs = forward_inputs_for(module)(batch)
    assert torch.equal(call_forward(module, inputs), expected)


def test_forward_inputs_unknown_keys_say_what_to_do():
    with pytest.raises(ValueError, match=r"name no argument.*forward_inputs"):
        forward_inputs_for(Keywords())({"x": torch.ones(2)})
    assert forward_inputs_for(Keywords(), lambda b: b["x"])({"x": 1}) == 1


def test_samples_per_sec_is_per_model_and_checks_its_arguments():
    rates = samples_per_sec([mlp(), mlp(1)], [(INPUTS,)] * 3, 24, repeats=3, warmup=0)
    assert len(rates) == 2 and all(rate > 0 for rate in rates)
    with pytest.raises(ValueError, match="repeats"):
        samples_per_sec([mlp()], [(INPUTS,)], 8, repeats=0)
    with pytest.raises(ValueError, match="no batches"):
        samples_per_sec([mlp()], [], 0)
