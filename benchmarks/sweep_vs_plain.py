"""Benchmark: versatil's sweep engine against a plain Ray Tune + Lightning script.

Both ways run the same N short trials of the built-in reaching task (a grid over ``lr``,
3 epochs by default, on CPU, 2 trials at a time) and the script prints, side by side, the
wall time of each way, the speed ratio and the sweep efficiency::

    efficiency = sum(per-trial fit time) / (concurrency * wall time)

Way A is :func:`versatil.sweep.engine.runner.run_sweep` (warm, reused workers that checkpoint
every epoch). Way B is what a typical user writes: a function trainable that imports torch
and Lightning and runs a Trainer, under a Tuner with Ray's defaults (``reuse_actors=False``:
every trial is a fresh worker process that pays the imports again).

Each way runs in its own fresh subprocess of this script, so neither inherits the other's
imports or Ray session; torch and Lightning are imported once beforehand so that both find
their files in the page cache. Run it on an otherwise idle machine::

    python benchmarks/sweep_vs_plain.py --trials 16
    python benchmarks/sweep_vs_plain.py --trials 64 --json runs/bench_64.json
    python benchmarks/sweep_vs_plain.py --trials 64 --epochs 5   # ~3 s fits

``--only plain`` or ``--only versatil`` runs one way in the current process and prints its
raw timings as JSON (the parent uses it with ``--result-file``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TASK_PARAMS: dict[str, Any] = {"n_episodes": 640, "horizon": 50, "width": 64, "eps": 1e-4}
"""Fixed params of the reaching task: an epoch takes about 0.6 s on one core."""

EPOCHS = 3
"""Epochs per trial (``--epochs``): with 3, a trial's fit takes about 2 s here."""
CONCURRENCY = 2
WAYS = ("plain", "versatil")
LABELS = {"plain": "plain Ray Tune defaults", "versatil": "versatil.sweep"}


def lr_grid(n: int) -> list[float]:
    """``n`` distinct learning rates, log-spaced from 1e-3 to 1e-2."""
    if n == 1:
        return [3e-3]
    return [float(f"{1e-3 * 10 ** (i / (n - 1)):.6g}") for i in range(n)]


def _timing_callback(start: float) -> Any:
    """A Tune callback that stamps every result with the driver's clock.

    Args:
        start: ``time.perf_counter()`` at the start of the way; stamps are relative to it.

    Returns:
        The callback; its ``stamps`` maps a trial id to ``(seconds, fit_time_s, pid)`` per
        result, and ``completed`` maps a trial id to the seconds when it completed.
    """
    from ray import tune

    class _Stamps(tune.Callback):
        def __init__(self) -> None:
            self.stamps: dict[str, list[tuple[float, float, int | None]]] = {}
            self.completed: dict[str, float] = {}

        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            self.stamps.setdefault(trial.trial_id, []).append(
                (
                    time.perf_counter() - start,
                    float(result.get("fit_time_s", math.nan)),
                    result.get("pid"),
                )
            )

        def on_trial_complete(self, iteration, trials, trial, **info) -> None:
            self.completed[trial.trial_id] = time.perf_counter() - start

    return _Stamps()


def plain_trainable(config: dict[str, Any]) -> None:
    """Way B's trainable, as a user writes it: import, build, fit, report every epoch.

    Args:
        config: The trial's config from ``param_space`` (``lr``).
    """
    import_start = time.perf_counter()
    import lightning as L
    import torch  # noqa: F401  (a typical script imports both)
    from ray import tune

    from versatil.training.tasks.reaching import build

    import_s = time.perf_counter() - import_start
    model, datamodule = build({**TASK_PARAMS, "lr": config["lr"]})
    fit_start = math.nan

    class TuneReport(L.Callback):
        def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            tune.report(
                {
                    "val_loss": float(trainer.callback_metrics["val_loss"]),
                    "fit_time_s": time.perf_counter() - fit_start,
                    "import_s": import_s,
                }
            )

    trainer = L.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[TuneReport()],
    )
    fit_start = time.perf_counter()
    trainer.fit(model, datamodule=datamodule)


