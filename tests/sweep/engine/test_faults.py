"""Faults a sweep meets: an unwritable storage path, a trial out of memory."""

import pytest
import ray
import yaml

from versatil.cli_common import run_main
from versatil.sweep.cli.main import main


@pytest.mark.parametrize("where", ["under_a_file", "in_proc"])
def test_unwritable_storage_path_is_one_clear_error_before_ray_starts(tmp_path, capsys, where):
    if where == "under_a_file":
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        storage = str(blocker / "sweeps")
        reason = "Not a directory"
    else:
        storage = "/proc/versatil-sweeps"  # procfs: nobody, root included, can create here
        reason = "No such file or directory"
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "nowhere",
                "task": {"name": "reaching", "params": {"n_episodes": 8, "horizon": 5}},
                "trainer": {"max_epochs": 1, "accelerator": "cpu"},
                "storage_path": storage,
            }
        )
    )
    ray_before = ray.is_initialized()
    code = run_main(main, ["--config", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: storage_path: {storage!r} cannot be written ({reason}")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert ray.is_initialized() == ray_before  # the check came before Ray


def test_a_trial_out_of_memory_fails_with_that_reason_and_the_sweep_goes_on(
    ray_cluster, sweep_config
):
    import io

    from versatil.sweep.engine.runner import run_sweep

    config = sweep_config(
        task={"name": "tests.user_tasks.memory_hog:build"},
        objective={"metric": "val_loss", "mode": "min"},
        space={"hog": {"grid": [False, True]}},
        max_failures=2,
    )
    outcome = run_sweep(config, stream=io.StringIO())
    by_hog = {row.axes["hog"]: row for row in outcome.rows}
    assert by_hog[False].status == "completed"
    hog = by_hog[True]
    assert hog.status == "failed"
    assert hog.reason.startswith("out of memory: DefaultCPUAllocator: can't allocate memory")
    assert "10000000000000 bytes" in hog.reason
    # Its first epoch was reported before the second ran out; it was not retried.
    assert hog.metrics["training_iteration"] == 2
    assert hog.metrics["iterations_since_restore"] == 2
    assert outcome.best is not None and outcome.best.trial_id == by_hog[False].trial_id


@pytest.mark.parametrize(
    ("policy", "status", "epochs_after_retry"),
    [
        ("previous", "completed", [1, 2]),
        ("restart", "completed", [0, 1, 2]),
        ("fail", "failed", []),
    ],
)
def test_a_torn_checkpoint_met_on_restore(
    ray_cluster, sweep_config, tmp_path, policy, status, epochs_after_retry
):
    import io
    import json

    from versatil.sweep.engine.runner import run_sweep

    config = sweep_config(
        name=f"torn-{policy}",
        task={
            "name": "tests.user_tasks.torn_checkpoint:build",
            "params": {"storage": str(tmp_path / "runs")},
        },
        space={"width": {"grid": [8]}},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
        max_failures=1,
        on_unreadable_checkpoint=policy,
    )
    outcome = run_sweep(config, stream=io.StringIO())
    (row,) = outcome.rows
    assert row.status == status
    results = [
        json.loads(x)
        for x in (outcome.experiment_dir / row.trial_id / "result.json").read_text().splitlines()
    ]
    # Two epochs, then the worker died at the third's start with checkpoint_000001 torn.
    assert [r["epoch"] for r in results[:2]] == [0, 1]  # epochs count from 0
    retried = results[2:]
    if policy == "fail":
        (last,) = retried
        assert last["status"] == "failed"
        assert last["reason"].startswith("on_unreadable_checkpoint: fail: ")
        assert "checkpoint_000001/last.ckpt cannot be read" in last["reason"]
        return
    assert [r["epoch"] for r in retried] == epochs_after_retry
    assert all(r["checkpoint/unreadable_skipped"] == 1 for r in retried)
    assert row.metrics["epoch"] == 2


def test_a_worker_killed_while_writing_its_checkpoint(ray_cluster, tmp_path):
    """SIGKILL mid-save of a checkpoint: nothing half-saved is taken; the trial retries once."""
    import io
    import json
    import os
    import signal
    import threading
    from pathlib import Path

    from tests.sweep.drivers import gated_sweep, wait_for
    from tests.sweep.exactly_once import assert_exactly_once
    from versatil.sweep.config.load import validate_sweep
    from versatil.sweep.engine.runner import run_sweep

    config = validate_sweep(
        gated_sweep(
            tmp_path,
            "killed-writing",
            [0.001],
            gated_epoch=1,
            gated_at="checkpoint_write",
            max_failures=1,
            trainer={"max_epochs": 3, "accelerator": "cpu"},
        )
    )
    gate, started, seen = tmp_path / "gate", [], {}

    def kill_mid_write():
        wait_for(lambda: Path(f"{gate}.waiting").exists(), "the checkpoint write at its gate")
        # The driver takes epoch 0's result on its own time: wait until Tune recorded it.
        wait_for(lambda: list(started[0].glob("*/result.json")), "epoch 0 recorded")
        (trial_dir,) = [p.parent for p in started[0].glob("*/result.json")]
        wait_for(lambda: (trial_dir / "result.json").read_text().strip(), "epoch 0 recorded")
        seen["partial"] = [p for p in trial_dir.glob("checkpoint/.last.ckpt.*") if p.is_dir()]
        first = json.loads((trial_dir / "result.json").read_text().splitlines()[0])
        os.kill(first["pid"], signal.SIGKILL)
        gate.touch()

    killer = threading.Thread(target=kill_mid_write, daemon=True)
    killer.start()
    try:
        outcome = run_sweep(config, stream=io.StringIO(), on_start=started.append)
    finally:
        gate.touch()
        killer.join(timeout=60)
    # The save had begun: its temporary directory was made (Lightning pickles the whole
    # checkpoint in memory, then writes the file; the kill came mid-pickle).
    assert len(seen.get("partial", [])) == 1, seen
    (row,) = outcome.rows
    assert row.status == "completed"
    results = [
        json.loads(line)
        for line in (outcome.experiment_dir / row.trial_id / "result.json").read_text().splitlines()
    ]
    # Epoch 1 died in its checkpoint's write, before its report: the retry restored
    # epoch 0's checkpoint and trained epochs 1 and 2.
    assert [r["epoch"] for r in results] == [0, 1, 2]
    assert results[1]["iterations_since_restore"] == 1 and results[1]["resumed"]
    assert_exactly_once(outcome.experiment_dir)
