"""Where a new experiment's artifacts go: beside a SQLite store's database, never the cwd.

MLflow gives a SQLite store opened without a server ``./mlruns`` in the working directory
as its artifact root. A sweep whose storage path is on object storage passes no local
storage directory: its checkpoints must still land beside the user's database.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.s3_server import start_s3_server, stop_s3_server
from tests.sweep.drivers import cli
from versatil.sweep.tracking.child_run import ChildRun, log_checkpoint
from versatil.sweep.tracking.store import (
    ARTIFACT_DIRECTORY,
    artifact_location,
    default_tracking_uri,
    open_sweep_run,
)
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.names import CHECKPOINT_ARTIFACT


@pytest.fixture
def user_store(_mlflow_sqlite_template, tmp_path):
    """A user's own SQLite store, ``tmp_path/db/team.db``, new and empty."""
    database = tmp_path / "db" / "team.db"
    database.parent.mkdir()
    shutil.copyfile(_mlflow_sqlite_template, database)
    return database


@pytest.fixture
def work(tmp_path, monkeypatch):
    """The working directory of the driver: a directory of its own."""
    directory = tmp_path / "work"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory


def open_parent(tracking_uri, tmp_path, storage_dir=None):
    """The parent run as the driver opens it on a storage path on object storage."""
    return open_sweep_run(
        tracking_uri=tracking_uri,
        experiment="beside",
        experiment_dir=tmp_path / "cache" / "beside-1",
        storage_dir=storage_dir,
        sweep_yaml="name: beside\n",
        objective="val_loss",
        mode="min",
        experiment_uri="s3://bucket/sweeps/beside-1",
    )


def test_a_user_sqlite_store_keeps_a_checkpoint_beside_its_database(user_store, work, tmp_path):
    uri = f"sqlite:///{user_store}"
    context = open_parent(uri, tmp_path)
    client = MlflowClient(uri)
    child = ChildRun.open(
        client, context, trial_id="t_00000", trial_name="t", axes={"lr": 0.01}, config=None
    )
    checkpoint = tmp_path / "checkpoint_000001"
    checkpoint.mkdir()
    (checkpoint / "last.ckpt").write_bytes(b"weights")
    log_checkpoint(client, child.run_id, str(checkpoint))

    assert not (work / "mlruns").exists()
    assert list(work.iterdir()) == []
    artifacts = user_store.parent / ARTIFACT_DIRECTORY
    experiment = client.get_experiment(context.experiment_id)
    assert experiment.artifact_location == artifacts.as_uri()
    held = artifacts / child.run_id / "artifacts" / CHECKPOINT_ARTIFACT
    assert (held / "last.ckpt").read_bytes() == b"weights"
    parent = artifacts / context.parent_run_id / "artifacts"
    assert (parent / "sweep.yaml").read_text() == "name: beside\n"


def test_a_relative_sqlite_path_is_read_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert artifact_location("sqlite:///team.db", None) == (tmp_path / "mlartifacts").as_uri()
    nested = "sqlite+pysqlite:///stores/team.db?timeout=20"
    assert artifact_location(nested, None) == (tmp_path / "stores" / "mlartifacts").as_uri()


def test_the_embedded_store_and_a_user_store_follow_one_rule(tmp_path):
    storage = tmp_path / "runs"
    embedded = artifact_location(default_tracking_uri(storage), storage)
    assert embedded == (storage / "mlartifacts").as_uri()
    # A user's database elsewhere: beside it, not under the local storage path.
    elsewhere = artifact_location(f"sqlite:///{tmp_path}/db/team.db", storage)
    assert elsewhere == (tmp_path / "db" / "mlartifacts").as_uri()


@pytest.mark.parametrize(
    ("uri", "local"),
    [
        ("postgresql://u@db:5432/mlflow", "under the storage path"),
        ("mysql+pymysql://u@db/mlflow", "under the storage path"),
        ("sqlite://", "under the storage path"),  # in memory: no file to sit beside
        ("sqlite:///:memory:", "under the storage path"),
        ("http://127.0.0.1:5000", None),
        ("https://mlflow.example.com", None),
        ("databricks", None),
    ],
)
def test_other_stores_use_the_storage_path_or_their_server(uri, local, tmp_path):
    expected = (tmp_path / "mlartifacts").as_uri() if local else None
    assert artifact_location(uri, tmp_path) == expected
    assert artifact_location(uri, None) is None  # object storage: the store's own default


def test_an_existing_experiment_keeps_its_artifact_location(user_store, work, tmp_path):
    uri = f"sqlite:///{user_store}"
    made = (tmp_path / "team-artifacts").as_uri()
    experiment_id = MlflowClient(uri).create_experiment("beside", artifact_location=made)
    context = open_parent(uri, tmp_path, storage_dir=tmp_path / "runs")
    assert context.experiment_id == experiment_id
    assert MlflowClient(uri).get_experiment(experiment_id).artifact_location == made
    assert Path(made.removeprefix("file://"), context.parent_run_id).is_dir()
    assert not (user_store.parent / ARTIFACT_DIRECTORY).exists()
    assert list(work.iterdir()) == []


@pytest.mark.slow  # an S3 server and a one-trial sweep in a driver of its own
def test_a_sweep_on_s3_with_a_user_sqlite_store_keeps_its_checkpoint_beside_it(
    user_store, work, tmp_path
):
    sweep = tmp_path / "ons3.yaml"
    data = {
        "name": "ons3",
        "task": {"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "width": 16}},
        "space": {"lr": {"grid": [0.003]}},
        "trainer": {"max_epochs": 1, "accelerator": "cpu"},
        "max_concurrent_trials": 1,
        "mlflow": {"log_checkpoints": "best"},
        "confirm": {"enabled": "off"},
    }
    sweep.write_text(yaml.safe_dump(data))
    uri = f"sqlite:///{user_store}"
    s3 = start_s3_server(tmp_path / "moto.log")
    try:
        s3.client().create_bucket(Bucket="team-sweeps")
        env = {**os.environ, **s3.environment(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        env.pop("RAY_ADDRESS", None)  # a local Ray of the driver's own
        storage = ["--storage-path", "s3://team-sweeps/sweeps"]
        command = cli("--config", str(sweep), *storage, "--tracking-uri", uri)
        done = subprocess.run(
            command, env=env, cwd=work, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
        keys = s3.keys("team-sweeps", "sweeps/ons3-")
        assert any(k.endswith("/result.json") for k in keys), keys  # Tune's, in the bucket
    finally:
        stop_s3_server(s3)

    assert sorted(p.name for p in work.iterdir()) == []  # no mlruns, nothing else
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("ons3")
    artifacts = user_store.parent / ARTIFACT_DIRECTORY
    assert experiment.artifact_location == artifacts.as_uri()
    (child,) = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`mlflow.parentRunId` LIKE '%'"
    )
    held = artifacts / child.info.run_id / "artifacts" / CHECKPOINT_ARTIFACT / "last.ckpt"
    assert child.data.tags[tags.STATUS] == "completed"
    assert held.is_file(), sorted(str(p) for p in artifacts.rglob("*"))
