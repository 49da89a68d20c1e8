"""Start and stop a real, light ``mlflow server`` on 127.0.0.1 (tests and docs scripts)."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def start_mlflow_server(
    root: Path,
    timeout_s: float = 90,
    port: int | None = None,
    artifacts_destination: str | None = None,
    env: dict[str, str] | None = None,
    backend_store_uri: str | None = None,
) -> tuple[subprocess.Popen, str]:
    """Starts a server (SQLite backend, local artifacts under ``root``); returns it and its URI.

    ``port`` restarts a server where it was (same store, same URI); default a free port.
    ``artifacts_destination`` (``s3://bucket/prefix``, with ``env`` holding the store's
    endpoint and keys) replaces the local artifact directory, ``backend_store_uri`` (a
    PostgreSQL database, say) the SQLite file.
    """
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    env = {
        **os.environ,
        **(env or {}),
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    server = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server",
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", backend_store_uri or f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination", artifacts_destination or str(root / "artifacts"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(root / "server.log").open("a"),
        start_new_session=True,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                return server, uri
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop_mlflow_server(server)
                log = (root / "server.log").read_text()
                raise RuntimeError(f"mlflow server did not start: {log}") from None
            time.sleep(0.5)


def stop_mlflow_server(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (continued first, if stopped), then wait for it."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGCONT)
        os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=20)
