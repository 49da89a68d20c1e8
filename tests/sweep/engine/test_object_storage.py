"""Sweeps whose storage path is on S3: run, resumed, synced, confirmed, reported, compressed;
and PBT on a user's module, its exploits restoring checkpoints from the bucket.

moto's standalone S3 server (a real HTTP S3 API on loopback) holds the bucket and a real
``mlflow server`` the runs. Every command runs as a user types it, in a process of its own
with the standard AWS variables, so its local Ray's workers upload the checkpoints
themselves. Nothing may land in a local directory named after the URI, and the
checkpoints are not logged to MLflow: ``compress`` reads them from the bucket. A trial's
records in the bucket hold every epoch the driver reported, though PBT restarted it.
"""

import csv
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

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


@pytest.fixture
def stores(tmp_path):
    """moto's S3 server holding the bucket, and a real ``mlflow server``; both stopped by PID."""
    s3 = start_s3_server(tmp_path / "moto.log")
    server = None
    try:
        s3.client().create_bucket(Bucket=BUCKET)
        (tmp_path / "mlflow").mkdir()
        server, uri = start_mlflow_server(tmp_path / "mlflow")
        yield s3, uri
    finally:
        if server is not None:
            stop_mlflow_server(server)
        stop_s3_server(s3)


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


def test_a_sweep_on_s3_runs_resumes_syncs_reports_and_compresses(stores, tmp_path):
    s3, uri = stores
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
        assert any(k.startswith(f"{trial}/checkpoint_") and k.endswith("/last.ckpt") for k in held)
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


def s3_lines(s3, key):
    body = s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    return [json.loads(line)["epoch"] for line in body.splitlines() if line.strip()]


def test_pbt_on_s3_exploits_a_user_modules_checkpoints_from_the_bucket(stores, tmp_path):
    # A user's module (dict batches, its own params) under PBT: an exploited trial's worker
    # fetches the better trial's checkpoint from the bucket, and every row is its own trial.
    data = {
        "name": "pbts3",
        "task": {
            "name": "tests.user_tasks.dict_batches:build",
            "params": {"n_samples": 64, "batch_size": 16},
        },
        "space": {"lr": {"grid": [1e-5, 1e-2]}},
        "trainer": {"max_epochs": 4, "accelerator": "cpu"},
        "scheduler": {
            "type": "pbt",
            "perturbation_interval": 1,
            "quantile_fraction": 0.5,
            "synch": True,
            "hyperparam_mutations": {"lr": {"loguniform": [1e-3, 3e-2]}},
        },
        "max_concurrent_trials": 2,
        "confirm": {"enabled": "off"},
    }
    config = tmp_path / "pbts3.yaml"
    config.write_text(yaml.safe_dump(data))
    s3, uri = stores
    env = {
        **os.environ,
        **s3.environment(),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[3]),  # the user's module
        "MLFLOW_TRACKING_URI": uri,  # MLflow's own variable, no --tracking-uri
        # Tune uploads the experiment directory every second, not every 10 s or more:
        # the bucket's copy of a trial's result.json is then a few lines behind the
        # driver's whenever PBT restarts the trial (after each epoch), as under load.
        "TUNE_GLOBAL_CHECKPOINT_S": "1",
    }
    env.pop("RAY_ADDRESS", None)
    storage = f"s3://{BUCKET}/{PREFIX}"
    # Whether PBT exploits at a given point depends on timing: a second sweep if not.
    for _attempt in range(2):
        done = subprocess.run(
            cli("--config", str(config), "--storage-path", storage),
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
        assert "2 trials in" in done.stdout and "2 completed" in done.stdout, done.stdout
        assert "Remote file not found" not in done.stderr, done.stderr[-3000:]
        name = done.stdout.split(f"results: {storage}/")[1].split()[0]
        reported = driver_epochs(done.stdout)
        last = {}
        for key in s3.keys(BUCKET, f"{PREFIX}/{name}/"):
            if key.endswith("/result.json"):
                body = s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()
                lines = [json.loads(line) for line in body.decode().splitlines()]
                # Every epoch the driver reported, though PBT restarted the trial each time.
                assert [r["epoch"] for r in lines] == reported[key.split("/")[-2]]
                assert [r["epoch"] for r in lines] == [0, 1, 2, 3]
                for result in lines:  # trained with the lr it reported under
                    assert result["optimizer/lr"] == pytest.approx(result["config"]["lr"])
                last[key.split("/")[-2]] = lines[-1]
        assert len(last) == 2
        if any(r["config"]["lr"] not in (1e-5, 1e-2) for r in last.values()):
            break
    else:
        raise AssertionError("no trial was exploited in two PBT sweeps")

    client = MlflowClient(uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "pbts3"]
    parent = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`{tags.EXPERIMENT_DIR}` = '{storage}/{name}'",
    )[0]
    children = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
    )
    assert sorted(c.data.tags[tags.TRIAL_ID] for c in children) == sorted(last)
    for child in children:
        mine = last[child.data.tags[tags.TRIAL_ID]]
        assert child.data.metrics["val_loss"] == pytest.approx(mine["val_loss"])
        history = client.get_metric_history(child.info.run_id, "val_loss")
        assert sorted(m.step for m in history) == [0, 1, 2, 3]
    assert f"best checkpoint: {storage}/{name}/" in done.stdout, done.stdout
    assert f"at {uri}" in done.stdout, done.stdout

    # report reads the same variable; each row shows the lr its trial last trained with.
    report = subprocess.run(
        cli("report", "pbts3", "--format", "json"),
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]
    shown = {t["trial_id"]: t["lr"] for t in json.loads(report.stdout)["trials"]}
    assert shown == pytest.approx({t: r["config"]["lr"] for t, r in last.items()})


