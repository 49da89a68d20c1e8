"""restore_checkpoint on real checkpoint files: the newest readable one, else the policy's."""

import logging
import zipfile

import pytest
import torch

from versatil.errors import ConfigError
from versatil.sweep.worker.restore import Restored, readable, restore_checkpoint

LAST = "last.ckpt"


def checkpoint(trial_dir, index, *, torn=False):
    """Tune's ``checkpoint_00000N`` directory holding a ``last.ckpt`` saved by torch.

    ``torn``: the file cut in half, as a worker killed mid-write leaves it.
    """
    directory = trial_dir / f"checkpoint_{index:06d}"
    directory.mkdir(parents=True)
    path = directory / LAST
    torch.save({"epoch": index, "state_dict": {"w": torch.full((64, 64), float(index))}}, path)
    (directory / "config.yaml").write_text(f"epoch: {index}\n")
    if torn:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return directory


def epoch_of(path):
    return torch.load(path, weights_only=False)["epoch"]


def test_a_checkpoint_torch_saved_is_readable(tmp_path):
    assert readable(checkpoint(tmp_path, 0) / LAST) is None


def test_a_missing_torn_or_foreign_file_is_unreadable_with_why(tmp_path):
    assert readable(tmp_path / LAST) == f"{tmp_path / LAST} is missing"
    torn = checkpoint(tmp_path, 1, torn=True) / LAST
    assert readable(torn).startswith(f"{torn} cannot be read (BadZipFile: ")
    # A whole zip that is no torch checkpoint fails in torch.load, not in zipfile.
    foreign = tmp_path / "foreign.ckpt"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("hello.txt", "not a checkpoint")
    problem = readable(foreign)
    assert problem.startswith(f"{foreign} cannot be read (") and "BadZipFile" not in problem


def test_the_newest_readable_checkpoint_is_copied_whole(tmp_path):
    checkpoint(tmp_path / "trial", 0)
    newest = checkpoint(tmp_path / "trial", 1)
    into = tmp_path / "restored"
    into.mkdir()
    (into / "stale").write_text("from an earlier attempt")
    restored = restore_checkpoint(newest, into)
    assert restored == Restored(into / LAST, ())
    assert epoch_of(restored.ckpt_path) == 1
    assert sorted(p.name for p in into.iterdir()) == ["config.yaml", LAST]  # replaced
    assert epoch_of(newest / LAST) == 1  # the original stays where Tune keeps it


def test_a_torn_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog):
    trial = tmp_path / "trial"
    checkpoint(trial, 0)
    checkpoint(trial, 1)
    newest = checkpoint(trial, 2, torn=True)
    checkpoint(trial, 3)  # newer than the one Tune restores from: never taken
    into = tmp_path / "restored"
    with caplog.at_level(logging.WARNING, logger="versatil.sweep.worker.restore"):
        restored = restore_checkpoint(newest, into)
    assert restored.ckpt_path == into / LAST
    assert epoch_of(restored.ckpt_path) == 1
    (skipped,) = restored.skipped
    assert skipped.startswith(f"{newest / LAST} cannot be read (BadZipFile: ")
    assert (into / "config.yaml").read_text() == "epoch: 1\n"
    assert "resuming from checkpoint_000001: skipped " in caplog.text


def test_with_none_readable_the_trial_starts_over(tmp_path, caplog):
    trial = tmp_path / "trial"
    checkpoint(trial, 0)
    newest = checkpoint(trial, 1, torn=True)
    (trial / "checkpoint_000000" / LAST).unlink()  # storage that lost it
    into = tmp_path / "restored"
    with caplog.at_level(logging.WARNING, logger="versatil.sweep.worker.restore"):
        restored = restore_checkpoint(newest, into)
    assert restored.ckpt_path is None
    first, second = restored.skipped
    assert first.startswith(f"{newest / LAST} cannot be read (BadZipFile: ")
    assert second == f"{trial / 'checkpoint_000000' / LAST} is missing"
    assert not into.exists()
    assert "starting over: no readable checkpoint" in caplog.text


def test_restart_starts_over_though_an_earlier_checkpoint_is_readable(tmp_path):
    trial = tmp_path / "trial"
    checkpoint(trial, 0)
    newest = checkpoint(trial, 1, torn=True)
    restored = restore_checkpoint(newest, tmp_path / "restored", policy="restart")
    assert restored.ckpt_path is None
    (skipped,) = restored.skipped
    assert skipped.startswith(f"{newest / LAST} cannot be read (")


def test_restart_and_fail_take_a_readable_newest_checkpoint(tmp_path):
    newest = checkpoint(tmp_path / "trial", 0)
    for policy in ("restart", "fail"):
        into = tmp_path / policy
        assert restore_checkpoint(newest, into, policy=policy) == Restored(into / LAST, ())


def test_fail_names_the_unreadable_file_and_the_other_policies(tmp_path):
    trial = tmp_path / "trial"
    checkpoint(trial, 0)
    newest = checkpoint(trial, 1, torn=True)
    message = (
        rf"^on_unreadable_checkpoint: fail: .*checkpoint_000001/{LAST} cannot be read "
        r"\(BadZipFile: .*\); the trial cannot resume \(set on_unreadable_checkpoint: "
        r"previous or restart to go on without it\)$"
    )
    with pytest.raises(ConfigError, match=message):
        restore_checkpoint(newest, tmp_path / "restored", policy="fail")
    assert not (tmp_path / "restored").exists()
