"""The reaching task, whose trial with lr ``stop_lr`` stops the sweep's MLflow server.

That trial reports its first epoch, then, at its second epoch's start, waits until the
server holds that epoch's ``val_loss`` and stops the server (SIGTERM to its process group,
whose id ``server.json`` beside this file holds), waiting until its port refuses
connections. So the server goes down at one known point of the sweep, by no clock.
"""

import json
import os
import signal
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from versatil.training.tasks.reaching import (
    BehaviorCloningPolicy,
    ReachingDemonstrations,
    ReachingParams,
)

SERVER = Path(__file__).resolve().parent / "server.json"
WAIT_S = 120.0


class OutageParams(ReachingParams):
    """The reaching task's parameters, and the lr of the trial that stops the server."""

    stop_lr: float


def _wait_until(condition, what: str) -> None:
    """Polls ``condition`` until it holds; raises after :data:`WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not {what} after {WAIT_S:g} s")
        time.sleep(0.2)


def _holds_an_epoch(uri: str, experiment: str) -> bool:
    """Whether a run of ``experiment`` in the store at ``uri`` holds a ``val_loss``."""
    from mlflow import MlflowClient

    found = MlflowClient(uri).get_experiment_by_name(experiment)
    if found is None:
        return False
    runs = MlflowClient(uri).search_runs([found.experiment_id])
    return any("val_loss" in run.data.metrics for run in runs)


def _refuses(uri: str) -> bool:
    """Whether nothing listens at the server's address any more."""
    address = urlsplit(uri)
    try:
        socket.create_connection((address.hostname, address.port), timeout=1).close()
    except OSError:
        return True
    return False


def stop_server_once_logged() -> None:
    """Waits until the store holds the first epoch, then stops its server."""
    server = json.loads(SERVER.read_text())
    _wait_until(lambda: _holds_an_epoch(server["uri"], server["experiment"]), "logged")
    os.killpg(server["pid"], signal.SIGTERM)
    _wait_until(lambda: _refuses(server["uri"]), "stopped")


class StoppingPolicy(BehaviorCloningPolicy):
    """The reaching policy; with ``stops``, it stops the server at its second epoch."""

    def __init__(self, stops: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stops = stops

    def on_train_epoch_start(self) -> None:
        if self.stops and self.current_epoch == 1 and not _refuses(_uri()):
            stop_server_once_logged()


def _uri() -> str:
    return json.loads(SERVER.read_text())["uri"]


def build(params):
    """The task: the model and its data, for the sweep's ``task: outage_task:build``."""
    p = OutageParams(**params)
    model = StoppingPolicy(
        stops=p.lr == p.stop_lr,
        width=p.width,
        depth=p.depth,
        lr=p.lr,
        eps=p.eps,
        weight_decay=p.weight_decay,
    )
    return model, ReachingDemonstrations(p)


build.params_model = OutageParams
