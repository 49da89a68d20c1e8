"""The tracking store against a real MLflow SQLite store: URIs, the parent run, child runs."""

import json
import re

import pytest
from mlflow.tracking import MlflowClient

from versatil.errors import ConfigError
from versatil.sweep.tracking.child_run import ChildRun
from versatil.sweep.tracking.store import (
    PARENT_FILE,
    TrackingContext,
    check_server,
    child_runs,
    default_tracking_uri,
    find_child_run,
    is_reachable,
    open_sweep_run,
    reopen_sweep_run,
)
from versatil.sweep.vocab import tags

SWEEP_YAML = "name: stored\nspace:\n  lr: {grid: [0.01, 0.02]}\n"


def open_parent(storage, invocation="stored-1", **fields):
    """The sweep's parent run, as the driver opens it for the invocation ``invocation``."""
    arguments = {
        "tracking_uri": default_tracking_uri(storage),
        "experiment": "stored",
        "experiment_dir": storage / invocation,
        "storage_dir": storage,
        "sweep_yaml": SWEEP_YAML,
        "objective": "val_loss",
        "mode": "min",
        **fields,
    }
    return open_sweep_run(**arguments)


def open_child(client, context, trial_id):
    return ChildRun.open(
        client, context, trial_id=trial_id, trial_name=trial_id, axes={"lr": 0.01}, config=None
    )


@pytest.fixture
def storage(mlflow_sqlite, tmp_path):
    """A sweep's storage path whose embedded store is a new, empty one."""
    assert default_tracking_uri(tmp_path) == mlflow_sqlite
    return tmp_path


def test_the_embedded_store_is_a_sqlite_file_under_the_storage_path(tmp_path):
    assert default_tracking_uri(tmp_path / "runs") == f"sqlite:///{tmp_path}/runs/mlflow.db"


def test_a_new_sweep_opens_its_experiment_and_a_tagged_parent_run(storage):
    context = open_parent(
        storage, objectives=[("val_loss", "min"), ("samples_per_sec", "max")], tolerance=0.05
    )
    client = MlflowClient(context.tracking_uri)
    experiment = client.get_experiment_by_name("stored")
    assert context == TrackingContext(
        tracking_uri=default_tracking_uri(storage),
        experiment_id=experiment.experiment_id,
        parent_run_id=context.parent_run_id,
        objective="val_loss",
    )
    # Artifacts of the embedded store stay under the storage path, beside the database.
    assert experiment.artifact_location == (storage / "mlartifacts").as_uri()
    parent = client.get_run(context.parent_run_id)
    assert parent.info.run_name == "stored-1" and parent.info.status == "RUNNING"
    assert {k: v for k, v in parent.data.tags.items() if k.startswith("versatil.")} == {
        tags.SWEEP: "stored",
        tags.EXPERIMENT_DIR: str(storage / "stored-1"),
        tags.OBJECTIVE: "val_loss",
        tags.MODE: "min",
        tags.OBJECTIVES: json.dumps([["val_loss", "min"], ["samples_per_sec", "max"]]),
        tags.TOLERANCE: "0.05",
    }
    assert client.download_artifacts(context.parent_run_id, "sweep.yaml", str(storage))
    assert (storage / "sweep.yaml").read_text() == SWEEP_YAML
    record = json.loads((storage / "stored-1" / PARENT_FILE).read_text())
    assert record == {"run_id": context.parent_run_id, "tracking_uri": context.tracking_uri}


def test_a_single_objective_is_tagged_as_a_list_of_one(storage):
    context = open_parent(storage)
    parent = MlflowClient(context.tracking_uri).get_run(context.parent_run_id)
    assert json.loads(parent.data.tags[tags.OBJECTIVES]) == [["val_loss", "min"]]
    assert parent.data.tags[tags.TOLERANCE] == "0.01"


