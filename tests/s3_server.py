"""Start and stop moto's standalone S3 server on 127.0.0.1: a real HTTP S3 API for tests.

``moto_server`` runs in a session of its own and is stopped by its PID. Clients reach it with
the standard AWS variables of :func:`s3_environment` (the endpoint, throwaway keys, a region,
and no probe of a cloud's metadata service).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass
class S3Server:
    """A running moto server: its process and endpoint (``http://127.0.0.1:PORT``)."""

    process: subprocess.Popen
    endpoint: str

    def environment(self) -> dict[str, str]:
        """The AWS variables a client (boto3, pyarrow, MLflow) of this server needs."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self):
        """A boto3 S3 client of this server."""
        import boto3

        env = self.environment()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
        )

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under ``prefix`` in ``bucket``."""
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]


def start_s3_server(log: Path, timeout_s: float = 60) -> S3Server:
    """Starts ``moto_server`` on a free loopback port and waits until it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=log.open("a"),
        start_new_session=True,
    )
    server = S3Server(process, f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{server.endpoint}/moto-api/data.json", timeout=2):
                return server
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop_s3_server(server)
                raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
            time.sleep(0.3)


def stop_s3_server(server: S3Server) -> None:
    """SIGTERM to the server's process group, then wait for it."""
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)
    server.process.wait(timeout=20)
