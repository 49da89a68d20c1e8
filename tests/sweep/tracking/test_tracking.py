"""MLflow tracking against a real ``mlflow server`` and the embedded SQLite store."""

import io

import pytest
import torch
from mlflow.tracking import MlflowClient

from tests.sweep.exactly_once import assert_exactly_once
from versatil.errors import ConfigError
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.tracking import child_runs
from versatil.training.constants import CheckpointFilename, CheckpointKey
from versatil.training.input_example import INPUT_EXAMPLE_FILENAME
from versatil.training.tasks.reaching import BehaviorCloningPolicy


def sweep(config, **kwargs):
    return run_sweep(config, stream=io.StringIO(), **kwargs)


def test_parent_and_child_runs_on_a_real_server(ray_cluster, mlflow_server, sweep_config, tmp_path):
    config = sweep_config(
        name="tracked",
        space={"precision": ["32", "16-mixed"], "lr": {"grid": [0.003, 0.01]}},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
        mlflow={"register_best": "reaching-policy"},
    )
    outcome = sweep(config, tracking_uri=mlflow_server)
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("tracked")
    parent = client.get_run(outcome.tracking.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["versatil.best_trial_id"] == outcome.best.trial_id
    children = child_runs(client, outcome.tracking)
    assert len(children) == 4 == len(outcome.rows)
    by_trial = {run.data.tags["versatil.trial_id"]: run for run in children}
    for row in outcome.rows:
        run = by_trial[row.trial_id]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["versatil.status"] == row.status
        assert run.data.tags["versatil.trial_name"].endswith(row.trial_id)
        assert run.data.params["precision"] == row.axes["precision"]
        assert run.data.params["compile_mode"] == "none"
        assert run.data.params["matmul_precision"] == "none"
        assert float(run.data.params["lr"]) == row.axes["lr"]
        if row.status == "infeasible":
            assert "16-mixed is not supported on cpu" in run.data.tags["versatil.reason"]
            continue
        assert run.data.params["model_dtype"] == "float32"
        assert run.data.params["autocast"] == "false"
        history = client.get_metric_history(run.info.run_id, "val_loss")
        assert [m.step for m in history] == [0, 1, 2]
        assert history[-1].value == pytest.approx(row.objective)
        for name in ("train_loss", "samples_per_sec", "epoch_time_s", "peak_memory_mb"):
            assert len(client.get_metric_history(run.info.run_id, name)) == 3
        assert "config.yaml" in {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {r.data.tags["versatil.status"] for r in children} == {"completed", "infeasible"}

    # The best trial's checkpoint is an artifact that plain Lightning loads.
    best_run = by_trial[outcome.best.trial_id]
    names = {a.path for a in client.list_artifacts(best_run.info.run_id, "checkpoint")}
    assert names == {
        "checkpoint/last.ckpt",
        "checkpoint/config.yaml",
        f"checkpoint/{INPUT_EXAMPLE_FILENAME}",
    }
    local = client.download_artifacts(best_run.info.run_id, "checkpoint", str(tmp_path / "dl"))
    ckpt = f"{local}/{CheckpointFilename.DEFAULT_CHECKPOINT}"
    state = torch.load(ckpt, weights_only=False)
    assert CheckpointKey.STATE_DICT in state and CheckpointKey.INPUT_STATS in state
    BehaviorCloningPolicy.load_from_checkpoint(ckpt)
    others = [r for t, r in by_trial.items() if t != outcome.best.trial_id]
    assert all(not client.list_artifacts(r.info.run_id, "checkpoint") for r in others)
    assert experiment is not None

    # register_best, deprecated, is register: the recommended setting's logged model.
    (version,) = client.search_model_versions("name='reaching-policy'")
    assert version.run_id == best_run.info.run_id
    assert version.source.startswith("models:/m-")
    assert client.get_model_version_by_alias("reaching-policy", "recommended").version == "1"


def test_embedded_sqlite_store_is_the_default(ray_cluster, sweep_config, tmp_path):
    config = sweep_config(name="embedded", space={"lr": {"grid": [0.003]}})
    outcome = sweep(config)
    assert outcome.tracking.tracking_uri == f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    client = MlflowClient(outcome.tracking.tracking_uri)
    (child,) = child_runs(client, outcome.tracking)
    assert child.data.tags["versatil.status"] == "completed"
    assert child.info.artifact_uri.startswith((tmp_path / "runs" / "mlartifacts").as_uri())


def test_missing_tracking_server_is_a_clear_error(sweep_config):
    with pytest.raises(ConfigError) as error:
        sweep(sweep_config(space={"lr": {"grid": [0.003]}}), tracking_uri="http://127.0.0.1:9")
    assert str(error.value).startswith(
        "--tracking-uri: no MLflow server answers at 'http://127.0.0.1:9' ("
    )
    assert "omit --tracking-uri to use the embedded SQLite store" in str(error.value)


def test_a_store_that_cannot_open_stops_the_sweep_with_one_clear_error(
    ray_cluster, sweep_config, tmp_path
):
    # The parent run opens while the trials start; the first result waits for it.
    config = sweep_config(name="unopenable", space={"lr": {"grid": [0.003]}})
    blocker = tmp_path / "a-file"  # where the store's directory would have to be
    blocker.write_text("")
    uri = f"sqlite:///{blocker / 'mlflow.db'}"
    with pytest.raises(ConfigError) as error:
        sweep(config, tracking_uri=uri)
    message = str(error.value)
    assert message.startswith("MLflow: cannot open the sweep's parent run (")
    assert "continue with --resume" in message and "\n" not in message


def test_a_killed_and_retried_trial_continues_its_own_run(ray_cluster, sweep_config):
    import os
    import signal

    from ray import tune

    killed = []

    class KillFirstWorkerOnce(tune.Callback):
        """A real fault: SIGKILL the worker process of the first trial after its second epoch."""

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if not killed and result.get("epoch") == 1 and result.get("status") == "running":
                killed.append(trial.trial_id)
                os.kill(result["pid"], signal.SIGKILL)

    config = sweep_config(
        name="retried",
        space={"lr": {"grid": [0.003, 0.01]}},
        trainer={"max_epochs": 4, "accelerator": "cpu"},
        max_failures=2,
    )
    outcome = sweep(config, callbacks=[KillFirstWorkerOnce()])
    assert killed
    client = MlflowClient(outcome.tracking.tracking_uri)
    children = child_runs(client, outcome.tracking)
    assert len(children) == len(outcome.rows) == 2
    (run,) = [r for r in children if r.data.tags["versatil.trial_id"] == killed[0]]
    assert run.data.tags["versatil.status"] == "completed"
    assert run.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
    # Restored from its last checkpoint, it may report an epoch again: logged once.
    assert sorted(steps) == [0, 1, 2, 3]
    assert_exactly_once(outcome.experiment_dir)
    (row,) = [r for r in outcome.rows if r.trial_id == killed[0]]
    assert row.metrics["resumed"] and row.status == "completed"


def test_report_reads_the_runs_back(ray_cluster, mlflow_server, sweep_config, tmp_path, capsys):
    import json

    from versatil.sweep.cli.main import main
    from versatil.sweep.report.load import load_report
    from versatil.sweep.report.render import render

    config = sweep_config(name="reported", space={"precision": ["32", "bf16-true", "16-mixed"]})
    outcome = sweep(config, tracking_uri=mlflow_server)
    report = load_report(mlflow_server, "reported")
    assert report.context.parent_run_id == outcome.tracking.parent_run_id
    answer = json.loads(render(report, "json"))
    records = {r["trial_id"]: r for r in answer["trials"]}
    verdict = report.judgement.verdict
    assert answer["verdict"]["text"] == verdict.text == outcome.judgement.verdict.text
    assert answer["verdict"]["recommended"] == verdict.recommended_setting
    settings = {s["label"]: s for s in answer["settings"]}
    assert set(settings) == {"32 + eager", "bf16-true + eager"}  # 16-mixed: infeasible on CPU
    for setting in settings.values():
        assert {"speedup", "speedup_ci_low", "speedup_ci_high", "objective"} <= set(setting)
    assert settings["32 + eager"]["speed"] == "reference"
    assert set(records) == {r.trial_id for r in outcome.rows}
    for row in outcome.rows:
        record = records[row.trial_id]
        assert record["precision"] == row.axes["precision"] and record["status"] == row.status
        if row.status == "completed":
            assert record["val_loss"] == pytest.approx(row.objective)
            assert record["samples_per_sec"] == pytest.approx(row.metrics["samples_per_sec"])
            assert record["epochs"] == row.epochs
    assert [r["trial_id"] for r in records.values() if r["best"]] == [outcome.best.trial_id]
    # The best trial is the recommended one; it is on the front unless another beats it.
    front = outcome.judgement.front
    assert {t for t, r in records.items() if r["pareto"]} == front

    output = tmp_path / "report"
    code = main(["report", "reported", "--tracking-uri", mlflow_server, "--output", str(output)])
    out = capsys.readouterr().out
    assert code == 0 and "* the recommended trial, P other trials on the Pareto front" in out
    for row in outcome.rows:
        assert row.trial_id in out
    for name in ("objective_vs_throughput.png", "throughput_by_settings.png"):
        assert (output / name).read_bytes()[:4] == b"\x89PNG"
    client = MlflowClient(mlflow_server)
    logged = {a.path for a in client.list_artifacts(outcome.tracking.parent_run_id, "report")}
    assert "report/objective_vs_throughput.png" in logged and "report/report.csv" in logged


def test_report_of_an_unknown_experiment_lists_the_choices(mlflow_server):
    from versatil.sweep.report.load import load_report

    with pytest.raises(
        ConfigError, match=r"report: no MLflow experiment 'nope' at .*; choose from"
    ):
        load_report(mlflow_server, "nope")
