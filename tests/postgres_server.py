"""Start and stop a real, throwaway PostgreSQL server on 127.0.0.1 (Debian's ``postgresql``).

PostgreSQL refuses to run as root, and tests run as root here and in CI: as root, ``initdb``
and ``postgres`` run as the unprivileged user ``nobody`` through ``setpriv``, which execs them,
so the server's PID is the one to signal. The cluster lives in its own temp dir (data, Unix
socket) and listens on a free loopback port with password (SCRAM) authentication.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534  # Debian's nobody and nogroup


def postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@dataclass
class PostgresServer:
    """A running server, its files and the login of its one database."""

    process: subprocess.Popen
    root: Path
    port: int
    user: str
    password: str
    database: str
    bindir: Path

    @property
    def uri(self) -> str:
        """The SQLAlchemy URI MLflow's ``--backend-store-uri`` takes."""
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"


def _as_nobody() -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


def start_postgres(
    bindir: Path, user: str = "mlflow", database: str = "mlflow", timeout_s: float = 120
) -> PostgresServer:
    """Initialises a cluster in a temp dir, starts it and creates ``database``.

    Raises:
        RuntimeError: With the server's log, when it does not accept connections in time.
    """
    # Not under pytest's tmp_path: its root is private to root, and nobody must reach this.
    root = Path(tempfile.mkdtemp(prefix="vpg-", dir="/tmp"))
    root.chmod(0o755)
    data, sockets = root / "data", root / "sockets"
    data.mkdir(mode=0o700)
    sockets.mkdir(mode=0o700)
    password = secrets.token_hex(16)
    password_file = root / "password"
    password_file.write_text(password)
    password_file.chmod(0o600)
    if os.geteuid() == 0:
        for path in (data, sockets, password_file):
            os.chown(path, NOBODY, NOBODY)
    subprocess.run(
        [
            *_as_nobody(), str(bindir / "initdb"), "-D", str(data), "-U", user,
            f"--pwfile={password_file}", "--auth=scram-sha-256", "-E", "UTF8", "--locale=C",
        ],
        check=True, capture_output=True, timeout=timeout_s,
    )  # fmt: skip
    password_file.unlink()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = PostgresServer(None, root, port, user, password, "postgres", bindir)
    connection = _launch(server, timeout_s)
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{database}"')
    finally:
        connection.close()
    server.database = database
    return server


def _launch(server: PostgresServer, timeout_s: float):
    """Starts ``postgres`` on the server's data and port; returns a connection once it accepts.

    Raises:
        RuntimeError: With the server's log, when it does not accept connections in time.
    """
    import psycopg2

    log = server.root / "server.log"
    with log.open("a") as out:
        server.process = subprocess.Popen(
            [
                *_as_nobody(), str(server.bindir / "postgres"), "-D", str(server.root / "data"),
                "-h", "127.0.0.1", "-p", str(server.port), "-k", str(server.root / "sockets"),
            ],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return psycopg2.connect(server.uri, connect_timeout=5)
        except psycopg2.OperationalError:
            if server.process.poll() is not None or time.monotonic() > deadline:
                stop_postgres(server)
                raise RuntimeError(f"postgres did not start:\n{log.read_text()}") from None
            time.sleep(0.5)


def restart_postgres(server: PostgresServer, timeout_s: float = 120) -> None:
    """Starts a stopped server again: same data, same port, same login."""
    _launch(server, timeout_s).close()


def stop_postgres(server: PostgresServer, timeout_s: float = 30, remove: bool = True) -> None:
    """Fast shutdown (SIGINT: clients are disconnected), SIGKILL if that hangs.

    ``remove`` deletes its files too; without it, :func:`restart_postgres` starts it again.
    """
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=timeout_s)
    if remove:
        shutil.rmtree(server.root, ignore_errors=True)
