"""What prepare hands the phases after it: the plan, and where the sweep runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from versatil.sweep.engine.shipping import Shipment
from versatil.sweep.plan import Plan
from versatil.sweep.storage import Storage

__all__ = ["Prepared"]


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What a sweep knows before Ray starts.

    Attributes:
        plan: The sweep file read into what the phases after prepare need.
        storage: The storage path, proven writable.
        name: Tune's experiment name: a new run's, or the one a resume continues.
        resume: Whether this run continues an earlier one.
        experiment_dir: The experiment's directory (its local mirror on object storage).
        tracking_uri: The MLflow store, proven reachable.
        sweep_yaml: The sweep as validated, as stored and logged.
        shipment: The task's code for a cluster's nodes (Ray's ``runtime_env``).
    """

    plan: Plan
    storage: Storage
    name: str
    resume: bool
    experiment_dir: Path
    tracking_uri: str
    sweep_yaml: str
    shipment: Shipment
