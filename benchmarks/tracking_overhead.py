"""Benchmark: what MLflow tracking costs, now that the driver logs every result.

Trials never talk to MLflow: the driver's Tune callback opens each trial's child run at its
first result and logs every epoch's metrics in one ``log_batch``. Training pays nothing, so
the cost to measure is the driver's time per result, which bounds how many results per
second a sweep can report. This logs ``--trials`` child runs of ``--epochs`` results each,
shaped like real trial results, to a store (the embedded SQLite file, or ``--tracking-uri
http://...`` for a server) and prints the time per run opened and per result::

    python benchmarks/tracking_overhead.py
    python benchmarks/tracking_overhead.py --tracking-uri http://127.0.0.1:5000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def result_for(epoch: int) -> dict[str, float]:
    """An epoch result with the metrics a real trial reports."""
    return {
        "epoch": epoch,
        "val_loss": 1.0 / (epoch + 1),
        "train_loss": 1.1 / (epoch + 1),
        "samples_per_sec": 25_000.0,
        "epoch_time_s": 0.6,
        "peak_memory_mb": 410.0,
        "fit_time_s": 0.6 * (epoch + 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args()

    from versatil.sweep.config import validate_sweep
    from versatil.sweep.tracking import SweepTracker, default_tracking_uri, open_sweep_run

    root = Path(tempfile.mkdtemp(prefix="versatil-tracking-bench-"))
    uri = args.tracking_uri or default_tracking_uri(root)
    sweep = validate_sweep({"name": "tracking_overhead", "storage_path": str(root)})
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
    first: list[float] = []  # a trial's first result: opens its run, logs params and config
    later: list[float] = []  # every other result: one log_batch
    finish: list[float] = []
    for trial in range(args.trials):
        axes = {"precision": "32", "lr": 0.003}
        for epoch in range(args.epochs):
            start = time.perf_counter()
            tracker.trial_result(f"t{trial}", f"t{trial}", axes, result_for(epoch))
            (first if epoch == 0 else later).append(time.perf_counter() - start)
        start = time.perf_counter()
        tracker.finish_trial(f"t{trial}", f"t{trial}", axes, "completed", "")
        finish.append(time.perf_counter() - start)

    def ms(values: list[float]) -> str:
        return f"median {1000 * statistics.median(values):.1f} ms, max {1000 * max(values):.1f} ms"

    per_result = statistics.median(later)
    print(f"store: {uri}; {args.trials} trials x {args.epochs} results, in the driver")
    print(f"open the parent run (imports, schema): {open_s:.2f} s, overlapped with Ray start")
    print(f"first result of a trial (open its run, params, config.yaml): {ms(first)}")
    print(f"every later result (one log_batch): {ms(later)}")
    print(f"end of a trial (status tags, end the run): {ms(finish)}")
    print(
        f"the driver keeps up with {1 / per_result:.0f} results/s; two trials of 0.6 s "
        f"epochs report {2 / 0.6:.1f}/s ({100 * per_result * 2 / 0.6:.1f}% of the driver's time)"
    )


if __name__ == "__main__":
    main()
