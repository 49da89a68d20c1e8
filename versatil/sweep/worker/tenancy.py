"""Which trials share a GPU: a registry on each node, one directory per GPU.

With a fraction of a GPU per trial (``resources.gpu: 0.25``), Ray puts several trials on
one GPU, and they time each other. While a trial trains, it holds a file in the directory
of its node and GPU (under the system's temporary directory), named by the trial and
holding its process id; the trials on the GPU are the files whose process is alive, so
the file of a process that was killed before it could remove it is ignored. A trial's fit
samples the count through every epoch (:class:`~versatil.training.sharing.DeviceShareMonitor`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from versatil.sweep.plan import TrialPlan
from versatil.sweep.worker.gpus import given_gpus

if TYPE_CHECKING:  # the training module imports Lightning; the driver imports this one
    from versatil.training.sharing import Tenants

__all__ = ["REGISTRY_DIR", "DeviceRegistry", "gpu_tenancy"]

REGISTRY_DIR = "versatil-gpu-tenants"
"""The registries' directory under the system's temporary directory."""


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this node (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _safe(name: str) -> str:
    """``name`` as a file name: letters, digits, ``.``, ``_`` and ``-`` only."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


class DeviceRegistry:
    """The trials that hold one GPU of one node, as files in one directory.

    Args:
        directory: The GPU's directory; made when a trial first holds it.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def of(cls, node_id: str, gpu_ids: Sequence[str], root: Path | None = None) -> DeviceRegistry:
        """The registry of the GPUs ``gpu_ids`` of node ``node_id``.

        Args:
            node_id: Ray's id of the node.
            gpu_ids: The GPU ids Ray gave the trial (one, for a fraction of a GPU).
            root: Where the registries are; default :data:`REGISTRY_DIR` in the system's
                temporary directory.
        """
        root = root or Path(tempfile.gettempdir()) / REGISTRY_DIR
        return cls(root / _safe(f"{node_id}-gpu-{'-'.join(sorted(gpu_ids))}"))

    @contextlib.contextmanager
    def holding(self, name: str, pid: int | None = None) -> Iterator[None]:
        """Holds the GPU as ``name`` (a trial id) while the block runs.

        Args:
            name: The holder's name, unique among the GPU's holders.
            pid: The holder's process; default this one.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / _safe(name)
        staged = path.with_name(f".{path.name}.{os.getpid()}")
        staged.write_text(str(os.getpid() if pid is None else pid))
        staged.replace(path)  # whole, or not there: a reader never sees half a pid
        try:
            yield
        finally:
            path.unlink(missing_ok=True)

    def count(self) -> int:
        """How many holders of the GPU are alive now."""
        alive = 0
        with contextlib.suppress(FileNotFoundError):
            for path in self.directory.iterdir():
                if path.name.startswith("."):
                    continue
                try:
                    pid = int(path.read_text())
                except (OSError, ValueError):
                    continue  # removed while read
                if _alive(pid):
                    alive += 1
        return alive


@contextlib.contextmanager
def gpu_tenancy(plan: TrialPlan, name: str) -> Iterator[Tenants | None]:
    """While a trial (or rank) trains: how many trials share its GPU, when it has a share.

    Gives ``None`` (nothing to sample) when the trial has a GPU of its own, or none.

    Args:
        plan: The trial's plan (its resources).
        name: The trial's id (with a data-parallel rank's number).
    """
    if not plan.resources.shares_gpu:
        yield None
        return
    import ray

    gpu_ids = given_gpus()
    if not gpu_ids:
        yield None
        return
    registry = DeviceRegistry.of(ray.get_runtime_context().get_node_id(), gpu_ids)
    with registry.holding(name):
        yield registry.count
