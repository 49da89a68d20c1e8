"""Start and stop a real local Ray head with its dashboard and job server, on loopback only.

The head runs as ``ray start --head --block`` in a session of its own, with its own
``--temp-dir`` and free ports for everything it listens on, so it never meets another Ray
on the machine. It is stopped by signalling the processes of that session, found by their
session id: ``ray stop`` would stop every Ray on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

RAY = [sys.executable, "-m", "ray.scripts.scripts"]


_GIVEN: set[int] = set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, and not one this process was given before.

    The kernel may hand out a port it just released again, and a node started with two
    flags on one port fails (Ray: "trying to use a port number ... used by other
    components"); so each port is given once.
    """
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


@dataclass
class RayHead:
    """A running head: its ``ray start`` process, temp dir and job server address."""

    process: subprocess.Popen
    temp_dir: Path
    dashboard: str
    log: Path
    address: str = ""  # the GCS, for ``--address``
    token: str | None = None  # Ray's auth token, when the head runs with RAY_AUTH_MODE=token

    def get(self, path: str, timeout_s: float = 30) -> object:
        """The JSON the dashboard answers at ``path``, with the head's token when it has one."""
        request = urllib.request.Request(f"{self.dashboard}{path}")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return json.load(answer)


SLOW_MACHINE = {"RAY_raylet_start_wait_time_s": "120"}
"""A node's start waits up to 2 minutes for its raylet to register (Ray's default, 30 s,
is too short on 2 busy cores, where two test processes start clusters side by side).
``ray start`` of Ray 2.60 waits a fixed 30 s whatever this says: a node it gives up on is
started again (:func:`start_joined_node`)."""


