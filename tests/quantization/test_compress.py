"""post_training_compress on real checkpoints: measured, written, and reloaded as INT8."""

import math
import shutil

import pytest
import torch
import yaml

from versatil.inference import load_for_inference
from versatil.quantization import (
    QuantizationBackend,
    QuantizationError,
    post_training_compress,
    quantize_int8,
    torchao_available,
)
from versatil.quantization.evaluate import validate_objective
from versatil.training.config import TrainConfig
from versatil.training.constants import CheckpointFilename, PrecisionType
from versatil.training.fit import train
from versatil.training.tasks import build_task

# Wide enough that int8 weights outweigh the serialization overhead per tensor.
REACHING = {"n_episodes": 16, "horizon": 10, "width": 128}
DICT_BATCHES = "tests.user_tasks.dict_batches:build"
# torch.load of torch.ao's INT8 weights (in these tests) warns through TypedStorage.
pytestmark = pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")

AUTO = QuantizationBackend.TORCHAO if torchao_available() else QuantizationBackend.TORCH_AO


def trained(directory, task="reaching", params=None, max_epochs=2, precision="32"):
    config = TrainConfig.from_mapping(
        {
            "task": task,
            "params": params or {},
            "max_epochs": max_epochs,
            "accelerator": "cpu",
            "precision": precision,
        }
    )
    train(config, directory)
    return directory


@pytest.fixture(scope="module")
def reaching_dir(tmp_path_factory):
    return trained(tmp_path_factory.mktemp("reaching") / "ckpt", params=REACHING)


@pytest.fixture(scope="module")
def dict_dir(tmp_path_factory):
    params = {"hidden": 1024, "n_samples": 256}
    return trained(tmp_path_factory.mktemp("dict") / "ckpt", DICT_BATCHES, params)


def assert_measured(result, max_size_ratio):
    numbers = (
        result.objective_before,
        result.objective_after,
        result.objective_delta,
        result.samples_per_sec_before,
        result.samples_per_sec_after,
        result.speedup,
        result.size_mb_before,
        result.size_mb_after,
    )
    assert all(math.isfinite(n) for n in numbers), result
    assert result.objective_delta == pytest.approx(result.objective_after - result.objective_before)
    assert result.speedup == pytest.approx(
        result.samples_per_sec_after / result.samples_per_sec_before
    )
    assert result.samples_per_sec_before > 0 and result.samples_per_sec_after > 0
    # INT8 of a trained model changes its loss a little, not a lot.
    assert abs(result.objective_delta) < 0.1 * result.objective_before + 1e-3
    # Enough Linear weights: int8 storage shows (biases and scales stay float32).
    assert result.size_mb_after < max_size_ratio * result.size_mb_before
    assert result.batches >= 1 and result.samples >= result.batches


def assert_int8_dir(directory, backend):
    assert {p.name for p in directory.iterdir()} >= {
        CheckpointFilename.DEFAULT_CHECKPOINT,
        CheckpointFilename.CONFIG,
    }
    config = yaml.safe_load((directory / CheckpointFilename.CONFIG).read_text())
    assert config["precision"] == "8"
    checkpoint = torch.load(directory / CheckpointFilename.DEFAULT_CHECKPOINT, weights_only=False)
    assert checkpoint["quantization"]["backend"] == backend
    assert "optimizer_states" not in checkpoint


