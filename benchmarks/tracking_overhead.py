"""Benchmark: what MLflow tracking costs training, measured side by side.

In a sweep the driver logs every result; a trial's worker never talks to MLflow. A
function trainable waits at each report until the driver has taken the result, so the
driver's callback only queues the logging, and one background thread of the driver
process does it. This fits the same run of the built-in reaching task with tracking off
and on, alternating ``--repeats`` times so that machine noise hits both alike. "On" hands
each epoch's result to a separate driver-like process, which does what the sweep's driver
does with it: :meth:`~versatil.sweep.tracking.SweepTracker.submit` of ``trial_result``
(the first result opens the trial's run with its params and ``config.yaml``; each one
logs the epoch in one ``log_batch``)::

    python benchmarks/tracking_overhead.py --repeats 3
    python benchmarks/tracking_overhead.py --tracking-uri http://127.0.0.1:5000

It prints each fit's wall time and samples/s, the overhead of the median fit wall, and the
time the driver's thread took to log a result, and writes them to ``--out`` (default
``benchmarks/results/tracking_overhead-<date>.json``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

TASK = {"n_episodes": 640, "horizon": 50, "width": 64, "eps": 1e-4}
AXES = {"lr": 0.003}

_DRIVER: Any = None
"""The driver-like process's SweepTracker."""


def _open_driver(uri: str, root: str, sweep_data: dict[str, Any]) -> None:
    """In the driver-like process: opens the parent run and the tracker, as run_sweep does."""
    global _DRIVER
    from versatil.sweep import validate_sweep
    from versatil.sweep.config.planning import make_plan
    from versatil.sweep.tracking import SweepTracker, open_sweep_run

    context = open_sweep_run(
        tracking_uri=uri,
        experiment="tracking_overhead",
        experiment_dir=Path(root) / "sweep",
        storage_dir=Path(root),
        sweep_yaml="name: tracking_overhead\n",
        objective="val_loss",
        mode="min",
    )
    _DRIVER = SweepTracker(context, make_plan(validate_sweep(sweep_data)).where)


def _ready() -> None:
    """Returns once the driver-like process has opened the parent run."""


def _on_result(trial_id: str, result: dict[str, float]) -> None:
    """What the driver's Tune callback does with a result: queue its logging."""
    _DRIVER.submit(_DRIVER.trial_result, trial_id, trial_id, AXES, result)


def _on_complete(trial_id: str) -> None:
    """What the driver's Tune callback does when a trial ends."""
    _DRIVER.submit(_DRIVER.finish_trial, trial_id, trial_id, AXES, "completed", "")


def _drain() -> list[float]:
    """Waits for every queued logging call; returns the seconds each took."""
    _DRIVER.drain()
    return _DRIVER.log_times_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--out", type=Path, default=None, help="the JSON report")
    args = parser.parse_args()
    out = args.out or Path(__file__).parent / "results" / (
        f"tracking_overhead-{time.strftime('%Y%m%d')}.json"
    )

    from versatil.cli_common import quiet_libraries
    from versatil.sweep.tracking import default_tracking_uri
    from versatil.training.config import TrainConfig
    from versatil.training.fit import train

    quiet_libraries()
    import torch

    # A 1-CPU trial trains on one thread: Ray sets OMP_NUM_THREADS to a worker's CPUs.
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="versatil-tracking-bench-"))
    uri = args.tracking_uri or default_tracking_uri(root)
    sweep_data = {
        "name": "tracking_overhead",
        "task": {"name": "reaching", "params": TASK},
        "space": {"lr": {"choice": [AXES["lr"]]}},
        "trainer": {"max_epochs": args.epochs, "accelerator": "cpu"},
        "storage_path": str(root),
    }
    started = time.perf_counter()
    driver = concurrent.futures.ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_open_driver,
        initargs=(uri, str(root), sweep_data),
    )
    driver.submit(_ready).result()
    open_s = time.perf_counter() - started
    config = TrainConfig(params=TASK, max_epochs=args.epochs, accelerator="cpu")
    walls: dict[str, list[float]] = {"off": [], "on": []}
    speeds: dict[str, list[float]] = {"off": [], "on": []}
    handoffs: list[float] = []  # what a result costs the trial: handing it to the driver
    for repeat in range(args.repeats):
        for mode in ("off", "on"):
            trial_id = f"t{repeat}"
            epoch_speeds: list[float] = []

            def hook(trainer, metrics, mode=mode, trial_id=trial_id, speeds=epoch_speeds):
                speeds.append(metrics["samples_per_sec"])
                if mode == "on":
                    start = time.perf_counter()
                    driver.submit(_on_result, trial_id, dict(metrics)).result()
                    handoffs.append(time.perf_counter() - start)

            start = time.perf_counter()
            train(config, root / f"ckpt-{mode}-{repeat}", on_epoch_end=hook)
            walls[mode].append(time.perf_counter() - start)
            speeds[mode].append(statistics.median(epoch_speeds))
            if mode == "on":
                driver.submit(_on_complete, trial_id).result()
            print(
                f"repeat {repeat} tracking {mode:3}: fit {walls[mode][-1]:.2f}s, "
                f"{speeds[mode][-1]:.0f} samples/s",
                flush=True,
            )
    logged = driver.submit(_drain).result()
    driver.shutdown()
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    print(f"\nstore: {uri}; {args.epochs} epochs per fit, {args.repeats} fits each way")
    print(f"opening the parent run: {open_s:.2f} s, once per sweep, overlapped with Ray's start")
    print(
        f"median fit wall: off {off:.2f}s, on {on:.2f}s -> overhead {100 * (on - off) / off:+.1f}%"
    )
    print(
        f"median samples/s: off {statistics.median(speeds['off']):.0f}, "
        f"on {statistics.median(speeds['on']):.0f}"
    )
    print(
        f"per result: handing it to the driver {1000 * statistics.median(handoffs):.2f} ms "
        f"(median); the driver's thread logs it in {1000 * statistics.median(logged):.1f} ms "
        f"(median, max {1000 * max(logged):.1f} ms, a trial's first result and end included)"
    )
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            **{name: metadata.version(name) for name in ("torch", "lightning", "mlflow")},
        },
        "store": "server" if args.tracking_uri else "embedded SQLite",
        "epochs": args.epochs,
        "repeats": args.repeats,
        "task_params": TASK,
        "open_parent_s": open_s,
        "fit_wall_s": walls,
        "samples_per_sec": speeds,
        "median_fit_wall_s": {"off": off, "on": on},
        "overhead_fraction": (on - off) / off,
        "handoff_s_median": statistics.median(handoffs),
        "driver_log_s_median": statistics.median(logged),
        "driver_log_s_max": max(logged),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"JSON: {out}")


if __name__ == "__main__":
    main()
