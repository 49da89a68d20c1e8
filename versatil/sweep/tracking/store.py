"""The tracking store: its URI, a bounded connection to it, and a sweep's parent run."""

from __future__ import annotations

import dataclasses
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from versatil.errors import ConfigError
from versatil.status import MLFLOW_RUNNING
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.run_tags import SweepTags, TrialTags

__all__ = [
    "ARTIFACT_DIRECTORY",
    "PARENT_FILE",
    "TRACKING_URI_VARIABLE",
    "TrackingContext",
    "TrackingUnavailable",
    "artifact_location",
    "check_server",
    "child_runs",
    "client",
    "default_tracking_uri",
    "find_child_run",
    "is_reachable",
    "open_sweep_run",
    "reopen_sweep_run",
    "runs_by_trial",
    "tracking_store",
]

# MLflow 3's usage telemetry runs background threads in the driver that compete with the
# trials for CPU (measured with tracking in the training process: +8% fit wall with it,
# +1% without). Off unless the environment says otherwise; set before MLflow loads.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow's HTTP client retries 7 times with exponential backoff and waits up to 120 s per
# request: a dead or hung server stalls a command for minutes. Bound every call: at most
# ~15 s per request, 2 retries, about 4 s of backoff in all.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "15")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
# Ending a run on a server prints its URL to stdout (one more request each): the CLI prints
# the sweep's parent run once instead.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# Reading a small artifact back (the re-timing's rounds) draws a progress bar on stderr.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

PARENT_FILE = "mlflow_parent_run.json"
"""In Tune's experiment directory: the parent run's id and the store it lives in."""


class TrackingUnavailable(ConfigError):
    """The sweep's parent run could not be opened; nothing can be logged."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrackingContext:
    """Where a sweep's runs live: the store, the experiment and the parent run."""

    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    objective: str


def default_tracking_uri(storage_dir: Path) -> str:
    """The embedded store: a SQLite file under the sweep's storage path; no server."""
    return f"sqlite:///{storage_dir / 'mlflow.db'}"


TRACKING_URI_VARIABLE = "MLFLOW_TRACKING_URI"
"""MLflow's own variable for the tracking URI, read when no option or sweep file gives one."""


def tracking_store(*given: tuple[str, str | None]) -> tuple[str, str] | None:
    """The first tracking URI given, and where it came from, else ``MLFLOW_TRACKING_URI``.

    Args:
        given: ``(source, uri)`` pairs in precedence order, e.g. ``("--tracking-uri",
            args.tracking_uri)`` then ``("mlflow.tracking_uri", ...)``; ``None`` skips one.

    Returns:
        ``(uri, source)``, or ``None`` when nothing names a store (the embedded one).
    """
    environment = os.environ.get(TRACKING_URI_VARIABLE, "").strip()
    for source, uri in (*given, (TRACKING_URI_VARIABLE, environment)):
        if uri:
            return uri, source
    return None


def _is_http(tracking_uri: str) -> bool:
    return tracking_uri.startswith(("http://", "https://"))


def is_reachable(tracking_uri: str, timeout_s: float = 2.0) -> bool:
    """Whether the store answers now: a server's request that reads its database.

    ``/health`` answers while the server's database (PostgreSQL) is down; a lookup of the
    default experiment does not. Any answer but a server error counts (a server behind
    basic auth refuses it with 401). A database URI (SQLite, PostgreSQL through SQLAlchemy)
    counts as reachable: its failures are errors of the call itself.
    """
    if not _is_http(tracking_uri):
        return True
    probe = f"{tracking_uri.rstrip('/')}/{_DATABASE_PROBE}"
    try:
        with urllib.request.urlopen(probe, timeout=timeout_s):
            return True
    except urllib.error.HTTPError as error:
        return error.code < 500
    except Exception:  # refused, reset, timed out: not answering
        return False


_DATABASE_PROBE = "api/2.0/mlflow/experiments/get-by-name?experiment_name=Default"
"""A request an MLflow server answers from its database."""


