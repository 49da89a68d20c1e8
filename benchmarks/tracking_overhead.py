"""Benchmark: what MLflow tracking costs a trial's training, measured side by side.

The same fit of the built-in reaching task runs with tracking off and with a real
:class:`~versatil.sweep.tracking.TrialTracker` logging every epoch to an MLflow store
(the embedded SQLite file, or ``--tracking-uri http://...`` for a server), alternating
off/on ``--repeats`` times so that machine noise hits both alike::

    python benchmarks/tracking_overhead.py --repeats 3
    python benchmarks/tracking_overhead.py --tracking-uri http://127.0.0.1:5000

It prints each fit's wall time and the per-epoch logging time, and the overhead
``(on - off) / off`` of the median fit wall time.
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
    from versatil.sweep.tracking import TrialTracker, default_tracking_uri, open_sweep_run
    from versatil.training.config import TrainConfig
    from versatil.training.fit import train

    quiet_libraries()
    root = Path(tempfile.mkdtemp(prefix="versatil-tracking-bench-"))
    uri = args.tracking_uri or default_tracking_uri(root)
    context = open_sweep_run(
        tracking_uri=uri,
        experiment="tracking_overhead",
        experiment_dir=root / "sweep",
        storage_dir=root,
        sweep_yaml="name: tracking_overhead\n",
        objective="val_loss",
        mode="min",
    )
    config = TrainConfig(params=TASK, max_epochs=args.epochs, accelerator="cpu")
    walls: dict[str, list[float]] = {"off": [], "on": []}
    log_times: list[float] = []
    for repeat in range(args.repeats):
        for mode in ("off", "on"):
            hook = None
            if mode == "on":
                tracker = TrialTracker(
                    context,
                    trial_id=f"t{repeat}",
                    trial_name=f"t{repeat}",
                    axes={"lr": 0.003},
                    config=config,
                )

                def hook(trainer, metrics, tracker=tracker):
                    start = time.perf_counter()
                    tracker.log_epoch(metrics, "val_loss")
                    log_times.append(time.perf_counter() - start)

            start = time.perf_counter()
            train(config, root / f"ckpt-{mode}-{repeat}", on_epoch_end=hook)
            walls[mode].append(time.perf_counter() - start)
            print(f"repeat {repeat} tracking {mode:3}: fit {walls[mode][-1]:.2f}s", flush=True)
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    print(f"\nstore: {uri}; {args.epochs} epochs per fit, {args.repeats} fits each way")
    print(
        f"median fit wall: off {off:.2f}s, on {on:.2f}s -> overhead {100 * (on - off) / off:+.1f}%"
    )
    print(
        f"per-epoch logging (one log_batch): median {1000 * statistics.median(log_times):.1f} ms, "
        f"max {1000 * max(log_times):.1f} ms"
    )


if __name__ == "__main__":
    main()
