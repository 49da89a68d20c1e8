"""Real sweeps on a real multi-node Ray cluster, each trial a real Lightning fit."""

import io
import json
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from versatil.sweep.config.planning import make_plan
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.report.load import load_report

pytestmark = pytest.mark.slow  # every test runs a sweep on the Ray cluster


def run(config):
    stream = io.StringIO()
    outcome = run_sweep(config, stream=stream)
    return outcome, stream.getvalue()


def test_grid_over_enum_axes_is_the_cross_product_with_reasons(ray_cluster, sweep_config, tmp_path):
    config = sweep_config(
        space={
            "precision": ["32", "16-mixed", "bf16-true"],
            "matmul_precision": ["highest", "medium"],
        },
    )
    outcome, progress = run(config)
    combos = sorted((r.axes["precision"], r.axes["matmul_precision"]) for r in outcome.rows)
    assert combos == sorted(
        (p, m) for p in ("32", "16-mixed", "bf16-true") for m in ("highest", "medium")
    )
    by_status = {}
    for row in outcome.rows:
        by_status.setdefault(row.status, []).append(row)
    assert len(by_status["completed"]) == 4 and len(by_status["infeasible"]) == 2
    for row in by_status["infeasible"]:
        assert row.axes["precision"] == "16-mixed"
        assert "16-mixed is not supported on cpu" in row.reason
    assert "infeasible: precision 16-mixed" in progress
    assert outcome.best is not None and outcome.best.status == "completed"
    assert (Path(outcome.best.checkpoint) / "last.ckpt").is_file()
    assert (Path(outcome.best.checkpoint) / "config.yaml").is_file()

    # Warm workers: six trials ran in fewer processes, and each saw only its own settings.
    rows = [r for r in outcome.rows if r.status == "completed"]
    assert len({r.metrics["pid"] for r in rows}) < len(rows)
    for row in rows:
        assert row.metrics["in_effect/matmul_precision"] == row.axes["matmul_precision"]
        assert row.metrics["in_effect/default_dtype"] == "float32"
        assert {"samples_per_sec", "epoch_time_s", "peak_memory_mb"} <= set(row.metrics)
    by_pid = {}
    for row in rows:
        settings = (row.axes["precision"], row.axes["matmul_precision"])
        by_pid.setdefault(row.metrics["pid"], set()).add(settings)
    assert any(len(seen) > 1 for seen in by_pid.values()), "no worker ran two different trials"
    # The cluster has two worker nodes, and trials ran on both.
    assert len({r.metrics["node_id"] for r in outcome.rows}) == 2

    # The plan the sweep ran, beside its results and on its parent run.
    plan = json.loads((outcome.experiment_dir / "plan.json").read_text())
    assert len(plan["trials"]) == 6 and plan["search"]["algorithm"] == "grid"
    assert plan["reference"]["settings"] == {"precision": "32", "matmul_precision": "highest"}
    client = MlflowClient(outcome.tracking.tracking_uri)
    logged = client.download_artifacts(outcome.tracking.parent_run_id, "plan.json", str(tmp_path))
    assert json.loads(Path(logged).read_text()) == plan


def test_asha_stops_poor_trials_early(ray_cluster, sweep_config):
    # Good learning rates first: async HyperBand compares each trial with the results already
    # recorded at a rung, so a poor trial is only stopped once a better one has passed it.
    config = sweep_config(
        space={"lr": {"grid": [1e-2, 3e-3, 3e-5, 1e-5]}},
        trainer={"max_epochs": 4, "accelerator": "cpu"},
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2},
    )
    outcome, _ = run(config)
    stopped = [r for r in outcome.rows if r.status == "stopped"]
    assert stopped, [(r.axes, r.status, r.epochs) for r in outcome.rows]
    assert all(r.epochs < 4 for r in stopped)
    assert any(r.status == "completed" and r.epochs == 4 for r in outcome.rows)
    assert outcome.best.axes["lr"] in (3e-3, 1e-2)


