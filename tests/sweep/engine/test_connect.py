"""Joining a cluster at an address: an unreachable one is one clear error, at once.

And no address is a Ray of the sweep's own, even beside a running cluster.
"""

import os
import socket
import subprocess
import sys
import time

import pytest

from versatil.errors import ConfigError
from versatil.sweep.engine.connect import check_access


def test_an_unreachable_address_is_a_clear_error_without_waiting_for_ray():
    # Ray turns 127.0.0.1 into the node's own address, where Ray's processes listen on
    # ports of their own: the probe takes a port free on every address and holds it, never
    # listening, through the whole check, so connecting to it is refused.
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(
            ConfigError, match=rf"--address: cannot reach a Ray cluster at '127.0.0.1:{port}'"
        ):
            check_access(f"127.0.0.1:{port}")
    assert time.monotonic() - start < 10  # ray.init would wait for its GCS timeouts


def test_a_ray_client_address_is_left_to_ray():
    check_access("ray://127.0.0.1:1")  # not probed: Ray's client has its own errors


OWN_RAY = """
import ray
from versatil.sweep.engine.connect import connect_ray

connect_ray(None)
print(ray.get_runtime_context().gcs_address)
ray.shutdown()
"""


def test_no_address_starts_a_ray_of_its_own_beside_a_running_cluster(ray_cluster):
    # The session cluster is recorded in RAY_TMPDIR (ray_current_cluster), where Ray's
    # own default would join it: a sweep given no address must not.
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-c", OWN_RAY], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] != ray_cluster.address, done.stdout
