"""The MLflow server as the manifests configure it, for real: PostgreSQL, artifacts, basic auth.

A throwaway PostgreSQL (Debian's ``postgresql``, as a non-root user) is the backend store of a
real ``mlflow server`` started with the flags and settings of ``k8s/base/services/mlflow.yaml``
(the Deployment's command, its env's literal values and the ``mlflow-auth`` ConfigMap), with
only the addresses and paths made local. A small sweep logs to it through the CLI with the
credentials the Ray head gets from its Secret, and ``python -m versatil.sweep report`` reads
it back and uploads its plots through the server.

PostgreSQL must be installed: the test is skipped without it on a developer's machine, and
fails without it in CI (``CI=true``), whose ``.ci/run`` installs it.
"""

from __future__ import annotations

import configparser
import io
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tests.k8s.test_manifests import mlflow_args, mlflow_container, rendered, the
from tests.mlflow_server import stop_mlflow_server
from tests.postgres_server import start_postgres, stop_postgres
from tests.ray_head import free_port
from versatil.sweep.tracking.store import is_reachable

pytestmark = pytest.mark.slow  # PostgreSQL, mlflow server and a sweep

REPO = Path(__file__).resolve().parents[2]
SWEEP = ["--config", "quickstart", "--set", "space.precision=[32, bf16-mixed]"]
SWEEP += ["--set", "space.compile_mode=[none]", "--set", "trainer.max_epochs=1"]
SWEEP += ["--set", "confirm.enabled=off"]  # the store is under test here, not the re-timing


def server_command(docs: list[dict[str, Any]], backend: str, artifacts: Path, port: int):
    """The Deployment's ``mlflow server`` command with local addresses and paths."""
    local = {
        "--host": "127.0.0.1",
        "--port": str(port),
        "--backend-store-uri": backend,
        "--artifacts-destination": str(artifacts),
        "--allowed-hosts": f"127.0.0.1:{port},localhost:{port}",
    }
    argv = [sys.executable, "-m", "mlflow", "server"]
    for flag, value in mlflow_args(docs).items():
        argv += [flag] if value is True else [flag, local.get(flag, value)]
    return argv


def sqlalchemy_uri(libpq_uri: str, docs: list[dict[str, Any]]) -> str:
    """The database's URI with the driver the manifests name (``postgresql+psycopg2``)."""
    scheme = str(mlflow_args(docs)["--backend-store-uri"]).partition("://")[0]
    assert scheme.startswith("postgresql"), scheme
    return scheme + "://" + libpq_uri.partition("://")[2]


def auth_config(docs: list[dict[str, Any]], path: Path, user_store: Path) -> Path:
    """The ConfigMap's basic_auth.ini with its user store moved to ``user_store``."""
    ini = the(docs, "ConfigMap", "mlflow-auth")["data"]["basic_auth.ini"]
    config = configparser.ConfigParser()
    config.read_string(ini)
    assert config["mlflow"]["database_uri"].startswith("sqlite:////mlflow/")
    config["mlflow"]["database_uri"] = f"sqlite:///{user_store}"
    text = io.StringIO()
    config.write(text)
    path.write_text(text.getvalue())
    return path


def wait_healthy(uri: str, server: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    """Waits for ``/health``, the probes' path, which needs no login."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=5):
                return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start:\n{log.read_text()}") from None
            time.sleep(0.5)


def test_sweep_logs_to_mlflow_on_postgresql_with_basic_auth_and_the_report_reads_it(
    postgres_bin, ray_cluster, tmp_path, monkeypatch
):
    docs = rendered("base")
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    artifacts = tmp_path / "artifacts"
    admin, password = "admin", secrets.token_hex(12)
    # The Deployment's literal env, and what its Secrets give it.
    env = {**os.environ}
    for entry in mlflow_container(docs)["env"]:
        if "value" in entry and entry["name"] != "MLFLOW_AUTH_CONFIG_PATH":
            env[entry["name"]] = entry["value"]
    env |= {
        "MLFLOW_AUTH_CONFIG_PATH": str(
            auth_config(docs, tmp_path / "basic_auth.ini", tmp_path / "basic_auth.db")
        ),
        "MLFLOW_AUTH_ADMIN_USERNAME": admin,
        "MLFLOW_AUTH_ADMIN_PASSWORD": password,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
    }
    # The Ray head's env: the driver logs in with the same Secret's keys.
    driver_env = {
        **os.environ,
        "MLFLOW_TRACKING_USERNAME": admin,
        "MLFLOW_TRACKING_PASSWORD": password,
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    database = server = None
    try:
        database = start_postgres(postgres_bin)
        log = tmp_path / "server.log"
        with log.open("w") as out:
            server = subprocess.Popen(
                server_command(docs, sqlalchemy_uri(database.uri, docs), artifacts, port),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
                start_new_session=True,
            )
        wait_healthy(uri, server, log)

        # Without a login, the API answers 401.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{uri}/api/2.0/mlflow/experiments/search?max_results=1")
        assert refused.value.code == 401
        assert is_reachable(uri)  # the driver's probe: a refusal is an answer

        sweep = subprocess.run(
            [
                sys.executable, "-m", "versatil.sweep", *SWEEP, "--address", ray_cluster.address,
                "--storage-path", str(tmp_path / "sweeps"), "--tracking-uri", uri,
            ],
            env=driver_env, capture_output=True, text=True, timeout=900, cwd=tmp_path,
        )  # fmt: skip
        assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
        assert "4 completed" in sweep.stdout, sweep.stdout[-3000:]

        report = subprocess.run(
            [sys.executable, "-m", "versatil.sweep", "report", "quickstart", "--tracking-uri", uri],
            env=driver_env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
        assert "bf16-mixed" in report.stdout and "plots:" in report.stdout, report.stdout

        # The runs are rows of PostgreSQL, and the report's files went through the server
        # into --artifacts-destination.
        import psycopg2

        with psycopg2.connect(database.uri) as connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM runs JOIN experiments USING (experiment_id) "
                "WHERE experiments.name = 'quickstart'"
            )
            assert cursor.fetchone()[0] == 5, "the parent run and four trials"
        connection.close()
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", admin)
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name("quickstart")
        runs = client.search_runs([experiment.experiment_id])
        (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
        listed = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
        assert "report/report.csv" in listed, listed
        stored = {p.name for p in artifacts.rglob("*") if p.is_file()}
        assert {"report.csv", "report.md"} <= stored, stored
    finally:
        if server is not None:
            stop_mlflow_server(server)
        if database is not None:
            stop_postgres(database)
