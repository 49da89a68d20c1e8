"""A real sweep reports each trial's FLOPs, achieved FLOP/s and share of the device's ceiling."""

import io
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from versatil.sweep.config.planning import make_plan
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.report.load import load_report
from versatil.sweep.report.render import render
from versatil.sweep.tracking import child_runs
from versatil.training.hardware.energy import open_counter

pytestmark = pytest.mark.slow  # every test runs a sweep on the Ray cluster

HARDWARE = ("flops_per_sample", "tflops", "ceiling_fraction")


def ceiling_files(config):
    return sorted(make_plan(config).trial.ceiling_dir().glob("*.json"))


def test_every_trial_reports_flops_and_its_ceiling_fraction_once_measured(
    ray_cluster, sweep_config, tmp_path
):
    # A storage path of its own: no ceiling cached there yet, so the first sweep measures.
    storage = str(tmp_path / "hardware-runs")
    config = sweep_config(
        name="hardware", storage_path=storage, space={"precision": ["32", "bf16-mixed"]}
    )
    assert ceiling_files(config) == []
    outcome = run_sweep(config, stream=io.StringIO())
    assert [r.status for r in outcome.rows] == ["completed"] * 2
    client = MlflowClient(outcome.tracking.tracking_uri)
    parent = outcome.tracking.parent_run_id
    energy_readable = open_counter(__import__("torch").device("cpu"))[0] is not None
    for run in child_runs(client, outcome.tracking):
        for name in HARDWARE:
            history = client.get_metric_history(run.info.run_id, name)
            assert [m.step for m in history] == [0, 1] and min(m.value for m in history) > 0
        assert run.data.metrics["ceiling_fraction"] <= 1.1
        tags = run.data.tags
        assert "cpu" in tags["versatil.note.mfu"]
        assert ("joules_per_sample" in run.data.metrics) == energy_readable
        assert ("versatil.note.energy" in tags) != energy_readable

    # The parent holds the ceiling of each compute dtype the trials used.
    metrics = client.get_run(parent).data.metrics
    assert metrics["ceiling_tflops/fp32-highest"] > 0 and metrics["ceiling_tflops/bf16"] > 0
    document = json.loads(
        Path(client.download_artifacts(parent, "hardware/ceilings.json")).read_text()
    )
    (ceiling,) = document["ceilings"]
    assert ceiling["tflops"]["bf16"] == metrics["ceiling_tflops/bf16"]
    assert ceiling["key"]["threads"] == 1  # the trial's CPU share, not the machine's

    # The report shows the ceilings (the command's summary is this report).
    report = load_report(outcome.tracking.tracking_uri, "hardware")
    assert report.ceilings == [ceiling]
    text = render(report, "table")
    assert "ceiling of cpu (1 threads) (TFLOP/s, measured): fp32-highest" in text
    assert json.loads(render(report, "json"))["ceilings"] == [ceiling]
    assert "TFLOP/s" in text and "% ceiling" in text

    # The answer shows them per setting, at the end and read back from MLflow.
    for verdict in (
        outcome.judgement.verdict,
        load_report(outcome.tracking.tracking_uri, "hardware").judgement.verdict,
    ):
        for setting in verdict.settings:
            assert set(HARDWARE) <= set(setting.hardware)
            assert setting.as_dict()["tflops"] == setting.hardware["tflops"]

    # A second sweep on the same machine and storage measures nothing: the cache answers.
    (path,) = ceiling_files(config)
    written = path.stat().st_mtime_ns
    again = sweep_config(
        name="hardware-elementwise",
        storage_path=storage,
        task={"name": "tests.training.hardware_tasks:build_elementwise", "params": {}},
        space={"precision": ["32", "bf16-mixed"]},
    )
    outcome = run_sweep(again, stream=io.StringIO())
    assert [r.status for r in outcome.rows] == ["completed"] * 2
    assert ceiling_files(again) == [path] and path.stat().st_mtime_ns == written
    parent = outcome.tracking.parent_run_id
    document = json.loads(
        Path(client.download_artifacts(parent, "hardware/ceilings.json")).read_text()
    )
    assert document["ceilings"][0]["measured_at"] == ceiling["measured_at"]
    # Its module runs no matrix product, so no FLOPs are counted: it trains, and says why.
    for run in child_runs(client, outcome.tracking):
        assert "flops_per_sample" not in run.data.metrics and "tflops" not in run.data.metrics
        assert run.data.metrics["val_loss"] > 0
        assert run.data.tags["versatil.note.flops"] == (
            "FLOPs not counted: the counter found no matrix product or convolution"
        )


def test_a_relative_storage_path_caches_the_ceiling_under_it_not_in_a_trials_directory(
    ray_cluster, sweep_config, tmp_path, monkeypatch
):
    # Each Tune trial runs in its own working directory; the ceiling still goes where the
    # command's storage path points, so the next trial and the next sweep find it.
    monkeypatch.chdir(tmp_path)
    config = sweep_config(
        name="relative", storage_path="relative-runs", space={"lr": {"grid": [0.01, 0.02]}}
    )
    outcome = run_sweep(config, stream=io.StringIO())
    assert [r.status for r in outcome.rows] == ["completed"] * 2
    assert len(list((tmp_path / "relative-runs" / ".ceilings").glob("*.json"))) == 1
