"""Data-parallel trials (two Ray Train workers, DDP on gloo) end as single-worker ones do.

Bad task params, running out of memory and a torn newest checkpoint, each met in a real
sweep on the Ray cluster, with the tasks of ``tests/sweep/worker/ddp_tasks.py``.
"""

import io
import json

import pytest

from versatil.sweep.engine.runner import run_sweep

pytestmark = pytest.mark.slow  # every test runs a sweep on the Ray cluster

# Two workers of half a CPU each, beside the coordinator's sliver of one: a trial fits on
# one of the cluster's 1-CPU nodes, or across both.
DATA_PARALLEL = {"cpu": 0.5, "workers_per_trial": 2}


def results_of(outcome, row):
    path = outcome.experiment_dir / row.trial_id / "result.json"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_bad_params_fail_the_trial_with_the_message_and_the_sweep_goes_on(
    ray_cluster, sweep_config
):
    config = sweep_config(
        name="ddp-config-error",
        task={"name": "tests.sweep.worker.ddp_tasks:odd_width"},
        space={"width": {"grid": [8, 7]}},
        trainer={"max_epochs": 1, "accelerator": "cpu"},
        resources=DATA_PARALLEL,
        max_failures=1,
    )
    outcome = run_sweep(config, stream=io.StringIO())
    by_width = {row.axes["width"]: row for row in outcome.rows}
    assert by_width[8].status == "completed", by_width[8].reason
    assert by_width[8].metrics["world_size"] == 2
    bad = by_width[7]
    assert bad.status == "failed"
    assert bad.reason == "task.params.width: 7 is odd; the classifier takes even widths"
    # One result, from the first attempt: a retry would fail the same way.
    (result,) = results_of(outcome, bad)
    assert result["status"] == "failed" and result["reason"] == bad.reason
    assert result["val_loss"] == float("inf")  # the objective's worst value
    assert outcome.best is not None and outcome.best.trial_id == by_width[8].trial_id


def test_a_rank_out_of_memory_fails_the_trial_with_that_reason(ray_cluster, sweep_config):
    # Every rank out of memory, and rank 1 alone while rank 0 waits for it in the
    # gradients' all-reduce: either way the trial ends with the reason, once.
    config = sweep_config(
        name="ddp-oom",
        task={"name": "tests.sweep.worker.ddp_tasks:rank_hog"},
        space={"hog_rank": {"grid": [-1, 1]}},
        resources=DATA_PARALLEL,
        max_failures=1,
    )
    outcome = run_sweep(config, stream=io.StringIO())
    assert sorted(row.axes["hog_rank"] for row in outcome.rows) == [-1, 1]
    for row in outcome.rows:
        assert row.status == "failed", (row.axes, row.reason)
        assert row.reason.startswith("out of memory: DefaultCPUAllocator: can't allocate memory")
        assert "10000000000000 bytes" in row.reason
        # Its first epoch was reported before the second ran out; it was not retried.
        assert row.metrics["training_iteration"] == 2
        assert row.metrics["iterations_since_restore"] == 2
        first, last = results_of(outcome, row)
        assert (first["status"], first["world_size"]) == ("running", 2)
        assert last["status"] == "failed" and last["reason"] == row.reason


def test_a_torn_newest_checkpoint_is_skipped_on_restore(ray_cluster, sweep_config, tmp_path):
    config = sweep_config(
        name="ddp-torn",
        task={
            "name": "tests.sweep.worker.ddp_tasks:torn_on_rank_zero",
            "params": {"storage": str(tmp_path / "runs")},
        },
        space={"width": {"grid": [8]}},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
        resources=DATA_PARALLEL,
        max_failures=1,
        on_unreadable_checkpoint="previous",
    )
    outcome = run_sweep(config, stream=io.StringIO())
    (row,) = outcome.rows
    assert row.status == "completed", row.reason
    results = results_of(outcome, row)
    # Two epochs; then rank 0 tore checkpoint_000001 (epoch 1's) at the third's start, and
    # the attempt failed.
    assert [(r["epoch"], r["resumed"]) for r in results[:2]] == [(0, False), (1, False)]
    assert all("checkpoint/unreadable_skipped" not in r for r in results[:2])
    # The retry skipped the torn checkpoint and resumed from epoch 0's on both ranks.
    retried = results[2:]
    assert [r["epoch"] for r in retried] == [1, 2]
    assert all(r["resumed"] and r["world_size"] == 2 for r in retried)
    assert all(r["checkpoint/unreadable_skipped"] == 1 for r in retried)
    assert row.metrics["epoch"] == 2
    (trial_dir,) = {p.parent for p in outcome.experiment_dir.glob("*/torn-once")}
    assert trial_dir.name == row.trial_id
