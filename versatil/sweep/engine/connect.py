"""Joining a Ray cluster, or starting a local one, with one clear error for each way it fails.

A cluster with Ray's token authentication refuses a process without its token; ``ray.init``
then waits without end. Before joining a cluster at an address, one call to its GCS (a
fraction of a second) finds that out and says what to set instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Iterator
from typing import Any

from versatil.errors import ConfigError, ServiceError, first_line

__all__ = ["check_access", "connect_ray", "joins_cluster"]

LOCAL = "local"
"""Ray's address that always starts a new local Ray (``None`` may join one running)."""

_AUTH_LOG = "ray._private.authentication.authentication_token_setup"


def check_access(address: str) -> None:
    """Fails clearly when the cluster at ``address`` refuses this process's Ray token.

    With ``RAY_AUTH_MODE=token``, Ray reads the token from ``RAY_AUTH_TOKEN``, the file
    ``RAY_AUTH_TOKEN_PATH`` names, or ``~/.ray/auth_token``. A Ray client address
    (``ray://``) is not checked.

    Raises:
        ConfigError: When the cluster requires a token and this one is missing or wrong.
    """
    if address.startswith("ray://"):
        return
    from ray._private.services import canonicalize_bootstrap_address
    from ray._raylet import GcsClient
    from ray.exceptions import AuthenticationError

    try:
        gcs = canonicalize_bootstrap_address(address)
    except Exception:
        return  # no cluster found: ray.init says so
    if gcs is None:
        return
    host, _, port = gcs.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except (OSError, ValueError) as error:
        raise _unreachable(address, f"{gcs}: {error}") from None
    try:
        with _native_stderr_silenced():  # Ray's C++ client logs the refusal on its own
            GcsClient(address=gcs).internal_kv_get(b"versatil-access", None, timeout=30)
    except AuthenticationError:
        token = "a token" if os.environ.get("RAY_AUTH_MODE") == "token" else "no token"
        raise ConfigError(
            f"--address: the Ray cluster at {address!r} requires Ray's token authentication "
            f"and refused this process, which has {token} or a wrong one: set RAY_AUTH_MODE=token "
            "and RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, a file) to the cluster's token "
            "(on Kubernetes, the ray-auth Secret's auth_token)"
        ) from None
    except Exception:  # unreachable, or not a GCS: ray.init gives its own error
        return


def _unreachable(address: str | None, detail: str) -> ConfigError:
    """The error for a cluster address nothing answers at."""
    return ConfigError(
        f"--address: cannot reach a Ray cluster at {address!r} ({detail}); "
        "start one with `ray start --head` or omit --address to run locally"
    )


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 points at /dev/null for the duration (native code writes there)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def joins_cluster(address: str | None) -> bool:
    """Whether a sweep with ``address`` joins a running cluster (else starts a local Ray)."""
    return bool(address or os.environ.get("RAY_ADDRESS"))


def connect_ray(address: str | None, runtime_env: dict[str, Any] | None = None) -> None:
    """Connects to the cluster at ``address``, or starts a local Ray; no-op if connected.

    A local Ray started here keeps Ray's default token authentication, without Ray's
    console warning that it is on: the cluster is this process's own.

    Args:
        address: The cluster's address; ``None`` reads ``RAY_ADDRESS``, else starts a Ray
            of the sweep's own (never a cluster some earlier ``ray start`` left running).
        runtime_env: Ray's ``runtime_env`` of every task and actor the sweep starts
            (see :mod:`versatil.sweep.engine.shipping`); inside a Ray job, Ray merges it
            with the job's.

    Raises:
        ConfigError: When the cluster cannot be reached, or refuses this process's token.
        ServiceError: When a local Ray does not start, twice.
    """
    import ray

    if ray.is_initialized():
        return
    auth_log = logging.getLogger(_AUTH_LOG)
    previous = auth_log.level
    joining = address or os.environ.get("RAY_ADDRESS")
    if not joining:
        auth_log.setLevel(logging.ERROR)
    try:
        if joining:
            check_access(joining)
        # Ray's own default joins the last `ray start` cluster of this machine (recorded in
        # its temp directory); a sweep given no address starts a Ray of its own, as it says.
        _init(address if joining else LOCAL, runtime_env)
    finally:
        auth_log.setLevel(previous)


def _init(address: str | None, runtime_env: dict[str, Any] | None) -> None:
    """``ray.init``, with a second try for a local Ray that starts too slowly."""
    import ray

    try:
        ray.init(
            address=address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            configure_logging=True,
            runtime_env=runtime_env,
        )
    except ConnectionError as error:
        raise _unreachable(address, str(error)) from None
    except ValueError as error:  # Ray's: a runtime_env it cannot use, or merge with a job's
        if runtime_env is None:
            raise
        ray.shutdown()
        raise ConfigError(f"runtime_env: Ray refused it: {first_line(error)}") from None
    except Exception as error:  # Ray raises a bare Exception when its node starts slowly
        if address not in (None, LOCAL):
            raise
        # A local Ray waits 30 s for its raylet; a loaded machine can miss that once.
        ray.shutdown()
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                logging_level=logging.WARNING,
                configure_logging=True,
                runtime_env=runtime_env,
            )
        except Exception as again:
            ray.shutdown()
            raise ServiceError(
                f"a local Ray did not start, twice ({again}; first: {error}); "
                "the machine may be overloaded: retry when it is less busy, or start Ray "
                "yourself with `ray start --head` and pass --address auto"
            ) from None