def start_ray_head(
    num_cpus: int, env: dict[str, str], timeout_s: float = 180, host: str = "127.0.0.1"
) -> RayHead:
    """Starts a head and waits until its job server answers.

    Args:
        num_cpus: CPUs the head offers to tasks.
        env: The environment of the head, and so of the jobs it runs.
        timeout_s: How long the job server may take to answer.
        host: The loopback address it listens on. Ray takes ``127.0.0.1`` for the
            machine's interface address unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
            which refuses worker nodes: a head with worker nodes uses another (127.0.0.2).

    Raises:
        RuntimeError: With the head's output, when it exits or does not answer in time.
    """
    env = {**SLOW_MACHINE, **env}
    # Ray's socket paths must stay short: not under pytest's long tmp_path.
    temp_dir = Path(tempfile.mkdtemp(prefix="vrj-", dir="/tmp"))
    log = temp_dir / "head.log"
    ports = {
        "--port": free_port(),
        "--dashboard-port": free_port(),
        "--ray-client-server-port": free_port(),
        "--dashboard-agent-listen-port": free_port(),
        "--dashboard-agent-grpc-port": free_port(),
        "--runtime-env-agent-port": free_port(),
        "--metrics-export-port": free_port(),
        "--node-manager-port": free_port(),
        "--object-manager-port": free_port(),
    }
    command = [
        *RAY, "start", "--head", "--block",
        f"--node-ip-address={host}", f"--dashboard-host={host}",
        "--include-dashboard=true", f"--num-cpus={num_cpus}", "--num-gpus=0",
        f"--temp-dir={temp_dir}", "--disable-usage-stats",
        *(f"{flag}={port}" for flag, port in ports.items()),
    ]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    head = RayHead(
        process,
        temp_dir,
        f"http://{host}:{ports['--dashboard-port']}",
        log,
        address=f"{host}:{ports['--port']}",
        token=env.get("RAY_AUTH_TOKEN") if env.get("RAY_AUTH_MODE") == "token" else None,
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            head.get("/api/version", timeout_s=5)
            return head
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                output = log.read_text()
                stop_ray_head(head)
                raise RuntimeError(f"Ray head did not start:\n{output}") from None
            time.sleep(1)


def _session(sid: int) -> list[int]:
    """The live (not zombie) processes of a session, read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # pid (comm) state ppid pgrp session ...; comm may hold spaces.
            state, _, _, session = stat.read_text().rpartition(")")[2].split()[:4]
            if int(session) == sid and state != "Z":
                found.append(int(stat.parent.name))
    return found


def _kill_session(sid: int, timeout_s: float) -> None:
    """Signals every process of session ``sid``: SIGTERM, then SIGKILL, each waited for."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _session(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout_s
        while _session(sid) and time.monotonic() < deadline:
            time.sleep(0.2)


def stop_ray_head(head: RayHead, timeout_s: float = 30) -> None:
    """Stops every process of the head's session (SIGTERM, then SIGKILL) and removes its files."""
    if head.process.poll() is None:
        head.process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        head.process.wait(timeout=timeout_s)
    _kill_session(head.process.pid, timeout_s)
    if head.process.poll() is None:
        head.process.kill()
    head.process.wait(timeout=timeout_s)
    shutil.rmtree(head.temp_dir, ignore_errors=True)


@dataclass
class RayNode:
    """A worker node started by ``ray start --address``: its process and log."""

    process: subprocess.Popen
    log: Path


def start_hidden_node(
    head: RayHead, num_cpus: int, env: dict[str, str], hidden: list[Path], host: str = "127.0.0.3"
) -> RayNode:
    """Starts a worker node in a mount namespace of its own, ``hidden`` covered by empty tmpfs.

    Its processes (raylet, workers) see the machine's files but those under ``hidden``, as a
    node on another machine sees none of the driver's: ``unshare --mount`` (needs root) with
    private propagation, so the mounts stay inside. It joins ``head`` on loopback, with free
    ports of its own; it is stopped like a head, by its session (:func:`stop_ray_node`).
    """
    env = {**SLOW_MACHINE, **env}
    log = head.temp_dir / f"node-{free_port()}.log"
    temp_dir = log.with_suffix("")  # its own: its raylet's logs are read when it fails to join
    ports = {
        "--node-manager-port": free_port(),
        "--object-manager-port": free_port(),
        "--runtime-env-agent-port": free_port(),
        "--dashboard-agent-listen-port": free_port(),
        "--dashboard-agent-grpc-port": free_port(),
        "--metrics-export-port": free_port(),
    }
    start = [
        *RAY, "start", f"--address={head.address}", "--block",
        f"--node-ip-address={host}", f"--num-cpus={num_cpus}", "--num-gpus=0",
        "--disable-usage-stats", f"--temp-dir={temp_dir}",
        *(f"{flag}={port}" for flag, port in ports.items()),
    ]  # fmt: skip
    mounts = " && ".join(f'mount -t tmpfs tmpfs "{path}"' for path in hidden)
    command = [
        "unshare", "--mount", "--propagation", "private", "--",
        "sh", "-c", f'{mounts} && exec "$@"', "node", *start,
    ]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return RayNode(process, log)


def _alive_nodes(head: RayHead) -> int:
    """How many nodes the head's dashboard reports alive."""
    summary = head.get("/nodes?view=summary")["data"]["summary"]
    return sum(node["raylet"]["state"] == "ALIVE" for node in summary)


def _node_logs(node: RayNode) -> str:
    """The tail of the node's ``ray start`` output and of its raylet's logs."""
    texts = [node.log.read_text(errors="replace")[-3000:]]
    for raylet in sorted(node.log.with_suffix("").glob("session_*/logs/raylet.*")):
        texts.append(f"--- {raylet.name}\n{raylet.read_text(errors='replace')[-2000:]}")
    return "\n".join(texts)


def start_joined_node(
    head: RayHead, count: int, attempts: int = 2, bound_s: float = 180, **node_args
) -> RayNode:
    """Starts a hidden node (:func:`start_hidden_node`) and waits until ``count`` nodes are alive.

    A node whose ``ray start`` gives up before its raylet registers (it exits: Ray waits a
    fixed 30 s, and on 2 busy cores the head may answer later) is stopped and started
    again, ``attempts`` times in all, each waited for at most ``bound_s``.

    Raises:
        AssertionError: With the last node's logs, when no attempt joined.
    """
    logs = []
    for _ in range(attempts):
        node = start_hidden_node(head, **node_args)
        deadline = time.monotonic() + bound_s
        while node.process.poll() is None and time.monotonic() < deadline:
            if _alive_nodes(head) >= count:
                return node
            time.sleep(1)
        logs.append(_node_logs(node))
        stop_ray_node(node)
    raise AssertionError(f"the node did not join in {attempts} attempts:\n{logs[-1]}")


def stop_ray_node(node: RayNode, timeout_s: float = 30) -> None:
    """Stops every process of the node's session: SIGTERM, then SIGKILL."""
    _kill_session(node.process.pid, timeout_s)
    node.process.wait(timeout=timeout_s)