def _run_plain(lrs: list[float], storage: Path, start: float) -> dict[str, Any]:
    """Way B: a Tuner over :func:`plain_trainable` with Ray's defaults."""
    from ray import tune

    stamps = _timing_callback(start)
    tuner_start = time.perf_counter()
    tuner = tune.Tuner(
        plain_trainable,
        param_space={"lr": tune.grid_search(lrs)},
        tune_config=tune.TuneConfig(
            num_samples=1, max_concurrent_trials=CONCURRENCY, metric="val_loss", mode="min"
        ),
        run_config=tune.RunConfig(storage_path=str(storage), callbacks=[stamps], verbose=0),
    )
    results = tuner.fit()
    tuner_s = time.perf_counter() - tuner_start
    statuses = [
        "completed"
        if r.error is None and (r.metrics or {}).get("training_iteration") == EPOCHS
        else "failed"
        for r in results
    ]
    imports = [r.metrics["import_s"] for r in results if r.metrics and "import_s" in r.metrics]
    extra = {"mean_import_s": sum(imports) / len(imports) if imports else math.nan}
    return {"tuner_s": tuner_s, "statuses": statuses, "extra": extra, **_stamps_dict(stamps)}


class _Discard:
    """A text stream that drops what is written: run_sweep's progress lines.

    The Tuner pickles its callbacks, the progress printer's stream included, so this must
    be picklable (an open ``os.devnull`` file is not).
    """

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _run_versatil(lrs: list[float], storage: Path, start: float) -> dict[str, Any]:
    """Way A: :func:`run_sweep` on the same task, grid and concurrency."""
    from versatil.sweep import run_sweep, validate_sweep

    config = validate_sweep(
        {
            "name": "bench_versatil",
            "task": {"name": "reaching", "params": dict(TASK_PARAMS)},
            "space": {"lr": {"grid": lrs}},
            "search": {"algorithm": "grid"},
            "resources": {"cpu": 1},
            "max_concurrent_trials": CONCURRENCY,
            "trainer": {"max_epochs": EPOCHS, "accelerator": "cpu"},
            "storage_path": str(storage),
        }
    )
    stamps = _timing_callback(start)
    tuner_start = time.perf_counter()
    outcome = run_sweep(config, callbacks=[stamps], stream=_Discard())
    tuner_s = time.perf_counter() - tuner_start
    statuses = [str(row.metrics.get("status", row.status)) for row in outcome.rows]
    extra = {"run_sweep_wall_s": outcome.wall_s}
    return {"tuner_s": tuner_s, "statuses": statuses, "extra": extra, **_stamps_dict(stamps)}


def _stamps_dict(stamps: Any) -> dict[str, Any]:
    return {"stamps": stamps.stamps, "completed": stamps.completed}


def run_way(way: str, trials: int) -> dict[str, Any]:
    """Runs one way in this process, from ``ray.init`` to the end of the Tuner.

    Args:
        way: ``plain`` or ``versatil``.
        trials: How many trials (distinct ``lr`` values).

    Returns:
        ``wall_s`` (ray.init and the sweep), ``ray_init_s``, ``tuner_s`` (the sweep on the
        running Ray), trial statuses and the driver's time stamps of every result.
    """
    import ray

    lrs = lr_grid(trials)
    with tempfile.TemporaryDirectory(prefix=f"bench_{way}_") as storage:
        start = time.perf_counter()
        ray.init(include_dashboard=False, logging_level=logging.WARNING)
        ray_init_s = time.perf_counter() - start
        run = _run_plain if way == "plain" else _run_versatil
        result = run(lrs, Path(storage), start)
        result["wall_s"] = time.perf_counter() - start
        result["ray_init_s"] = ray_init_s
        ray.shutdown()
    return result