def test_the_same_invocation_reopens_its_parent_and_a_new_one_gets_its_own(storage):
    first = open_parent(storage)
    client = MlflowClient(first.tracking_uri)
    client.set_terminated(first.parent_run_id, "KILLED")  # the driver died, then --resume
    again = open_parent(storage)
    assert again == first
    assert client.get_run(first.parent_run_id).info.status == "RUNNING"
    # Another invocation of the same sweep: the same experiment, a parent run of its own.
    second = open_parent(storage, invocation="stored-2")
    assert second.experiment_id == first.experiment_id
    assert second.parent_run_id != first.parent_run_id
    runs = client.search_runs([first.experiment_id])
    assert len(runs) == 2


def test_reopen_reads_the_recorded_parent_and_changes_nothing(storage):
    opened = open_parent(storage)
    client = MlflowClient(opened.tracking_uri)
    client.set_terminated(opened.parent_run_id, "FINISHED")
    assert reopen_sweep_run(storage / "stored-1") == opened
    assert client.get_run(opened.parent_run_id).info.status == "FINISHED"


def test_reopen_of_a_directory_without_a_parent_run_says_so(tmp_path):
    message = (
        f"^{re.escape(str(tmp_path))}: no MLflow parent run recorded \\({PARENT_FILE} is "
        "missing\\); the sweep never reached its tracking store$"
    )
    with pytest.raises(ConfigError, match=message):
        reopen_sweep_run(tmp_path)


def test_find_child_run_finds_a_trial_under_its_own_parent_only(storage):
    context = open_parent(storage)
    client = MlflowClient(context.tracking_uri)
    first = open_child(client, context, "t_00000")
    second = open_child(client, context, "t_00001")
    other = open_parent(storage, invocation="stored-2")
    elsewhere = open_child(client, other, "t_00000")  # the same trial id, another sweep run
    assert find_child_run(client, context, "t_00001").info.run_id == second.run_id
    assert find_child_run(client, context, "t_00000").info.run_id == first.run_id
    assert find_child_run(client, other, "t_00000").info.run_id == elsewhere.run_id
    assert find_child_run(client, context, "t_99999") is None
    assert {r.info.run_id for r in child_runs(client, context)} == {first.run_id, second.run_id}
    assert [r.info.run_id for r in child_runs(client, other)] == [elsewhere.run_id]


def test_an_epoch_logged_twice_is_held_once(storage):
    context = open_parent(storage)
    client = MlflowClient(context.tracking_uri)
    child = open_child(client, context, "t_00000")
    result = {"epoch": 0, "val_loss": 0.5, "samples_per_sec": 120.0}
    assert child.log_epoch(result) == 2
    assert child.log_epoch(result) == 0  # nothing sent
    # A new driver finds the trial's run by its id and knows what it holds.
    again = open_child(MlflowClient(context.tracking_uri), context, "t_00000")
    assert again.run_id == child.run_id and again.holds(0) and not again.holds(1)
    assert again.log_epoch(result) == 0
    for metric in ("val_loss", "samples_per_sec"):
        assert [m.step for m in client.get_metric_history(child.run_id, metric)] == [0]


@pytest.mark.parametrize("uri", ["sqlite:///x/mlflow.db", "postgresql+psycopg2://u@h/db"])
def test_a_database_uri_passes_without_a_connection(uri):
    assert check_server(uri) is None
    assert is_reachable(uri)


@pytest.mark.parametrize("uri", ["ftp://host", "file:///tmp/mlruns", "mlruns", "s3://bucket"])
def test_a_uri_mlflow_cannot_track_to_is_one_clear_error(uri):
    message = (
        f"^--tracking-uri: {re.escape(repr(uri))} is not a tracking URI MLflow can use; give "
        r"an MLflow server \(http://host:port\) or a database \(sqlite:///path/to/mlflow\.db\)$"
    )
    with pytest.raises(ConfigError, match=message):
        check_server(uri)


def test_a_server_that_refuses_connections_is_not_reachable():
    uri = "http://127.0.0.1:9"  # discard: nothing listens
    assert not is_reachable(uri)
    with pytest.raises(ConfigError, match=r"no MLflow server answers at .*Connection refused"):
        check_server(uri)
