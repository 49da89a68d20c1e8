"""``python -m versatil.sweep compress``: real sweeps, INT8 runs nested under their trials.

Each sweep is tiny and real (the session's Ray cluster; a real ``mlflow server`` on
loopback, or the embedded store), and the command runs in this process through the CLI's
``main``. Each INT8 run's objective is checked against one recomputed here: its
``checkpoint/`` artifact reloaded with ``load_for_inference`` and validated by a plain
Lightning ``Trainer``.
"""

import io
import math
import re
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient

from versatil.cli_common import run_main
from versatil.inference import load_for_inference
from versatil.sweep.cli import compress as compress_command
from versatil.sweep.cli.main import build_parser, main, standalone_parser
from versatil.sweep.config.load import load_sweep, validate_sweep
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.int8.compress import compress_after_sweep
from versatil.sweep.report.load import load_report
from versatil.sweep.report.plots import int8_extra_points
from versatil.sweep.report.render import render
from versatil.sweep.tracking import child_runs
from versatil.sweep.vocab import tags
from versatil.training.constants import PrecisionType
from versatil.training.tasks import build_task

pytestmark = pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")

REACHING = {"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "width": 64}}
MAXIMIZE = "tests.user_tasks.maximize:build"


def cli(capsys, argv):
    capsys.readouterr()  # what the test printed before
    code = run_main(main, argv)
    out, err = capsys.readouterr()
    return code, out, err


def sweep_data(root: Path, name: str, **fields) -> dict:
    return {
        "name": name,
        "task": REACHING,
        "trainer": {"max_epochs": 2, "accelerator": "cpu"},
        "storage_path": str(root / "runs"),
        "max_concurrent_trials": 2,
        **fields,
    }


@pytest.fixture(scope="module")
def reaching_sweep(ray_cluster, mlflow_server, tmp_path_factory):
    """Two float32 trials on the real server; only the best one's checkpoint is logged."""
    root = tmp_path_factory.mktemp("compress")
    config = validate_sweep(sweep_data(root, "int8-reaching", space={"lr": {"grid": [3e-3, 1e-2]}}))
    outcome = run_sweep(config, tracking_uri=mlflow_server, stream=io.StringIO())
    assert [r.status for r in outcome.rows] == ["completed"] * 2
    return outcome, root


def int8_runs(client, outcome):
    runs = client.search_runs(
        [outcome.tracking.experiment_id],
        filter_string=f"tags.`{tags.INT8_SWEEP_RUN}` = '{outcome.tracking.parent_run_id}'",
    )
    return {run.data.tags["versatil.int8.trial_id"]: run for run in runs}


def recomputed(client, run, objective, tmp_path):
    """The INT8 run's artifact reloaded and validated by plain Lightning; and the model."""
    local = client.download_artifacts(run.info.run_id, "checkpoint", str(tmp_path))
    model = load_for_inference(Path(local))
    assert model.config.precision is PrecisionType.INT8
    datamodule = build_task(model.config.task, model.config.params)[1]
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.validate(model.module, datamodule=datamodule, verbose=False)
    return float(trainer.callback_metrics[objective]), model


def assert_int8_run(run, trial_run, objective):
    """Nested under its trial, tagged with its backend, every metric there and finite."""
    assert run.info.status == "FINISHED"
    assert run.data.tags["mlflow.parentRunId"] == trial_run.info.run_id
    assert run.data.tags["versatil.int8.backend"] in ("torchao", "torch.ao")
    assert run.info.run_name == f"{trial_run.info.run_name}/int8"
    metrics = run.data.metrics
    names = [
        f"int8/{objective}",
        f"int8/{objective}_delta",
        "int8/samples_per_sec",
        "int8/speedup",
        "int8/size_mb",
        "int8/size_ratio",
        f"fp32/{objective}",
        "fp32/samples_per_sec",
        "fp32/size_mb",
    ]
    assert all(math.isfinite(metrics[name]) for name in names), metrics
    assert metrics[f"int8/{objective}_delta"] == pytest.approx(
        metrics[f"int8/{objective}"] - metrics[f"fp32/{objective}"]
    )
    assert metrics["int8/speedup"] == pytest.approx(
        metrics["int8/samples_per_sec"] / metrics["fp32/samples_per_sec"]
    )
    assert metrics["int8/size_ratio"] == pytest.approx(
        metrics["int8/size_mb"] / metrics["fp32/size_mb"]
    )
    return metrics


def test_compress_top_k_on_the_built_in_task(reaching_sweep, mlflow_server, capsys, tmp_path):
    outcome, _ = reaching_sweep
    output = tmp_path / "int8"
    argv = ["compress", "int8-reaching", "--top", "2", "--tracking-uri", mlflow_server]
    code, out, err = cli(capsys, [*argv, "--output", str(output)])
    assert (code, err) == (0, ""), err
    print(out)

    client = MlflowClient(mlflow_server)
    trials = {r.data.tags["versatil.trial_id"]: r for r in child_runs(client, outcome.tracking)}
    runs = int8_runs(client, outcome)
    assert set(runs) == {r.trial_id for r in outcome.rows}
    for row in outcome.rows:
        run, trial_run = runs[row.trial_id], trials[row.trial_id]
        metrics = assert_int8_run(run, trial_run, "val_loss")
        # The checkpoint compressed is the one the trial's objective was measured on.
        assert metrics["fp32/val_loss"] == pytest.approx(row.objective, rel=1e-5)
        source = run.data.tags["versatil.int8.checkpoint_source"]
        if row is outcome.best:  # logged to MLflow (log_checkpoints: best)
            assert source == f"runs:/{trial_run.info.run_id}/checkpoint"
        else:  # the Tune storage path, where every trial's checkpoint is
            assert Path(source).parent == outcome.experiment_dir / row.trial_id
        value, model = recomputed(client, run, "val_loss", tmp_path / row.trial_id)
        assert value == pytest.approx(metrics["int8/val_loss"], abs=1e-6)
        # The artifact is the INT8 directory the command wrote: same outputs.
        written = load_for_inference(output / f"{row.trial_id}-int8")
        observations = torch.randn(32, 6, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(model(observations), written(observations), atol=0, rtol=0)
        assert row.trial_id in out and run.info.run_id in out

    # The report lists the INT8 runs under the trials, and a plot can take their points.
    report = load_report(mlflow_server, "int8-reaching")
    assert [r.run_id for r in report.int8] == [runs[r.trial_id].info.run_id for r in outcome.rows]
    table = render(report, "table")
    assert "int8 val_loss" in table and "speedup" in table and "size ratio" in table
    assert "int8 val_loss" in render(report, "markdown")
    points = int8_extra_points(report)
    assert [p.values["val_loss"] for p in points] == [
        runs[r.trial_id].data.metrics["int8/val_loss"] for r in outcome.rows
    ]
    assert all(
        p.values["samples_per_sec"] > 0 and r.trial_id in p.label
        for p, r in zip(points, outcome.rows, strict=True)
    )


def test_bad_compress_requests_are_one_clear_message(reaching_sweep, mlflow_server, capsys):
    outcome, _ = reaching_sweep
    uri = ["--tracking-uri", mlflow_server]
    valid = ", ".join(r.trial_id for r in outcome.rows)
    cases = {
        ("int8-reaching", "--trial", "nope_00009"): (
            f"compress: --trial nope_00009: sweep 'int8-reaching' has no such trial; "
            f"finished trials: {valid}"
        ),
        ("no-such-sweep",): "compress: no MLflow experiment 'no-such-sweep' at ",
        ("int8-reaching", "--top", "0"): "compress: --top 0: K must be at least 1",
        ("int8-reaching", "--pareto", "--top", "2"): (
            "compress: --pareto and --top cannot be combined; give one of --pareto, --top K "
            "or --trial ID"
        ),
        ("int8-reaching", "--top", "1", "--trial", "x"): "compress: --top and --trial cannot",
        ("../x",): "compress: experiment: '../x' is not a valid name",
    }
    for args, message in cases.items():
        code, out, err = cli(capsys, ["compress", *args, *uri])
        assert (code, out) == (2, ""), (args, out, err)
        assert err.startswith(f"error: {message}"), (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err


def test_a_sweep_without_finished_trials_has_nothing_to_compress(
    ray_cluster, mlflow_server, tmp_path, capsys
):
    # 16-mixed cannot run on CPU: the one trial is infeasible.
    config = validate_sweep(sweep_data(tmp_path, "int8-none", space={"precision": ["16-mixed"]}))
    run_sweep(config, tracking_uri=mlflow_server, stream=io.StringIO())
    capsys.readouterr()  # Tune's own banner
    code, out, err = cli(capsys, ["compress", "int8-none", "--tracking-uri", mlflow_server])
    assert (code, out) == (2, "")
    assert (
        err.startswith("error: compress: sweep 'int8-none' has no finished trial to compress (")
        and "infeasible" in err
    )
    assert err.count("\n") == 1


def test_a_user_task_sweep_file_compresses_its_best_trial(ray_cluster, tmp_path, capsys):
    """The maximize task (val_accuracy, mode max) asks for ``post_training: {int8: best}``.

    The sweep runs as the CLI runs it (``run_sweep``, then ``compress_after_sweep``, then
    the report), with progress in a buffer: Tune pickles the progress stream, and pytest's
    captured stdout does not pickle.
    """
    data = sweep_data(
        tmp_path,
        "int8-user",
        task={"name": MAXIMIZE, "params": {"width": 64}},
        objective={"metric": "val_accuracy", "mode": "max"},
        space={"optimizer": {"choice": [{"lr": 0.02}, {"lr": 0.005}]}},
        search={"algorithm": "grid", "num_samples": 2},
        post_training={"int8": "best"},
    )
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(data))
    config = load_sweep(tmp_path / "sweep.yaml")
    outcome = run_sweep(config, stream=io.StringIO())
    stream = io.StringIO()
    compressed = compress_after_sweep(config, outcome, stream)
    print(stream.getvalue())
    assert compressed.failed == []
    assert "the best trial: 1 of 2 finished trials" in stream.getvalue()
    # Best: the highest accuracy; a tie (likely here) goes to the faster trial.
    best = max(outcome.rows, key=lambda r: (r.objective, r.metrics["samples_per_sec"]))
    assert [r.trial_id for r in compressed.int8] == [best.trial_id]
    assert (outcome.experiment_dir / "int8" / f"{best.trial_id}-int8").is_dir()

    report = load_report(outcome.tracking.tracking_uri, "int8-user")
    assert "int8 val_accuracy" in render(report, "table")  # the summary shows the INT8 row
    client = MlflowClient(report.context.tracking_uri)
    trials = {r.data.tags["versatil.trial_id"]: r for r in child_runs(client, report.context)}
    (row,) = report.int8
    assert row.trial_id == best.trial_id
    run = client.get_run(row.run_id)
    metrics = assert_int8_run(run, trials[best.trial_id], "val_accuracy")
    assert metrics["fp32/val_accuracy"] == pytest.approx(best.objective)
    value, _ = recomputed(client, run, "val_accuracy", tmp_path / "dl")
    assert value == pytest.approx(metrics["int8/val_accuracy"], abs=1e-6)

    # Then the other trial, by id, with the named backend, from the embedded store.
    other = next(r for r in report.rows if r.trial_id != best.trial_id)
    argv = ["compress", "int8-user", "--trial", other.trial_id, "--backend", "torch.ao"]
    argv += ["--storage-path", str(tmp_path / "runs"), "--output", str(tmp_path / "int8")]
    code, out, err = cli(capsys, argv)
    assert (code, err) == (0, ""), err
    assert f"{other.trial_id}: torch.ao, val_accuracy " in out
    assert (tmp_path / "int8" / f"{other.trial_id}-int8" / "last.ckpt").is_file()
    runs = {r.trial_id: r for r in load_report(report.context.tracking_uri, "int8-user").int8}
    assert set(runs) == {best.trial_id, other.trial_id}
    run = client.get_run(runs[other.trial_id].run_id)
    assert run.data.tags["versatil.int8.backend"] == "torch.ao"
    # From MLflow if it is the sweep's best (ties by trial order), else the storage path.
    source = run.data.tags["versatil.int8.checkpoint_source"]
    if other.trial_id == outcome.best.trial_id:
        assert source == f"runs:/{trials[other.trial_id].info.run_id}/checkpoint"
    else:
        assert Path(source).parent == outcome.experiment_dir / other.trial_id
    metrics = assert_int8_run(run, trials[other.trial_id], "val_accuracy")
    value, _ = recomputed(client, run, "val_accuracy", tmp_path / "dl2")
    assert value == pytest.approx(metrics["int8/val_accuracy"], abs=1e-6)


def test_help_lists_compress_and_its_flags(capsys):
    code, out, _ = cli(capsys, ["--help"])
    assert code == 0
    assert re.search(r"^ +compress +INT8-quantize a sweep's winners, logged beside", out, re.M)
    code, out, _ = cli(capsys, ["compress", "--help"])
    assert code == 0
    assert "usage: python -m versatil.sweep compress" in out
    flags = {o for a in standalone_parser(compress_command)._actions for o in a.option_strings}
    assert flags == {
        "-h",
        "--help",
        "--pareto",
        "--top",
        "--trial",
        "--tracking-uri",
        "--storage-path",
        "--backend",
        "--output",
    }
    for flag in flags:
        assert flag in out
    assert build_parser().prog == "python -m versatil.sweep"