def model_terms(raw: dict[str, Any], trials: int, c: int = CONCURRENCY) -> dict[str, float]:
    """Measures t, o and w of the model ``wall ~ w + N(t+o)/c`` from one way's run.

    All times are on the driver's clock; like the model, it describes the sweep on a
    running Ray (``tuner_s``), and ``ray.init`` is reported apart:

    * A trial's fit begins when its first result arrives minus the ``fit_time_s`` in it,
      and ends when its last result arrives; ``t`` is the mean last ``fit_time_s``.
    * Trials take the ``c`` slots in order of fit begin: the first ``c`` open the slots,
      each later one takes the slot that freed first. ``o`` is the mean gap on a slot
      between one fit's end and the next fit's begin: worker start (and, for the plain
      script, the torch/Lightning imports), trial setup, reporting and checkpoints.
    * ``w`` is the one-time rest: the mean time until the first ``c`` fits begin, less the
      ordinary per-trial ``o`` that every trial pays anyway, plus the tail from the last
      fit's end to the end of the way, less ``ray.init`` (what is left: Tuner setup,
      worker warm-up, opening and closing the runs).

    Args:
        raw: What :func:`run_way` returned.
        trials: N.
        c: The concurrency.

    Returns:
        ``t``, ``o``, ``w``, ``sum_fit_s``, ``model_wall_s`` and the first fit's begin.
    """
    spans = []
    for stamps in raw["stamps"].values():
        first, last = stamps[0], stamps[-1]
        spans.append((first[0] - first[1], last[0], last[1]))
    spans.sort()
    fits = [fit for _, _, fit in spans]
    t = sum(fits) / len(fits) if fits else math.nan
    free_at = sorted(end for _, end, _ in spans[:c])
    gaps = []
    for begin, end, _ in spans[c:]:
        gaps.append(begin - free_at.pop(0))
        free_at = sorted([*free_at, end])
    o = sum(gaps) / len(gaps) if gaps else 0.0
    openers = [begin for begin, _, _ in spans[:c]]
    tail = raw["wall_s"] - max((end for _, end, _ in spans), default=raw["wall_s"])
    w = (sum(openers) / len(openers) if openers else 0.0) - o + tail - raw["ray_init_s"]
    return {
        "t": t,
        "o": o,
        "w": w,
        "first_fit_begin_s": openers[0] if openers else math.nan,
        "sum_fit_s": sum(fits),
        "model_wall_s": w + trials * (t + o) / c,
    }


def _child(way: str, trials: int, timeout_s: float) -> dict[str, Any]:
    """Runs one way in a fresh subprocess and returns its raw timings."""
    with tempfile.TemporaryDirectory(prefix="bench_result_") as tmp:
        result_file = Path(tmp) / f"{way}.json"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--only",
            way,
            "--trials",
            str(trials),
            "--epochs",
            str(EPOCHS),
            "--result-file",
            str(result_file),
        ]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        process_s = time.perf_counter() - started
        if done.returncode != 0 or not result_file.exists():
            tail = (done.stdout + done.stderr)[-4000:]
            raise RuntimeError(f"way {way!r} failed (exit {done.returncode}):\n{tail}")
        raw = json.loads(result_file.read_text())
    raw["process_s"] = process_s
    return raw


def _warm_page_cache() -> None:
    """Imports torch and Lightning once, so neither way pays a cold disk read."""
    subprocess.run(
        [sys.executable, "-c", "import torch, lightning, ray.tune"],
        check=True,
        capture_output=True,
    )


def compare(trials: int, timeout_s: float) -> dict[str, Any]:
    """Runs both ways in fresh subprocesses and derives the reported numbers.

    Args:
        trials: N, the trials of each way.
        timeout_s: Limit on each way's subprocess.

    Returns:
        The numbers printed, as a JSON-ready dict.
    """
    _warm_page_cache()
    report: dict[str, Any] = {
        "trials": trials,
        "concurrency": CONCURRENCY,
        "epochs": EPOCHS,
        "task_params": TASK_PARAMS,
        "cpu_count": os.cpu_count(),
        "ways": {},
    }
    for way in WAYS:
        raw = _child(way, trials, timeout_s)
        terms = model_terms(raw, trials)
        report["ways"][way] = {
            "wall_s": raw["wall_s"],
            "tuner_s": raw["tuner_s"],
            "ray_init_s": raw["ray_init_s"],
            "process_s": raw["process_s"],
            "sum_fit_s": terms["sum_fit_s"],
            "efficiency": terms["sum_fit_s"] / (CONCURRENCY * raw["tuner_s"]),
            "efficiency_with_ray_init": terms["sum_fit_s"] / (CONCURRENCY * raw["wall_s"]),
            "completed": sum(s == "completed" for s in raw["statuses"]),
            "statuses": raw["statuses"],
            "terms": terms,
            **raw["extra"],
        }
    plain, versatil = report["ways"]["plain"], report["ways"]["versatil"]
    report["speedup"] = plain["tuner_s"] / versatil["tuner_s"]
    report["speedup_with_ray_init"] = plain["wall_s"] / versatil["wall_s"]
    # The bound is the ratio of the two model walls, w + N(t+o)/c, each with its own measured
    # t, o and w. Each model wall reproduces its measured wall up to how evenly the trials
    # fill the slots, so "bound" checks the model against the measurement; with
    # o_versatil -> 0 it is the ceiling that no further per-trial saving can pass.
    tp, tv = plain["terms"], versatil["terms"]
    report["bound"] = tp["model_wall_s"] / tv["model_wall_s"]
    report["bound_o_versatil_0"] = tp["model_wall_s"] / (tv["w"] + trials * tv["t"] / CONCURRENCY)
    report["bound_efficiency_versatil"] = tv["sum_fit_s"] / (CONCURRENCY * tv["model_wall_s"])
    return report


