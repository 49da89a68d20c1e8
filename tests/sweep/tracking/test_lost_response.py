"""A metrics batch the server wrote but whose answer was lost is never logged twice.

A real ``mlflow server`` on a real PostgreSQL, reached through a proxy that forwards each
request and, while told to, reads the server's answer to a ``log-batch`` and closes the
client's connection instead of passing it on: the server has written the batch, and the
client sees the connection fail (its own retries meet the same). The outcome is unknown to
the driver, so the next logging of that run asks the server what it holds first.
"""

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mlflow.tracking import MlflowClient

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.postgres_server import start_postgres, stop_postgres
from versatil.sweep.tracking import ChildRun, open_sweep_run

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class DroppingProxy(ThreadingHTTPServer):
    """An HTTP proxy to ``127.0.0.1:upstream``; while :attr:`dropping`, batches' answers are lost.

    Attributes:
        dropping: Whether a ``log-batch`` request's answer is dropped (the request is
            forwarded, and the server's whole answer read, first).
        dropped: How many answers were dropped.
    """

    daemon_threads = True

    def __init__(self, upstream: int) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = upstream
        self.dropping = False
        self.dropped = 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        if self.server.dropping and self.path.endswith("/runs/log-batch"):
            self.server.dropped += 1
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # written, and the answer lost
            return
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in HOP_BY_HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, *args) -> None:
        pass


def result(epoch):
    return {"epoch": epoch, "val_loss": 1.0 / (epoch + 1), "samples_per_sec": 100.0 + epoch}


@pytest.mark.slow  # PostgreSQL and an mlflow server
def test_a_batch_written_whose_answer_was_lost_is_not_logged_again(postgres_bin, tmp_path):
    database = start_postgres(postgres_bin)
    server = proxy = None
    try:
        root = tmp_path / "server"
        root.mkdir()
        backend = database.uri.replace("postgresql://", "postgresql+psycopg2://", 1)
        server, uri = start_mlflow_server(root, backend_store_uri=backend)
        proxy = DroppingProxy(int(uri.rsplit(":", 1)[1]))
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        context = open_sweep_run(
            tracking_uri=proxy.uri,
            experiment="lost",
            experiment_dir=tmp_path / "lost-1",
            storage_dir=None,
            sweep_yaml="name: lost\n",
            objective="val_loss",
            mode="min",
        )
        child = ChildRun.open(
            MlflowClient(proxy.uri),
            context,
            trial_id="t_00000",
            trial_name="t_00000",
            axes={"lr": 0.01},
            config=None,
        )
        child.log_epoch(result(0))
        proxy.dropping = True
        with pytest.raises(Exception):  # noqa: B017 (whatever the client makes of it)
            child.log_epoch(result(1))
        proxy.dropping = False
        assert proxy.dropped >= 1 and child.in_doubt
        direct = MlflowClient(uri)
        held = sorted(m.step for m in direct.get_metric_history(child.run_id, "val_loss"))
        assert held == [0, 1], held  # the server wrote the batch whose answer was lost
        # The retry (the backfill's, once the store answers) asks first: nothing twice.
        assert child.log_epoch(result(1)) == 0 and not child.in_doubt
        assert child.log_epoch(result(2)) > 0
        for metric in ("val_loss", "samples_per_sec"):
            steps = sorted(m.step for m in direct.get_metric_history(child.run_id, metric))
            assert steps == [0, 1, 2], (metric, steps)
    finally:
        if proxy is not None:
            proxy.shutdown()
            proxy.server_close()
        if server is not None:
            stop_mlflow_server(server)
        stop_postgres(database)
