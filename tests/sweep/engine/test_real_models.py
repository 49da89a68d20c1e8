"""Real models as users train them: step budgets, an endless stream, their Trainer options.

Real sweeps on the Ray cluster, logged to a real MLflow server: a causal language model
on an endless ``IterableDataset`` budgeted in steps, validated every few steps; the same
stream with only ``max_epochs`` (refused as the fit starts, and the sweep stops); an
image classifier on a dataset longer than its budget, with accumulation, clipping and a
callback of the user's; the language model again, given as a LightningCLI config.
"""

import io
import json
import re
import time
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from versatil.errors import ConfigError
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.tracking import child_runs

LM = {
    "name": "tests.user_tasks.causal_lm_stream:build",
    "params": {"seq_len": 16, "batch_size": 16},
}
CONV = {
    "name": "tests.user_tasks.conv_classifier:build",
    "params": {"n_train": 2048, "n_val": 64, "image_size": 16, "channels": 8, "blocks": 1},
}


CLI_CONFIG = Path(__file__).resolve().parents[2] / "user_tasks" / "configs" / "causal_lm.yaml"


def _global_step(row) -> int:
    return torch.load(f"{row.checkpoint}/last.ckpt", weights_only=False)["global_step"]


@pytest.mark.slow  # a sweep of two trials on the Ray cluster
def test_a_language_model_on_an_endless_stream_trains_its_step_budget(
    ray_cluster, mlflow_server, sweep_config
):
    config = sweep_config(
        name="lm-steps",
        task=LM,
        trainer={"accelerator": "cpu", "max_steps": 12, "val_check_interval": 6},
        space={"precision": ["32", "bf16-mixed"]},
    )
    stream = io.StringIO()
    outcome = run_sweep(config, stream=stream, tracking_uri=mlflow_server)
    assert {r.status for r in outcome.rows} == {"completed"}, [r.reason for r in outcome.rows]
    # A first line before Ray and the first result; the last trial's line says all ended.
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("sweep 'lm-steps': 2 trials, at most 2 at once, 12 steps each; ")
    assert sum("trials ended" in line for line in lines) == 2
    assert sum(" step 12/12 val_loss=" in line for line in lines) == 2  # not "epoch 1"
    assert "[1/2 trials ended, about " in stream.getvalue()
    assert "[2/2 trials ended]" in stream.getvalue()
    # The plan logged on the parent run counts the budget in steps, and each trial
    # trained exactly it: no epoch ever ended.
    client = MlflowClient(mlflow_server)
    plan = json.loads(
        Path(client.download_artifacts(outcome.tracking.parent_run_id, "plan.json")).read_text()
    )
    assert plan["budget"]["unit"] == "steps" and plan["budget"]["amount"] == 12
    assert all(_global_step(r) == 12 and r.epochs == 1 for r in outcome.rows)
    assert all(r.objective is not None and r.metrics["samples_per_sec"] > 0 for r in outcome.rows)
    # Every Trainer option a trial passed is a param of its MLflow run.
    for run in child_runs(client, outcome.tracking):
        params = run.data.params
        assert params["trainer.max_steps"] == "12" and params["trainer.val_check_interval"] == "6"
        assert params["trainer.max_epochs"] == "none"


@pytest.mark.slow  # a sweep on the Ray cluster that stops at its first trial
def test_an_endless_stream_budgeted_in_epochs_alone_is_refused_as_it_starts(
    ray_cluster, mlflow_server, sweep_config
):
    config = sweep_config(
        name="lm-endless",
        task=LM,
        trainer={"accelerator": "cpu", "max_epochs": 1},
        space={"lr": {"grid": [0.001, 0.002, 0.003, 0.004]}},
        max_concurrent_trials=1,
    )
    start = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        run_sweep(config, stream=io.StringIO(), tracking_uri=mlflow_server)
    message = str(raised.value)
    assert message.startswith(
        "trainer.max_steps: the training loader of task 'tests.user_tasks.causal_lm_stream:"
        "build' has no length (a stream, such as an IterableDataset), so nothing says that"
    )
    assert "The sweep stopped at that result" in message
    assert re.search(r"\(1 of [1-4] trials started\)", message)  # the others never start
    print(f"refused after {time.monotonic() - start:.1f} s")


@pytest.mark.slow  # a sweep of one trial on the Ray cluster
def test_an_image_model_with_accumulation_clipping_and_its_callback_trains_its_steps(
    ray_cluster, mlflow_server, sweep_config
):
    early_stopping = {
        "class_path": "lightning.pytorch.callbacks.EarlyStopping",
        "init_args": {"monitor": "val_acc", "mode": "max", "patience": 5},
    }
    trainer = {
        "accelerator": "cpu",
        "max_steps": 6,  # an epoch is 32 optimizer steps: the budget ends mid-epoch
        "val_check_interval": 6,  # in batches: validated twice
        "accumulate_grad_batches": 2,
        "gradient_clip_val": 0.5,
        "gradient_clip_algorithm": "norm",
        "callbacks": [early_stopping],
    }
    config = sweep_config(
        name="conv-steps",
        task=CONV,
        objective={"metric": "val_acc", "mode": "max"},
        trainer=trainer,
    )
    outcome = run_sweep(config, stream=io.StringIO(), tracking_uri=mlflow_server)
    (row,) = outcome.rows
    assert row.status == "completed", row.reason
    assert _global_step(row) == 6 and 0 <= row.objective <= 1
    (run,) = child_runs(MlflowClient(mlflow_server), outcome.tracking)
    params = run.data.params
    assert params["trainer.accumulate_grad_batches"] == "2"
    assert params["trainer.gradient_clip_val"] == "0.5"
    assert "EarlyStopping" in params["trainer.callbacks"]


@pytest.mark.slow  # a sweep of four trials on the Ray cluster
def test_a_lightning_cli_config_is_swept_by_its_own_keys(ray_cluster, mlflow_server, sweep_config):
    config = sweep_config(
        name="lm-cli",
        task={"config": str(CLI_CONFIG)},
        trainer={"accelerator": "cpu"},  # the budget and the seed are the file's
        space={"precision": ["32", "bf16-mixed"], "model.lr": {"grid": [0.001, 0.01]}},
    )
    outcome = run_sweep(config, stream=io.StringIO(), tracking_uri=mlflow_server)
    assert len(outcome.rows) == 4 and {r.status for r in outcome.rows} == {"completed"}
    assert all(_global_step(r) == 12 for r in outcome.rows)  # the file's max_steps
    # Each trial's model was built by LightningCLI with the trial's model.lr: the module's
    # own hyperparameter (save_hyperparameters) says so in its MLflow run.
    runs = child_runs(MlflowClient(mlflow_server), outcome.tracking)
    assert sorted(float(r.data.params["lr"]) for r in runs) == [0.001, 0.001, 0.01, 0.01]
    for run in runs:
        params = run.data.params
        assert params["lr"] == params["model.lr"] and params["trainer.max_steps"] == "12"
        assert params["trainer.gradient_clip_val"] == "1.0"
    # The lr changes the answer: the two lrs' objectives differ, beyond any precision's.
    by_lr = {}
    for row in outcome.rows:
        by_lr.setdefault(row.axes["model.lr"], []).append(row.objective)
    assert min(by_lr[0.01]) < min(by_lr[0.001])
