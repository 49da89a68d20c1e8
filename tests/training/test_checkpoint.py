"""Checkpoint directories: layout, atomic writes, plain Lightning loading, inference reload."""

import pytest
import torch
import yaml

from versatil.inference import load_for_inference
from versatil.training.checkpoint import atomic_write, read_config, write_checkpoint_dir
from versatil.training.constants import CheckpointFilename, CheckpointKey
from versatil.training.fit import build_trainer, train
from versatil.training.input_example import INPUT_EXAMPLE_FILENAME
from versatil.training.tasks.reaching import BehaviorCloningPolicy


def test_directory_holds_checkpoint_and_resolved_config(tmp_path, small_config):
    config = small_config(precision="bf16-mixed")
    result = train(config, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        CheckpointFilename.CONFIG,
        INPUT_EXAMPLE_FILENAME,
        CheckpointFilename.DEFAULT_CHECKPOINT,
    ]
    assert read_config(tmp_path) == config
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["precision"] == "bf16-mixed"
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert set(checkpoint[CheckpointKey.STATE_DICT]) == set(result.module.state_dict())
    assert checkpoint[CheckpointKey.INPUT_STATS] == result.module.normalizer.stats()
    assert checkpoint[CheckpointKey.INPUT_STATS]["mean"] == pytest.approx(
        result.datamodule.input_stats["mean"], abs=1e-6
    )


def test_plain_lightning_load_from_checkpoint(tmp_path, small_config):
    result = train(small_config(), tmp_path)
    loaded = BehaviorCloningPolicy.load_from_checkpoint(tmp_path / "last.ckpt", map_location="cpu")
    for name, tensor in result.module.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    assert loaded.hparams.width == 16


def test_interrupted_write_leaves_the_old_checkpoint_intact(tmp_path, small_config, monkeypatch):
    import lightning.fabric.plugins.io.torch_io as torch_io

    config = small_config()
    result = train(config, tmp_path)
    before = (tmp_path / "last.ckpt").read_bytes()
    trainer = build_trainer(config, [])
    trainer.strategy.connect(result.module)

    def torn_write(checkpoint, path):
        with open(path, "wb") as file:
            file.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch_io, "_atomic_save", torn_write)
    with pytest.raises(OSError, match="disk full"):
        write_checkpoint_dir(trainer, tmp_path, config)
    assert (tmp_path / "last.ckpt").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.yaml",
        INPUT_EXAMPLE_FILENAME,
        "last.ckpt",
    ]
    BehaviorCloningPolicy.load_from_checkpoint(tmp_path / "last.ckpt")


def test_atomic_write_replaces_a_directory(tmp_path):
    target = tmp_path / "tokenizer"

    def write(version):
        def writer(path):
            path.mkdir()
            (path / "vocab.txt").write_text(version)

        return writer

    atomic_write(target, write("one"))
    atomic_write(target, write("two"))
    assert (target / "vocab.txt").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer"]


def test_user_task_tokenizer_is_saved(tmp_path, small_config):
    train(small_config(task="tests.training.toy_task:build", params={"hidden": 3}), tmp_path)
    assert (
        tmp_path / CheckpointFilename.TOKENIZER_DIR / "vocab.json"
    ).read_text() == '["a", "b", "c"]'
    assert load_for_inference(tmp_path).tokenizer_dir == tmp_path / "tokenizer"


# (precision, task params, dtype at inference, absolute tolerance on actions in [-1, 1])
INFERENCE_CASES = [
    ("32", {}, torch.float32, 1e-5),
    ("64", {}, torch.float64, 1e-10),
    ("bf16-mixed", {}, torch.bfloat16, 6e-2),
    ("bf16-true", {}, torch.bfloat16, 1e-6),
    ("16-true", {"eps": 1e-4}, torch.float16, 1e-3),
]


@pytest.mark.parametrize(("precision", "params", "dtype", "tolerance"), INFERENCE_CASES)
def test_inference_reload_matches_training_time_validation(
    tmp_path, small_config, precision, params, dtype, tolerance
):
    config = small_config(precision=precision, params={"n_episodes": 16, "horizon": 10, **params})
    result = train(config, tmp_path)
    assert result.status == "completed"
    trainer = build_trainer(config, [])
    validation_outputs = torch.cat(trainer.predict(result.module, datamodule=result.datamodule))
    observations = result.datamodule.val_set.tensors[0]

    model = load_for_inference(tmp_path)
    outputs = model(observations)

    assert model.dtype is dtype and outputs.dtype is dtype
    assert model.input_stats == result.module.normalizer.stats()
    torch.testing.assert_close(
        outputs.double(), validation_outputs.double(), atol=tolerance, rtol=0
    )
