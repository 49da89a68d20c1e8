"""A sweep loses its MLflow server mid-sweep and ends without it; ``sync`` fills it in later.

    python docs/examples/mlflow_outage/outage.py

In a new temporary directory, beside copies of ``outage.yaml`` and ``outage_task.py``, it
starts an ``mlflow server`` on a free loopback port and runs, printing each command after a
``$`` prompt as a console would:

1. the sweep of ``outage.yaml`` against that server: its trial with lr 0.01 stops the
   server once the server holds its first epoch (see ``outage_task.py``), and the server
   stays down until the sweep has ended;
2. the server again, on the same port and store, then ``sync`` twice: the first backfills
   what the store missed, the second finds nothing missing.

Every wait is for an observable state (the server's ``/health``, a metric in the store,
the server's port refusing connections), none for a clock.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAME = "outage-demo"
START_S = 120.0


def free_port() -> int:
    """A TCP port nothing listens on, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(root: Path, port: int) -> subprocess.Popen:
    """Starts ``mlflow server`` (SQLite store and artifacts under ``root``) and waits for it."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    server = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination", str(root / "artifacts"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(root / "server.log").open("a"),
        start_new_session=True,  # its own process group, which the task stops whole
    )  # fmt: skip
    deadline = time.monotonic() + START_S
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return server
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop_server(server)
                raise RuntimeError(f"mlflow server did not start: {root / 'server.log'}") from None
            time.sleep(0.5)


def stop_server(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, if it still runs; then waits for it."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=30)


def run(workdir: Path, *args: str) -> int:
    """Runs ``python -m versatil.sweep ARGS`` in ``workdir`` after a ``$`` prompt line."""
    print(f"$ python -m versatil.sweep {shlex.join(args)}", flush=True)
    status = subprocess.run(
        [sys.executable, "-m", "versatil.sweep", *args], cwd=workdir, check=False
    ).returncode
    print(f"(exit status {status})", flush=True)
    return status


def session(workdir: Path) -> int:
    """The sweep, its server stopped mid-sweep, then the server back and ``sync`` twice."""
    for name in ("outage.yaml", "outage_task.py"):
        shutil.copyfile(HERE / name, workdir / name)
    root = workdir / "server"
    root.mkdir()
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_server(root, port)
    try:
        server_file = workdir / "server.json"
        server_file.write_text(json.dumps({"pid": server.pid, "uri": uri, "experiment": NAME}))
        if run(workdir, "--config", "outage.yaml", "--tracking-uri", uri) != 0:
            return 1
        if server.poll() is None:
            print("the server never stopped: no outage happened", file=sys.stderr)
            return 1
        print(f"(mlflow server started again at {uri}, on the same store)", flush=True)
        server = start_server(root, port)
        sync = ("sync", NAME, "--storage-path", "runs")
        return max(run(workdir, *sync), run(workdir, *sync))
    finally:
        stop_server(server)


def main() -> int:
    """Runs the session in a new temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="versatil-outage-") as directory:
        return session(Path(directory))


if __name__ == "__main__":
    sys.exit(main())