def check_server(tracking_uri: str, timeout_s: float = 5.0, source: str = "--tracking-uri") -> None:
    """Fails with one clear message when a tracking URI cannot work.

    That is a URI of a scheme MLflow cannot track to, or an http(s) URI with no server
    behind it: a server that accepts the connection but does not answer within
    ``timeout_s`` counts as none. ``source`` (the option, field or variable that gave the
    URI) leads the message.
    """
    import http.client

    scheme = tracking_uri.partition("://")[0].partition("+")[0] if "://" in tracking_uri else ""
    if scheme not in ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks"):
        raise ConfigError(
            f"{source}: {tracking_uri!r} is not a tracking URI MLflow can use; give an "
            "MLflow server (http://host:port) or a database (sqlite:///path/to/mlflow.db)"
        )
    if not _is_http(tracking_uri):
        return
    try:
        with urllib.request.urlopen(f"{tracking_uri.rstrip('/')}/health", timeout=timeout_s):
            pass
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        if isinstance(reason, TimeoutError):
            reason = f"no answer within {timeout_s:g} s"
        omit = "unset" if source == TRACKING_URI_VARIABLE else "omit"
        raise ConfigError(
            f"{source}: no MLflow server answers at {tracking_uri!r} ({reason}); start "
            f"one (mlflow server --host 127.0.0.1 --port 5000) or {omit} {source} to use the "
            "embedded SQLite store"
        ) from None


ARTIFACT_DIRECTORY = "mlartifacts"
"""Beside a SQLite store's database (or under a local storage path): its artifacts."""

_DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
"""The stores MLflow opens through SQLAlchemy: with no artifact location of their own."""


