"""The disk fills up under a sweep: under its storage path, or under its MLflow store.

A real small disk (a 16 MiB tmpfs mounted for the test, so it needs root, as CI has)
holds the storage path, or the MLflow store; the trial's module fills it after its
first epoch (``tests/user_tasks/disk_filler.py``), so what is written there next (its
second checkpoint, the metrics MLflow logs) meets a full disk.
"""

import io
import logging
import os
import re
import shutil
import subprocess

import pytest

from tests.sweep.exactly_once import assert_exactly_once
from versatil.cli_common import run_main
from versatil.errors import DiskFullError
from versatil.sweep.cli.main import main
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.vocab.names import SWEEP_ENDED
from versatil.sweep.worker.restore import choose_checkpoint

pytestmark = pytest.mark.slow  # a sweep on the Ray cluster


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs at ``tmp_path/disk``, unmounted after the test."""
    if os.geteuid() != 0:
        message = "mounting a tmpfs needs root"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI runs as root)", pytrace=False)
        pytest.skip(message)
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def filling_sweep(sweep_config, disk, **fields):
    """A sweep of 3-epoch trials whose module fills ``disk`` after its first epoch."""
    return sweep_config(
        task={
            "name": "tests.user_tasks.disk_filler:build",
            "params": {"ballast": str(disk), "fill": True},
        },
        objective={"metric": "val_loss", "mode": "min"},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
        **fields,
    )


def test_a_full_disk_fails_the_trial_with_that_reason_once_and_stops_the_sweep(
    ray_cluster, sweep_config, small_disk, tmp_path
):
    config = filling_sweep(
        sweep_config,
        small_disk,
        name="full",
        space={"width": {"grid": [16, 32]}},
        max_concurrent_trials=1,
        max_failures=2,
        storage_path=str(small_disk / "runs"),
        mlflow={"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    )
    stream = io.StringIO()
    with pytest.raises(DiskFullError) as raised:
        run_sweep(config, stream=stream)
    full = f"no space left on {small_disk / 'runs'}"
    # One clear sentence: the disk, that the sweep stopped, how far it got, what to do.
    assert str(raised.value).startswith(f"{full} (errno 28, ENOSPC). The sweep stopped"), str(
        raised.value
    )
    assert "(1 of 2 trials started); free space there" in str(raised.value)
    lines = stream.getvalue().splitlines()
    # The first trial reported its first epoch, then failed with the reason, once: no
    # retry was spent on the full disk, and the second trial never started.
    (failed,) = [line for line in lines if " failed: " in line]
    assert re.search(rf"\] \w+_00000 failed: {re.escape(full)} \(errno 28, ENOSPC\)", failed)
    assert sum(" epoch 1 " in line for line in lines) == 1, lines
    assert not any("_00001 " in line for line in lines), lines
    # Space freed: no checkpoint read back is half-written. The trial's newest readable
    # checkpoint is its first epoch's, whatever the full disk left of the second.
    (small_disk / "ballast.bin").unlink()
    (trial_dir,) = (small_disk / "runs").glob("full-*/*_00000")
    newest = max(trial_dir.glob("checkpoint_0*"))
    chosen, _skipped = choose_checkpoint(newest, "previous")
    assert chosen == trial_dir / "checkpoint_000000"
    # Not marked ended: the sweep stopped short of its plan.
    assert not (trial_dir.parent / SWEEP_ENDED).exists()


def test_a_full_disk_under_the_tracking_store_the_sweep_goes_on_and_sync_backfills(
    ray_cluster, sweep_config, small_disk, tmp_path, _mlflow_sqlite_template, caplog
):
    store = small_disk / "mlflow.db"
    shutil.copyfile(_mlflow_sqlite_template, store)
    config = filling_sweep(
        sweep_config,
        small_disk,
        name="store-full",
        space={"width": {"grid": [16]}},
        mlflow={"tracking_uri": f"sqlite:///{store}"},
    )
    with caplog.at_level(logging.WARNING):
        outcome = run_sweep(config, stream=io.StringIO())
    # The trial trained to its end on the storage path; MLflow's disk was full meanwhile.
    assert [row.status for row in outcome.rows] == ["completed"]
    assert outcome.rows[0].metrics["training_iteration"] == 3
    assert "database or disk is full" in caplog.text
    assert outcome.gap is not None  # its end is not in MLflow yet
    # Space freed: sync logs what MLflow missed, each epoch once.
    (small_disk / "ballast.bin").unlink()
    runs = tmp_path / "runs"
    assert run_main(main, ["sync", "store-full", "--storage-path", str(runs)]) == 0
    counted = assert_exactly_once(outcome.experiment_dir)
    assert (counted.trials, counted.epochs) == (1, 3)
