"""Faults a sweep meets: an unwritable storage path, a trial out of memory."""

import pytest
import ray
import yaml

from versatil.cli_common import run_main
from versatil.sweep.__main__ import main


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

    from versatil.sweep.runner import run_sweep

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

    from versatil.sweep.runner import run_sweep

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