def test_pbt_exploits_checkpoints_of_better_trials(ray_cluster, sweep_config):
    config = sweep_config(
        task={"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "batch_size": 16}},
        space={"lr": {"grid": [1e-5, 1e-2]}},
        # Five perturbation points: PBT skips an exploit whose source checkpoint is not yet
        # registered, so one point alone can pass without one.
        trainer={"max_epochs": 6, "accelerator": "cpu"},
        scheduler={
            "type": "pbt",
            "perturbation_interval": 1,
            "quantile_fraction": 0.5,
            "synch": True,
            "hyperparam_mutations": {"lr": {"loguniform": [1e-3, 3e-2]}},
        },
    )
    # lr changes only when PBT exploits a better trial and perturbs its lr. Whether Ray's
    # PBT exploits at a given point depends on timing (it skips an exploit whose source
    # checkpoint is not registered yet), so a second sweep may be needed.
    for _attempt in range(2):
        outcome, _ = run(config)
        exploited = [r for r in outcome.rows if r.axes["lr"] not in (1e-5, 1e-2)]
        if exploited:
            break
    assert exploited, "no trial was exploited in two PBT sweeps"
    for row in exploited:
        # It continued from a checkpoint with the mutated lr, to the last epoch.
        assert row.metrics["resumed"] and row.epochs == 6
    assert all(r.status == "completed" for r in outcome.rows)
    # Every epoch trained with the lr of the config it reported under, exploits included.
    last = {}
    for path in outcome.experiment_dir.glob("*/result.json"):
        for line in path.read_text().splitlines():
            result = json.loads(line)
            assert result["optimizer/lr"] == pytest.approx(result["config"]["lr"])
        last[path.parent.name] = result
    # Each row is its own trial's, also after an exploit at the last perturbation point
    # (Tune then holds the copied trial's result and checkpoint): its last result, the lr
    # that result trained with, the checkpoint that result saved.
    assert sorted(r.trial_id for r in outcome.rows) == sorted(last)
    for row in outcome.rows:
        mine = last[row.trial_id]
        assert row.objective == pytest.approx(mine["val_loss"])
        assert row.axes["lr"] == pytest.approx(mine["config"]["lr"])
        assert row.checkpoint == str(
            outcome.experiment_dir / row.trial_id / mine["checkpoint_dir_name"]
        )
    # MLflow holds one run per trial, and the report shows the lr each trial last trained
    # with (its params keep the one it opened with).
    report = load_report(
        outcome.tracking.tracking_uri, config.experiment_name, outcome.tracking.parent_run_id
    )
    assert {r.trial_id: r.axes["lr"] for r in report.rows} == pytest.approx(
        {r.trial_id: r.axes["lr"] for r in outcome.rows}
    )


def test_optuna_samples_the_space(ray_cluster, sweep_config):
    config = sweep_config(
        space={"precision": ["32", "bf16-mixed"], "lr": {"loguniform": [1e-4, 1e-2]}},
        search={"algorithm": "optuna", "num_samples": 3, "seed": 1},
    )
    outcome, _ = run(config)
    assert len(outcome.rows) == 3
    assert all(1e-4 <= r.axes["lr"] <= 1e-2 for r in outcome.rows)
    assert len({r.axes["lr"] for r in outcome.rows}) == 3
    assert all(r.status == "completed" for r in outcome.rows)


def test_workers_per_trial_runs_data_parallel_on_gloo_and_resumes(ray_cluster, sweep_config):
    config = sweep_config(
        # A user's task that raises at the start of epoch 1 unless its fit was resumed: the
        # first attempt reports epoch 0 with its checkpoint and fails; Tune retries it.
        task={"name": "tests.training.user_tasks:build", "params": {"crash_epoch": 1}},
        space={"precision": ["32"]},
        # Two workers of half a CPU each, beside the coordinator's sliver of one.
        resources={"cpu": 0.5, "workers_per_trial": 2},
        max_concurrent_trials=1,
        max_failures=1,
    )
    outcome, _ = run(config)
    (row,) = outcome.rows
    assert row.status == "completed", row.reason
    assert row.metrics["world_size"] == 2
    assert row.epochs == 2
    (trial_results,) = outcome.experiment_dir.glob("*/result.json")
    reported = [json.loads(line) for line in trial_results.read_text().splitlines()]
    # Epoch 0 is not trained again: the retry continued from its checkpoint on both ranks.
    # (Whether the first attempt's epoch-0 line reached result.json before the crash
    # depends on when Tune took it; the retry's lines do not.)
    epochs = [(r["epoch"], r["resumed"]) for r in reported]
    assert epochs in ([(0, False), (1, True)], [(1, True)]), epochs
    # Rank 0's checkpoint of the resumed epoch is the trial's checkpoint in Tune.
    checkpoint = torch.load(Path(row.checkpoint) / "last.ckpt", weights_only=False)
    assert checkpoint["epoch"] == 1


def test_each_graph_compiles_once_per_cluster(ray_cluster, sweep_config):
    # Four compiled trials of one graph (the learning rate is not part of it), two at a
    # time on two nodes with separate inductor caches: one trial compiles and publishes,
    # every other one loads its graphs from the sweep's storage.
    config = sweep_config(
        space={"compile_mode": ["default"], "lr": {"grid": [0.001, 0.002, 0.003, 0.004]}},
        trainer={"max_epochs": 1, "accelerator": "cpu"},
    )
    outcome, _ = run(config)
    rows = outcome.rows
    assert [r.status for r in rows] == ["completed"] * 4
    published = [r for r in rows if r.metrics["compile/cache_published"] == 1.0]
    loaded = [r for r in rows if r.metrics["compile/cache_loaded"] == 1.0]
    assert len(published) == 1 and len(loaded) == 3
    assert published[0].metrics["compile/fxgraph_cache_misses"] > 0
    for row in loaded:
        assert row.metrics["compile/fxgraph_cache_misses"] == 0
        assert row.metrics["compile/fxgraph_cache_hits"] > 0
    assert len({r.metrics["node_id"] for r in rows}) == 2
    assert len(list(make_plan(config).trial.compile_cache_dir().glob("*.bundle"))) == 1

    # Switched off, nothing is shared: every trial compiles (on its node) by itself.
    off = sweep_config(
        name="off",
        space={"compile_mode": ["default"], "lr": {"grid": [0.001, 0.002]}},
        trainer={"max_epochs": 1, "accelerator": "cpu", "compile_cache": False},
        storage_path=str(config.storage_dir().parent / "off"),
    )
    outcome, _ = run(off)
    for row in outcome.rows:
        assert "compile/cache_loaded" not in row.metrics
    assert make_plan(off).trial.compile_cache_dir() is None
    assert not (off.storage_dir() / ".compile_cache").exists()