def _sqlite_file(tracking_uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` URI, absolute; ``None`` for any other."""
    from sqlalchemy.engine import make_url

    url = make_url(tracking_uri)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).absolute()


def artifact_location(tracking_uri: str, storage_dir: Path | None) -> str | None:
    """Where a new experiment of the store keeps its artifacts; ``None``: the store decides.

    MLflow gives a database store opened without a server no artifact root but its
    default, ``./mlruns`` in whatever the working directory is. A SQLite store keeps
    them in :data:`ARTIFACT_DIRECTORY` beside its database file (for the embedded store,
    ``storage_dir/mlflow.db``, that is under the storage path); another database
    (PostgreSQL, MySQL), under a local ``storage_dir``, else MLflow's default. A server
    (http, https, databricks) keeps its own.

    Args:
        tracking_uri: The store's URI.
        storage_dir: The sweep's local storage path; ``None`` on object storage.

    Returns:
        A ``file://`` URI, or ``None`` to leave the choice to MLflow.
    """
    scheme = tracking_uri.partition("://")[0].partition("+")[0]
    if scheme not in _DATABASE_SCHEMES:
        return None
    database = _sqlite_file(tracking_uri) if scheme == "sqlite" else None
    directory = database.parent if database is not None else storage_dir
    return (directory / ARTIFACT_DIRECTORY).as_uri() if directory is not None else None


def client(tracking_uri: str) -> Any:
    """An ``MlflowClient`` of the store (imports MLflow on first use).

    Every ``MlflowClient`` versatil makes is made here (tracking, the report, INT8 runs).
    """
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def open_sweep_run(
    *,
    tracking_uri: str,
    experiment: str,
    experiment_dir: Path,
    storage_dir: Path | None,
    sweep_yaml: str,
    objective: str,
    mode: str,
    objectives: list[tuple[str, str]] | None = None,
    plan_json: str | None = None,
    tolerance: float = 0.01,
    experiment_uri: str | None = None,
) -> TrackingContext:
    """Opens (or, when ``experiment_dir`` records one, reopens) the sweep's parent run.

    A new experiment keeps its artifacts in ``mlartifacts`` beside the SQLite database
    (for the embedded store, under ``storage_dir``), never in the working directory; an
    existing experiment keeps its own, a server its own (:func:`artifact_location`). The
    parent's ``versatil.experiment_dir`` tag is ``experiment_uri`` (object storage) or
    ``experiment_dir``.

    The parent is tagged with the primary ``objective`` and ``mode``, every objective
    (``versatil.objectives``, JSON ``[[metric, mode], ...]``) and the verdict's tolerance;
    a new run keeps the sweep file as validated (``sweep.yaml``) and its plan
    (``plan.json``) as artifacts.
    """
    store = client(tracking_uri)
    found = store.get_experiment_by_name(experiment)
    if found is None:
        artifacts = artifact_location(tracking_uri, storage_dir)
        experiment_id = store.create_experiment(experiment, artifact_location=artifacts)
    else:
        experiment_id = found.experiment_id
    record = experiment_dir / PARENT_FILE
    if record.is_file():
        parent_run_id = json.loads(record.read_text())["run_id"]
        store.update_run(parent_run_id, status=MLFLOW_RUNNING)
    else:
        run = store.create_run(
            experiment_id,
            run_name=experiment_dir.name,
            tags={
                tags.SWEEP: experiment,
                tags.EXPERIMENT_DIR: experiment_uri or str(experiment_dir),
                tags.OBJECTIVE: objective,
                tags.MODE: mode,
                tags.OBJECTIVES: json.dumps(objectives or [[objective, mode]]),
                tags.TOLERANCE: repr(tolerance),
            },
        )
        parent_run_id = run.info.run_id
        store.log_text(parent_run_id, sweep_yaml, "sweep.yaml")
        if plan_json is not None:
            store.log_text(parent_run_id, plan_json, "plan.json")
        experiment_dir.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"run_id": parent_run_id, "tracking_uri": tracking_uri}))
    return TrackingContext(
        tracking_uri=tracking_uri,
        experiment_id=experiment_id,
        parent_run_id=parent_run_id,
        objective=objective,
    )


def reopen_sweep_run(experiment_dir: Path, tracking_uri: str | None = None) -> TrackingContext:
    """The parent run an experiment directory records, without changing it.

    Args:
        experiment_dir: Tune's experiment directory of one sweep invocation.
        tracking_uri: The store, when it moved; default the one recorded.

    Raises:
        ConfigError: when the directory records no parent run, or its store does not answer.
    """
    record = experiment_dir / PARENT_FILE
    if not record.is_file():
        raise ConfigError(
            f"{experiment_dir}: no MLflow parent run recorded ({PARENT_FILE} is missing); the "
            "sweep never reached its tracking store"
        )
    saved = json.loads(record.read_text())
    uri = tracking_uri or saved["tracking_uri"]
    check_server(uri)
    parent = client(uri).get_run(saved["run_id"])
    return TrackingContext(
        tracking_uri=uri,
        experiment_id=parent.info.experiment_id,
        parent_run_id=parent.info.run_id,
        objective=SweepTags.read(parent.data.tags).objective,
    )


def find_child_run(store: Any, context: TrackingContext, trial_id: str) -> Any | None:
    """The child run of ``trial_id`` under the parent run, if it exists (the oldest)."""
    runs = store.search_runs(
        [context.experiment_id],
        filter_string=(
            f"tags.`{tags.TRIAL_ID}` = '{trial_id}' and tags.`{tags.PARENT}` = "
            f"'{context.parent_run_id}'"
        ),
        order_by=["attributes.start_time ASC"],
        max_results=1,
    )
    return runs[0] if runs else None


def child_runs(store: Any, context: TrackingContext) -> list[Any]:
    """Every child run of the parent run."""
    return store.search_runs(
        [context.experiment_id],
        filter_string=f"tags.`{tags.PARENT}` = '{context.parent_run_id}'",
        max_results=10_000,
    )


def runs_by_trial(store: Any, context: TrackingContext) -> dict[str, Any]:
    """The parent run's child runs by their trial id (:class:`TrialTags`)."""
    runs = child_runs(store, context)
    return {TrialTags.read(run.data.tags, run.info.run_id).trial_id: run for run in runs}
