"""Mistakes in a sweep caught before Ray starts, and a missing objective caught at once."""

import io

import pytest
import yaml
from mlflow.tracking import MlflowClient

from versatil.errors import ConfigError
from versatil.sweep.cli.main import main
from versatil.sweep.engine.runner import run_sweep
from versatil.training.spec import ACCELERATORS

USER_TASK = "tests.user_tasks.dict_batches:build"
SCHEMALESS_TASK = "tests.user_tasks.own_dataloaders:build"


def dry_run(tmp_path, **fields):
    """Runs the real CLI's ``--dry-run`` on a sweep file made of ``fields``."""
    data = {"name": "typo", "trainer": {"max_epochs": 1, "accelerator": "cpu"}, **fields}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    return main(["--config", str(path), "--dry-run"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"task": {"name": "reaching", "params": {"lrr": 0.01}}},
            r"task\.params\.lrr: 'lrr' is not a param of task 'reaching' \(did you mean 'lr'\?\); "
            r"valid params: action_noise, batch_size, .*, lr, .*width",
        ),
        (
            {"task": {"name": USER_TASK}, "space": {"hiden": {"choice": [8, 16]}}},
            rf"space\.hiden: 'hiden' is not a param of task '{USER_TASK}' "
            r"\(did you mean 'hidden'\?\); valid params: batch_size, hidden, lr, n_samples",
        ),
        (
            {"task": {"name": USER_TASK}, "space": {"lr": {"choice": [0.01, -1]}}},
            r"space\.lr: -1 is invalid: Input should be greater than 0",
        ),
        (
            {
                "space": {"lr": {"loguniform": [1e-4, 1e-2]}},
                "scheduler": {"type": "pbt", "hyperparam_mutations": {"lrr": {"choice": [0.1]}}},
            },
            r"scheduler\.hyperparam_mutations\.lrr: 'lrr' is neither an axis of space nor a task "
            r"param \(did you mean 'lr'\?\); choose from lr",
        ),
        (
            {"trainer": {"accelerator": "tpuu"}},
            r"trainer\.accelerator: 'tpuu' is not an accelerator Lightning accepts; "
            r"choose from auto, cpu, gpu, cuda, mps, tpu",
        ),
        (
            {"objective": {"metrics": {"val_loss": "min", "time_total_s": "min"}}},
            r"objective\.metrics: 'time_total_s' is bookkeeping of each result, not a metric; use "
            r"a metric the module logs \(val_loss\) or one versatil measures \(samples_per_sec, ",
        ),
    ],
    ids=["task-param", "user-axis", "user-value", "mutation", "accelerator", "objective"],
)
def test_typos_are_one_clear_error_before_anything_starts(tmp_path, fields, message):
    with pytest.raises(ConfigError, match=message):
        dry_run(tmp_path, **fields)


def test_a_task_without_params_model_is_still_loaded_and_checked_for_import(tmp_path):
    assert dry_run(tmp_path, task={"name": SCHEMALESS_TASK, "params": {"anything": 1}}) == 0
    with pytest.raises(ConfigError, match=r"task: 'tests\.user_tasks\.nope:build' cannot be"):
        dry_run(tmp_path, task={"name": "tests.user_tasks.nope:build"})


def test_accelerator_names_are_lightnings():
    from lightning.pytorch.accelerators import AcceleratorRegistry

    assert set(ACCELERATORS) == {"auto", "gpu", *AcceleratorRegistry.available_accelerators()}


def test_a_missing_objective_ends_the_sweep_in_the_first_epoch(ray_cluster, sweep_config):
    config = sweep_config(
        name="typo-objective",
        task={"name": USER_TASK, "params": {"hidden": 8}},
        objective={"metric": "val_los", "mode": "min"},
        space={"lr": {"grid": [0.01, 0.02, 0.03, 0.04, 0.05, 0.06]}},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
    )
    stream = io.StringIO()
    with pytest.raises(ConfigError) as raised:
        run_sweep(config, stream=stream)
    message = str(raised.value)
    assert "objective.metric: 'val_los' was not logged by the module in epoch 0" in message
    assert "it logged train_loss, truth/samples, truth/span_s, val_loss, val_mae;" in message
    assert "The sweep stopped at that result" in message
    # No trial trained past its first epoch, and not every trial ran.
    client = MlflowClient(f"sqlite:///{config.storage_dir() / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("typo-objective")
    runs = client.search_runs([experiment.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert 1 <= len(children) < 6
    for run in children:
        history = client.get_metric_history(run.info.run_id, "train_loss")
        assert len(history) <= 1
        assert run.info.status != "RUNNING"
    assert stream.getvalue().count("epoch 2") == 0


def test_a_setting_not_in_effect_fails_its_trial_without_a_retry(ray_cluster, sweep_config):
    # A module whose compiled forward never runs: the trial would be reported as compiled.
    config = sweep_config(
        name="not-in-effect",
        task={"name": "tests.training.in_effect_tasks:never_compiled", "params": {}},
        space={"compile_mode": ["default"]},
        max_failures=1,
    )
    outcome = run_sweep(config, stream=io.StringIO())
    (row,) = outcome.rows
    assert row.status == "failed"
    assert "settings not in effect" in row.reason and "fell back to eager" in row.reason
    (results,) = outcome.experiment_dir.glob("*/result.json")
    # One epoch with its flags, then the failure; no second attempt.
    reported = [yaml.safe_load(line) for line in results.read_text().splitlines()]
    assert [r["status"] for r in reported] == ["running", "failed"]
    assert reported[0]["compile/fell_back_to_eager"] == 1.0