@pytest.mark.parametrize("backend", [None, "torch.ao"], ids=["auto", "torch.ao"])
def test_compress_reaching_checkpoint(reaching_dir, tmp_path, backend):
    output = tmp_path / "int8"
    result = post_training_compress(reaching_dir, output, backend=backend)

    expected = AUTO if backend is None else QuantizationBackend.TORCH_AO
    assert result.backend is expected and result.output_dir == output
    assert (result.fallback_reason is None) == (backend is not None or torchao_available())
    assert_measured(result, max_size_ratio=0.5)
    assert_int8_dir(output, expected)

    reloaded = load_for_inference(output)
    assert reloaded.config.precision is PrecisionType.INT8
    assert reloaded.config == TrainConfig.from_mapping(
        {**load_for_inference(reaching_dir).config.to_yaml_dict(), "precision": "8"}
    )
    observations = torch.randn(64, 6, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected_actions = result.module(observations)
    actions = reloaded(observations.double())  # cast to float32: INT8 takes float32 inputs
    assert reloaded.dtype is torch.float32 and actions.dtype is torch.float32
    torch.testing.assert_close(actions, expected_actions, atol=0, rtol=0)
    # The reloaded model validates to the objective the compression reported.
    datamodule = build_task("reaching", reloaded.config.params)[1]
    assert validate_objective(reloaded.module, datamodule, "val_loss") == pytest.approx(
        result.objective_after, abs=1e-6
    )


def test_compress_user_task_with_dict_batches(dict_dir, tmp_path):
    result = post_training_compress(dict_dir, tmp_path / "int8", objective="val_mae")

    assert result.backend is AUTO and result.objective == "val_mae"
    assert_measured(result, max_size_ratio=0.6)
    assert_int8_dir(tmp_path / "int8", AUTO)
    features = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = result.module(features=features)
    reloaded = load_for_inference(tmp_path / "int8").module
    with torch.no_grad():
        torch.testing.assert_close(reloaded(features=features), expected, atol=0, rtol=0)


def test_module_owned_dataloaders_and_tokenizer_are_handled(tmp_path):
    params = {"width": 64, "batch_size": 64, "n_samples": 256}
    owned = trained(tmp_path / "moons", "tests.user_tasks.own_dataloaders:build", params, 1)
    result = post_training_compress(owned, backend="torch.ao", repeats=2)
    assert result.output_dir == tmp_path / "moons-int8"
    assert (result.batches, result.samples) == (4, 256)  # the module's own val_dataloader
    assert math.isfinite(result.objective_delta) and math.isfinite(result.speedup)

    toy = trained(tmp_path / "toy", "tests.training.toy_task:build", {"hidden": 8}, max_epochs=1)
    result = post_training_compress(toy, tmp_path / "toy8", backend="torch.ao", repeats=2)
    tokenizer = tmp_path / "toy8" / CheckpointFilename.TOKENIZER_DIR
    assert (tokenizer / "vocab.json").read_text() == '["a", "b", "c"]'
    assert load_for_inference(tmp_path / "toy8").tokenizer_dir == tokenizer


def test_a_mixed_precision_model_is_quantized_from_its_stored_float32_weights(tmp_path):
    ckpt = trained(tmp_path / "bf16", params=REACHING, max_epochs=1, precision="bf16-mixed")
    assert load_for_inference(ckpt).dtype is torch.bfloat16  # cast for inference
    result = post_training_compress(ckpt, tmp_path / "int8", backend="torch.ao", repeats=1)

    checkpoint = torch.load(ckpt / CheckpointFilename.DEFAULT_CHECKPOINT, weights_only=False)
    module = build_task("reaching", REACHING)[0]
    module.load_state_dict(checkpoint["state_dict"])  # float32, as bf16-mixed stores them
    expected = quantize_int8(module, "torch.ao")
    observations = torch.randn(64, 6, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(result.module(observations), expected(observations))


def test_bad_requests_are_clear_errors(reaching_dir, tmp_path):
    with pytest.raises(ValueError, match="must differ"):
        post_training_compress(reaching_dir, reaching_dir)
    with pytest.raises(KeyError, match=r"no 'val_acc'.*val_loss"):
        post_training_compress(reaching_dir, tmp_path / "x", objective="val_acc")
    int8 = post_training_compress(reaching_dir, tmp_path / "int8", backend="torch.ao", repeats=1)
    with pytest.raises(ValueError, match="already holds an INT8 model"):
        post_training_compress(int8.output_dir, tmp_path / "again")


def test_reload_without_the_recorded_backend_says_why(reaching_dir, tmp_path):
    output = post_training_compress(reaching_dir, tmp_path / "int8", repeats=1).output_dir
    ckpt = output / CheckpointFilename.DEFAULT_CHECKPOINT
    checkpoint = torch.load(ckpt, weights_only=False)

    if checkpoint["quantization"]["backend"] == "torchao":
        import versatil.quantization.backends as backends

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(backends, "torchao_available", lambda: False)
            with pytest.raises(QuantizationError, match="pip install torchao"):
                load_for_inference(output)

    bare = tmp_path / "bare"
    shutil.copytree(output, bare)
    del checkpoint["quantization"]
    torch.save(checkpoint, bare / CheckpointFilename.DEFAULT_CHECKPOINT)
    with pytest.raises(QuantizationError, match="no 'quantization' entry"):
        load_for_inference(bare)
