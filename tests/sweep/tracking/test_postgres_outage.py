"""PostgreSQL, the MLflow server's database, lost mid-sweep and back: nothing lost or doubled.

A real ``mlflow server`` keeps its runs in a real PostgreSQL (Debian's, as in CI). With both
trials waiting at their second epoch, PostgreSQL is stopped (a fast shutdown, by PID) while
the server stays up: it still answers ``/health`` but fails every request that needs the
database. One trial then trains to its end while the database is down, and the driver's
probe of the server (a lookup that reads the database) says it is not answering. PostgreSQL
starts again on the same data and port, the other trial goes on, and the sweep's runs must
hold every epoch exactly once.
"""

import io
import logging
import urllib.request
from pathlib import Path

import pytest

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.postgres_server import restart_postgres, start_postgres, stop_postgres
from tests.sweep.drivers import wait_for
from tests.sweep.exactly_once import assert_exactly_once
from tests.sweep.tracking.test_outages import Fault, completed, sweep_data
from versatil.sweep.tracking.store import is_reachable

pytestmark = pytest.mark.slow  # PostgreSQL, an mlflow server and a sweep


def failures(caplog):
    """The driver's warnings that MLflow failed."""
    return [m for r in caplog.records if "could not log to" in (m := r.getMessage())]


def first_epochs_logged(uri, experiment):
    """How many of the experiment's trial runs hold their first epoch's objective."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return 0
    runs = client.search_runs([found.experiment_id], max_results=100)
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return sum(bool(client.get_metric_history(r.info.run_id, "val_loss")) for r in children)


def test_postgresql_down_mid_sweep_then_back(ray_cluster, postgres_bin, tmp_path, caplog):
    from versatil.sweep.config.load import validate_sweep
    from versatil.sweep.engine.runner import run_sweep

    database = start_postgres(postgres_bin)
    root = tmp_path / "server"
    root.mkdir()
    server = None
    gate, second, started = tmp_path / "gate", tmp_path / "second", []

    def outage():
        for each in (gate, second):  # both trials wait at their second epoch
            wait_for(lambda each=each: Path(f"{each}.waiting").exists(), f"{each.name} waiting")
        # And the driver has logged their first epochs: the database goes down between
        # requests, not under one the server may have half-written.
        wait_for(lambda: first_epochs_logged(uri, "pg-outage") == 2, "both first epochs logged")
        stop_postgres(database, remove=False)
        # One trial reports its remaining epochs, and ends, while the database is down.
        second.touch()
        wait_for(lambda: started and completed(started[0], 1), "one trial completed")
        # Down until the driver has found MLflow failing (past its client's retries).
        wait_for(lambda: failures(caplog), "the driver finding MLflow failing")
        # The server answers /health without its database; the driver's probe asks more.
        assert urllib.request.urlopen(f"{uri}/health", timeout=5).status == 200
        assert not is_reachable(uri)
        restart_postgres(database)
        assert is_reachable(uri)
        gate.touch()

    fault = Fault(outage)
    caplog.set_level(logging.WARNING, logger="versatil.sweep.tracking.live")
    try:
        backend = database.uri.replace("postgresql://", "postgresql+psycopg2://", 1)
        server, uri = start_mlflow_server(root, backend_store_uri=backend)
        fault.start()
        outcome = run_sweep(
            validate_sweep(
                sweep_data(tmp_path, "pg-outage", second_gate=str(second), second_lr=0.002)
            ),
            tracking_uri=uri,
            stream=io.StringIO(),
            on_start=started.append,
        )
        fault.check()
        counted = assert_exactly_once(outcome.experiment_dir)
    finally:
        gate.touch()
        second.touch()
        if server is not None:
            stop_mlflow_server(server)
        stop_postgres(database)
    assert counted.epochs == 8 and counted.trials == 2
    assert failures(caplog)[0].startswith(f"MLflow: could not log to {uri} (")
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"MLflow: {uri} answers again after") for m in messages), messages
    assert outcome.gap is None
    assert {row.status for row in outcome.rows} == {"completed"}
