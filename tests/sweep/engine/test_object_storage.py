"""A sweep whose storage path is on S3: run, resumed, synced, confirmed, reported, compressed.

moto's standalone S3 server (a real HTTP S3 API on loopback) holds the bucket and a real
``mlflow server`` the runs. Every command runs as a user types it, in a process of its own
with the standard AWS variables, so its local Ray's workers upload the checkpoints
themselves. Nothing may land in a local directory named after the URI, and the
checkpoints are not logged to MLflow: ``compress`` reads them from the bucket.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.s3_server import start_s3_server, stop_s3_server
from tests.sweep.drivers import cli
from versatil.sweep.vocab import tags

pytestmark = pytest.mark.slow  # an S3 server, an mlflow server and five commands

BUCKET = "team-sweeps"
PREFIX = "sweeps"
PRECISIONS = ["32", "64"]


def sweep_file(tmp_path):
    data = {
        "name": "ons3",
        "task": {"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "width": 16}},
        "space": {"precision": PRECISIONS},
        "trainer": {"max_epochs": 2, "accelerator": "cpu"},
        "max_concurrent_trials": 2,
        "mlflow": {"log_checkpoints": "none"},
        "confirm": {"enabled": "off", "rounds": 2, "round_s": 0.2},
    }
    path = tmp_path / "ons3.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_sweep_on_s3_runs_resumes_syncs_reports_and_compresses(tmp_path):
    s3 = start_s3_server(tmp_path / "moto.log")
    server = None
    try:
        s3.client().create_bucket(Bucket=BUCKET)
        (tmp_path / "mlflow").mkdir()
        server, uri = start_mlflow_server(tmp_path / "mlflow")
        env = {**os.environ, **s3.environment(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        env.pop("RAY_ADDRESS", None)
        work = tmp_path / "work"
        work.mkdir()

        def run(*args):
            done = subprocess.run(
                cli(*args), env=env, cwd=work, capture_output=True, text=True, timeout=400
            )
            assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
            return done.stdout

        storage = f"s3://{BUCKET}/{PREFIX}"
        common = ["--storage-path", storage, "--tracking-uri", uri]
        out = run("--config", str(sweep_file(tmp_path)), *common)
        assert "2 trials in" in out and "2 completed" in out, out
        keys = s3.keys(BUCKET, f"{PREFIX}/")
        (name,) = {k.split("/")[1] for k in keys if k.split("/")[1].startswith("ons3-")}
        assert f"results: {storage}/{name}" in out, out
        assert f"best checkpoint: {storage}/{name}/" in out, out
        held = {k.removeprefix(f"{PREFIX}/{name}/") for k in keys if f"/{name}/" in k}
        for expected in ("sweep.yaml", "mlflow_parent_run.json", "sweep_ended.json", "tuner.pkl"):
            assert expected in held, sorted(held)
        assert any(k.startswith("report/") and k.endswith(".png") for k in held), sorted(held)
        trials = {k.split("/")[0] for k in held if k.endswith("/result.json")}
        assert len(trials) == 2, sorted(held)
        for trial in trials:
            assert any(
                k.startswith(f"{trial}/checkpoint_") and k.endswith("/last.ckpt") for k in held
            )
        # Nothing of the sweep on the local disk: no runs/, no "s3:" directory.
        assert sorted(p.name for p in work.iterdir()) == [], sorted(work.iterdir())

        client = MlflowClient(uri)
        (experiment,) = [e for e in client.search_experiments() if e.name == "ons3"]
        (parent,) = client.search_runs(
            [experiment.experiment_id], filter_string=f"tags.`{tags.EXPERIMENT_DIR}` LIKE 's3://%'"
        )
        assert parent.data.tags[tags.EXPERIMENT_DIR] == f"{storage}/{name}"
        logged = client.download_artifacts(parent.info.run_id, "sweep.yaml", str(tmp_path))
        assert yaml.safe_load(Path(logged).read_text())["storage_path"] == storage
        assert parent.info.status == "FINISHED"

        # --resume restores the finished sweep from the bucket: it trains nothing again.
        epochs = {t: s3_lines(s3, f"{PREFIX}/{name}/{t}/result.json") for t in trials}
        out = run("--config", str(sweep_file(tmp_path)), *common, "--resume")
        assert "2 trials in" in out and "2 completed" in out, out
        assert {t: s3_lines(s3, f"{PREFIX}/{name}/{t}/result.json") for t in trials} == epochs

        # sync reads Tune's records from the bucket: a lost child run comes back, whole.
        children = client.search_runs(
            [experiment.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        )
        assert len(children) == 2
        client.delete_run(children[0].info.run_id)
        out = run("sync", "ons3", *common)
        assert f"{name}: 2 epochs backfilled in 1 runs (1 created)" in out, out

        # confirm re-times both settings from their checkpoints in the bucket.
        out = run("confirm", "ons3", *common)
        assert "confirm: re-timing 2 settings (32 + eager, 64 + eager) in 2 paired" in out, out

        out = run("report", "ons3", *common)
        assert "precision" in out and "val_loss" in out, out

        # compress: no checkpoint in MLflow, so the best trial's comes from the bucket.
        out = run("compress", "ons3", *common, "--output", str(tmp_path / "int8"))
        assert "inference x" in out, out
        int8 = client.search_runs(
            [experiment.experiment_id], filter_string=f"tags.`{tags.INT8_SWEEP_RUN}` LIKE '%'"
        )
        assert int8, "no INT8 run"
        sources = {run.data.tags.get(tags.INT8_SOURCE) for run in int8}
        assert all(s and s.startswith(f"{storage}/{name}/") for s in sources), sources
    finally:
        if server is not None:
            stop_mlflow_server(server)
        stop_s3_server(s3)


def s3_lines(s3, key):
    body = s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    return [json.loads(line)["epoch"] for line in body.splitlines() if line.strip()]