def print_report(report: dict[str, Any]) -> None:
    """Prints the table, the bound and the notes."""
    cores = report["cpu_count"]
    print(
        f"trials={report['trials']} concurrency={report['concurrency']} "
        f"epochs={report['epochs']} ({cores}-core CPU)"
    )
    print(
        f"{'way':<24} {'sweep_s':>8} {'efficiency':>11} {'ray.init_s':>11} {'wall_s':>7} "
        f"{'efficiency':>11} {'sum_fit_s':>10} done"
    )
    for way in WAYS:
        r = report["ways"][way]
        print(
            f"{LABELS[way]:<24} {r['tuner_s']:8.1f} {r['efficiency']:11.2f} "
            f"{r['ray_init_s']:11.1f} {r['wall_s']:7.1f} {r['efficiency_with_ray_init']:11.2f} "
            f"{r['sum_fit_s']:10.1f} {r['completed']}/{report['trials']}"
        )
    print(
        f"speedup (plain / versatil): sweep {report['speedup']:.1f}x, "
        f"with ray.init {report['speedup_with_ray_init']:.1f}x"
    )
    tp, tv = report["ways"]["plain"]["terms"], report["ways"]["versatil"]["terms"]
    print(
        f"bound (model): w + N(t+o)/c with measured t, w, o -> {report['bound']:.1f}x "
        f"(o_versatil -> 0: {report['bound_o_versatil_0']:.1f}x; "
        f"versatil efficiency <= {report['bound_efficiency_versatil']:.2f})"
    )
    print(
        f"  plain:    t={tp['t']:.2f}s o={tp['o']:.2f}s w={tp['w']:.2f}s "
        f"model sweep={tp['model_wall_s']:.1f}s "
        f"(imports per trial {report['ways']['plain']['mean_import_s']:.1f}s)"
    )
    print(
        f"  versatil: t={tv['t']:.2f}s o={tv['o']:.2f}s w={tv['w']:.2f}s "
        f"model sweep={tv['model_wall_s']:.1f}s"
    )
    print(
        "notes: each way runs in a fresh driver process; sweep_s = the sweep on the running "
        "Ray (plain: Tuner.fit; versatil: run_sweep, MLflow included);\n"
        "       wall_s = ray.init + sweep_s. Efficiency = sum_fit_s / (concurrency x wall).\n"
        "       versatil checkpoints every epoch and logs to MLflow, the plain script does "
        "neither: versatil does strictly more work.\n"
        "       fit_time_s: versatil from settings and model build to the end of fit; "
        "plain around trainer.fit."
    )


def main(argv: list[str] | None = None) -> int:
    """Parses the arguments and runs the benchmark (or one way of it)."""
    global EPOCHS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16, help="Trials per way (default 16).")
    parser.add_argument(
        "--epochs", type=int, default=EPOCHS, help=f"Epochs per trial (default {EPOCHS})."
    )
    parser.add_argument("--json", type=Path, help="Also write the numbers to this JSON file.")
    parser.add_argument(
        "--only", choices=WAYS, help="Run one way in this process and print its raw timings."
    )
    parser.add_argument("--result-file", type=Path, help="With --only: write the JSON here.")
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="Seconds allowed per way (default 3600)."
    )
    args = parser.parse_args(argv)
    if args.trials < 1 or args.epochs < 1:
        parser.error("--trials and --epochs must be at least 1")
    EPOCHS = args.epochs
    if args.only:
        raw = run_way(args.only, args.trials)
        text = json.dumps(raw, indent=2)
        if args.result_file:
            args.result_file.write_text(text)
        else:
            print(text)
        return 0
    report = compare(args.trials, args.timeout)
    print_report(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