def driver_epochs(stdout):
    """Trial id -> the epochs (0-based) of the driver's progress lines, in order."""
    epochs = {}
    for trial_id, epoch in re.findall(r"\] (\S+) epoch (\d+) ", stdout):
        epochs.setdefault(trial_id, []).append(int(epoch) - 1)
    return epochs


class FakeTrial:
    """What Tune's loggers read of a trial: its driver directory and its storage path."""

    def __init__(self, local_path, storage_path, checkpoint=None):
        from pyarrow import fs

        self.local_path = str(local_path)
        self.config = {"lr": 0.1}
        self.checkpoint = checkpoint
        self.storage = SimpleNamespace(
            trial_fs_path=str(storage_path), storage_filesystem=fs.LocalFileSystem()
        )

    def init_local_path(self):
        Path(self.local_path).mkdir(parents=True, exist_ok=True)


class DriverLogs:
    """Tune's events to versatil's JSON and CSV loggers for one trial, as Tune sends them."""

    def __init__(self, trial):
        from versatil.sweep.engine.callbacks import CsvLogger, JsonLogger

        self.trial = trial
        self.loggers = [JsonLogger(), CsvLogger()]
        trial.init_local_path()

    def send(self, event, *args):
        for logger in self.loggers:
            getattr(logger, event)(0, [self.trial], self.trial, *args)

    def report(self, epoch):
        self.send("on_trial_result", {"epoch": epoch, "loss": 1.0 / (1 + epoch)})

    def logged(self):
        """The epochs in result.json, those in progress.csv, and the CSV's header count."""
        trial_dir = Path(self.trial.local_path)
        results = [json.loads(line)["epoch"] for line in (trial_dir / "result.json").open()]
        rows = list(csv.reader((trial_dir / "progress.csv").open()))
        epochs = [int(row[0]) for row in rows if row[0] != "epoch"]
        return results, epochs, sum(row[0] == "epoch" for row in rows)


def test_a_restarted_trial_keeps_the_drivers_lines_a_stale_upload_lacks(tmp_path):
    # Tune's loggers replaced the driver's result.json with the storage path's copy each
    # time a trial started again with a checkpoint (each PBT perturbation; a retry also
    # progress.csv): the lines since Tune's last periodic upload were lost, and the final
    # upload wrote the truncated file to the bucket. The driver's copy is kept.
    driver, stored = tmp_path / "driver" / "t1", tmp_path / "stored" / "t1"
    logs = DriverLogs(FakeTrial(driver, stored))
    logs.send("on_trial_start")
    logs.report(0)
    shutil.copytree(driver, stored)  # Tune's periodic upload: epoch 0 only
    logs.report(1)
    logs.report(2)
    logs.trial.checkpoint = object()
    logs.send("on_trial_start")  # PBT paused the trial with a checkpoint: it runs again
    logs.report(3)
    logs.send("on_trial_error")  # it fails, and is retried from its checkpoint
    logs.send("on_trial_start")
    logs.report(4)
    logs.send("on_trial_complete")
    assert logs.logged() == ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], 1)

    # A resumed run stages the experiment directory anew: the files come from storage.
    shutil.rmtree(stored)
    shutil.copytree(driver, stored)
    resumed = DriverLogs(FakeTrial(tmp_path / "resumed" / "t1", stored, checkpoint=object()))
    resumed.send("on_trial_start")
    resumed.report(5)
    resumed.send("on_trial_complete")
    assert resumed.logged() == ([0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], 1)
