"""Benchmark: what MLflow tracking costs training, measured side by side.

In a sweep the driver logs every result; a trial's worker never talks to MLflow. A
function trainable waits at each report until the driver has taken the result, so the
driver's callback only queues the logging, and one background thread does it. This fits
the same run of the built-in reaching task with tracking off and on, alternating
``--repeats`` times so that machine noise hits both alike. "On" does at each epoch what the
driver does for a result, but inside the training process, which makes it a pessimistic
model: it queues :meth:`~versatil.sweep.tracking.SweepTracker.trial_result` (the first
result opens the trial's run with its params and ``config.yaml``; each one logs the epoch
in one ``log_batch``), and the logging thread competes with training for the GIL::

    python benchmarks/tracking_overhead.py --repeats 3
    python benchmarks/tracking_overhead.py --tracking-uri http://127.0.0.1:5000

It prints each fit's wall time and samples/s, the overhead of the median fit wall, the time
a result costs the trial (queueing it) and the time its logging takes in the thread.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

TASK = {"n_episodes": 640, "horizon": 50, "width": 64, "eps": 1e-4}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args()

    from versatil.cli_common import quiet_libraries
    from versatil.sweep.config import validate_sweep
    from versatil.sweep.tracking import SweepTracker, default_tracking_uri, open_sweep_run
    from versatil.training.config import TrainConfig
    from versatil.training.fit import train

    quiet_libraries()
    root = Path(tempfile.mkdtemp(prefix="versatil-tracking-bench-"))
    uri = args.tracking_uri or default_tracking_uri(root)
    sweep = validate_sweep(
        {
            "name": "tracking_overhead",
            "task": {"name": "reaching", "params": TASK},
            "space": {"lr": {"choice": [0.003]}},
            "trainer": {"max_epochs": args.epochs, "accelerator": "cpu"},
            "storage_path": str(root),
        }
    )
    started = time.perf_counter()
    context = open_sweep_run(
        tracking_uri=uri,
        experiment="tracking_overhead",
        experiment_dir=root / "sweep",
        storage_dir=root,
        sweep_yaml="name: tracking_overhead\n",
        objective="val_loss",
        mode="min",
    )
    open_s = time.perf_counter() - started
    tracker = SweepTracker(context, sweep)
    config = TrainConfig(params=TASK, max_epochs=args.epochs, accelerator="cpu")
    walls: dict[str, list[float]] = {"off": [], "on": []}
    speeds: dict[str, list[float]] = {"off": [], "on": []}
    queued: list[float] = []  # what a result costs the trial: putting it on the queue
    for repeat in range(args.repeats):
        for mode in ("off", "on"):
            trial_id = f"t{repeat}"
            epoch_speeds: list[float] = []

            def hook(trainer, metrics, mode=mode, trial_id=trial_id, speeds=epoch_speeds):
                speeds.append(metrics["samples_per_sec"])
                if mode == "on":
                    start = time.perf_counter()
                    tracker.submit(tracker.trial_result, trial_id, trial_id, {"lr": 0.003}, metrics)
                    queued.append(time.perf_counter() - start)

            start = time.perf_counter()
            train(config, root / f"ckpt-{mode}-{repeat}", on_epoch_end=hook)
            walls[mode].append(time.perf_counter() - start)
            speeds[mode].append(statistics.median(epoch_speeds))
            if mode == "on":
                tracker.submit(
                    tracker.finish_trial, trial_id, trial_id, {"lr": 0.003}, "completed", ""
                )
            print(
                f"repeat {repeat} tracking {mode:3}: fit {walls[mode][-1]:.2f}s, "
                f"{speeds[mode][-1]:.0f} samples/s",
                flush=True,
            )
    tracker.drain()
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
    logged = tracker.log_times_s
    print(
        f"per result: the trial queues it in {1e6 * statistics.median(queued):.0f} us (median); "
        f"the thread logs it in {1000 * statistics.median(logged):.1f} ms (median, "
        f"max {1000 * max(logged):.1f} ms, a trial's first result and end included)"
    )


if __name__ == "__main__":
    main()
