"""Sweep drivers as separate processes, for tests that kill them."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BOUND_S = 240


def cli(*args):
    """The sweep CLI as a command line."""
    return [sys.executable, "-m", "versatil.sweep", *args]


def wait_for(condition, what, bound_s=BOUND_S):
    """Polls ``condition`` until true; fails naming ``what`` after ``bound_s``."""
    deadline = time.monotonic() + bound_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {bound_s} s: {what}")
        time.sleep(0.2)


def wait_cpus_freed():
    """Waits until the cluster has noticed a dead driver and freed its workers' CPUs."""
    import ray

    total = ray.cluster_resources().get("CPU", 0)
    wait_for(lambda: ray.available_resources().get("CPU", 0) >= total, "the CPUs freed", 120)


def finished_trials(experiment_dir):
    """Trial id -> number of results, for trials whose last result says completed."""
    out = {}
    for path in experiment_dir.glob("*/result.json"):
        lines = path.read_text().splitlines()
        if lines and json.loads(lines[-1])["status"] == "completed":
            out[path.parent.name] = len(lines)
    return out


def run(args, timeout_s=300):
    """Runs a driver to its end; returns the finished process."""
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)


def gated_sweep(
    tmp_path,
    name,
    lrs,
    *,
    gated_lr=None,
    gated_epoch=1,
    gated_at="epoch_start",
    task_params=None,
    **fields,
):
    """A sweep of ``tests.sweep.gated_task`` over ``lrs``, as a dict; its gate is ``tmp_path/gate``.

    The trial of ``gated_lr`` (default the first lr) waits at epoch ``gated_epoch``'s start
    until the gate exists (or in its checkpoint's write, with ``gated_at="checkpoint_write"``).
    ``task_params`` are further params of the task (a second gate), ``fields`` further
    top-level fields of the sweep.
    """
    return {
        "name": name,
        "task": {
            "name": "tests.sweep.gated_task:build",
            "params": {
                "n_episodes": 16,
                "horizon": 10,
                "width": 16,
                "gate": str(tmp_path / "gate"),
                "gated_lr": lrs[0] if gated_lr is None else gated_lr,
                "gated_epoch": gated_epoch,
                "gated_at": gated_at,
                **(task_params or {}),
            },
        },
        "space": {"lr": {"grid": list(lrs)}},
        "storage_path": str(tmp_path / "runs"),
        **fields,
    }


def node_processes(node):
    """The PIDs of a Ray node's processes and of every process they started (its agents)."""
    roots = {info.process.pid for infos in node.all_processes.values() for info in infos}
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
        except (OSError, ValueError):
            continue
        parents[int(pid)] = int(rest.rsplit(") ", 1)[1].split()[1])
    found, grew = set(roots), True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


def kill_leftovers(pids):
    """SIGKILLs those of ``pids`` still running: a killed raylet's agents outlive it."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
