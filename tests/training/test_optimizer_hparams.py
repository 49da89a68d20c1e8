"""A restored fit trains with the optimizer values its own params configure (PBT's exploit)."""

import pytest

from versatil.training.config import TrainConfig
from versatil.training.fit import train

USER_TASK = "tests.training.user_tasks:build"


def user_config(max_epochs, **params):
    return TrainConfig.from_mapping(
        {"task": USER_TASK, "params": params, "max_epochs": max_epochs, "accelerator": "cpu"}
    )


def groups_per_epoch():
    """An on_epoch_end hook recording each epoch's param groups, and what it recorded."""
    seen = []

    def hook(trainer, metrics):
        groups = trainer.optimizers[0].param_groups
        seen.append([{k: g[k] for k in ("lr", "momentum")} for g in groups])

    return hook, seen


def test_restored_user_task_trains_with_its_new_values(tmp_path):
    train(user_config(2, lr=0.1, momentum=0.9, head_lr_factor=0.5), tmp_path)
    hook, seen = groups_per_epoch()
    # A PBT exploit: the source's checkpoint, this trial's mutated lr and momentum.
    result = train(
        user_config(4, lr=0.02, momentum=0.5, head_lr_factor=0.5),
        tmp_path,
        ckpt_path=tmp_path / "last.ckpt",
        on_epoch_end=hook,
        optimizer_keys=("lr", "momentum"),
    )
    assert [m["epoch"] for m in result.history] == [2, 3]
    for groups in seen:
        # Each group keeps the task's own factor (the head's lr is halved).
        assert groups == [
            {"lr": pytest.approx(0.02), "momentum": 0.5},
            {"lr": pytest.approx(0.01), "momentum": 0.5},
        ]
    for metrics in result.history:
        assert metrics["optimizer/lr"] == pytest.approx(0.02)
        assert metrics["optimizer/momentum"] == 0.5


def test_without_keys_a_restored_optimizer_keeps_its_checkpoint_values(tmp_path):
    train(user_config(1, lr=0.1), tmp_path)
    result = train(user_config(2, lr=0.02), tmp_path, ckpt_path=tmp_path / "last.ckpt")
    # A retry of the same trial: Lightning's restore, untouched.
    assert result.metrics["optimizer/lr"] == pytest.approx(0.1)
    assert "optimizer/momentum" not in result.metrics


def test_a_new_base_lr_goes_through_the_lr_schedule(tmp_path):
    # The schedule halves the lr every epoch: epochs 0, 1 at 0.1, 0.05.
    first = train(user_config(2, lr=0.1, scheduler=True), tmp_path)
    assert [m["optimizer/lr"] for m in first.history] == pytest.approx([0.1, 0.05])
    resumed = train(
        user_config(4, lr=0.2, scheduler=True),
        tmp_path,
        ckpt_path=tmp_path / "last.ckpt",
        optimizer_keys=("lr",),
    )
    # Epochs 2, 3 go on with the schedule from the new base: 0.2 / 4, 0.2 / 8.
    assert [m["optimizer/lr"] for m in resumed.history] == pytest.approx([0.05, 0.025])
