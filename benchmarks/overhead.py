"""Benchmark: versatil's per-trial bookkeeping overhead, in the style of Ray Tune's release tests.

Ray Tune's release test ``bookkeeping_overhead`` runs many short trials and reports how
much the sweep's wall exceeds the trials' own work, per trial (about 0.14 s on 16 CPUs).
This script does the same for :func:`versatil.sweep.engine.runner.run_sweep`, MLflow tracking on
(the embedded SQLite store under a temporary storage path), with trials that each run one
real Lightning fit of the built-in reaching task, of about 1 s (``--trial-length 1s``: 2
epochs of 160 batches) or almost nothing (``tiny``: 1 epoch of one or two batches, ~0.05 s, where
the bookkeeping is nearly all there is)::

    overhead per trial = (wall - sum(fit_time_s) / concurrency) / N
    ... excluding warm-up = (wall - warm-up - sum(fit_time_s) / concurrency) / N
    ... steady state      = (last result - warm-up - sum(fit_time_s) / concurrency) / N

where ``wall`` is :func:`run_sweep` as a whole on an already-running local Ray, each trial's
``fit_time_s`` comes from its last result, and the warm-up is the time from ``run_sweep``'s
start to the start of the first fit (Tune starting the workers, their torch/Lightning
imports, MLflow opening): the driver's clock at the first result less that result's own
``fit_time_s``. The fit time is counted once, in the sum: a warm-up that ran to the first
result would count the first fits twice, which weighs more per trial in a small sweep.
The tail runs from the last result to ``run_sweep``'s return (ending the runs, the summary,
Tune's result grid): a cost per sweep, which the steady state leaves out as well.

Three parts:

1. Bookkeeping overhead at ``--trials`` (default 200), a grid over ``data_seed``, FIFO,
   2 trials at a time, 1 CPU each.
2. Scaling: the same at each N of ``--scaling`` (default 8,16,32,64), each a separate
   ``run_sweep`` on the same running Ray; the overhead per trial should be flat in N.
3. ``python -m versatil.sweep`` in a fresh subprocess: from process start to its first
   progress line, broken down into what is measured separately (interpreter start, the
   CLI's imports, ``ray.init``, the first result's ``fit_time_s``) and the rest (derived).

Run it on an otherwise idle machine::

    python benchmarks/overhead.py                     # 200 trials, scaling 8..64, the CLI
    python benchmarks/overhead.py --trial-length tiny --scaling '' --skip-cli

It writes JSON to ``--out`` (default ``benchmarks/results/overhead-<date>.json``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

TRIAL_LENGTHS: dict[str, tuple[dict[str, Any], int]] = {
    "1s": ({"n_episodes": 128, "horizon": 50, "width": 64, "batch_size": 32}, 2),
    "tiny": ({"n_episodes": 8, "horizon": 10, "width": 8, "batch_size": 64}, 1),
}
"""Task params and epochs of a trial: about 1 s of training, or a fit that is mostly
Lightning's fixed cost."""
CONCURRENCY = 2
RAY_RELEASE_S = 0.14
"""Ray Tune's release test ``bookkeeping_overhead``: seconds per trial on 16 CPUs."""
TARGET_S = 0.05
PROGRESS_LINE = re.compile(r"^\[\s*([0-9.]+)s\] (\S+) epoch 1 ")


def sweep_dict(name: str, trials: int, storage: Path, length: str) -> dict[str, Any]:
    """The sweep of ``trials`` trials of ``length`` (a grid over ``data_seed``) in ``storage``."""
    params, epochs = TRIAL_LENGTHS[length]
    return {
        "name": name,
        "task": {"name": "reaching", "params": dict(params)},
        "space": {"data_seed": {"grid": list(range(trials))}},
        "search": {"algorithm": "grid"},
        "scheduler": {"type": "fifo"},
        "resources": {"cpu": 1},
        "max_concurrent_trials": CONCURRENCY,
        "trainer": {"max_epochs": epochs, "accelerator": "cpu"},
        "storage_path": str(storage),
    }


class _Discard:
    """A picklable text stream that drops run_sweep's progress lines."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _first_result_callback(start: float) -> Any:
    """A Tune callback: the driver's clock (since ``start``) at the first and last results."""
    from ray import tune

    class _First(tune.Callback):
        def __init__(self) -> None:
            self.first_s = math.nan
            self.first_fit_s = math.nan
            self.last_s = math.nan
            self.results = 0

        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            self.last_s = time.perf_counter() - start
            if self.results == 0:
                self.first_s = self.last_s
                self.first_fit_s = float(result.get("fit_time_s", math.nan))
            self.results += 1

    return _First()


def measure_sweep(trials: int, length: str) -> dict[str, Any]:
    """Times one ``run_sweep`` of ``trials`` trials of ``length`` on the running Ray.

    Returns:
        Wall, warm-up, Σ fit time, the overheads per trial and the trial statuses.
    """
    from versatil.sweep import run_sweep, validate_sweep

    with tempfile.TemporaryDirectory(prefix=f"bench_overhead_{trials}_") as storage:
        config = validate_sweep(sweep_dict(f"overhead_{trials}", trials, Path(storage), length))
        start = time.perf_counter()
        first = _first_result_callback(start)
        outcome = run_sweep(config, callbacks=[first], stream=_Discard())
        wall = time.perf_counter() - start
    fits = [float(row.metrics.get("fit_time_s", math.nan)) for row in outcome.rows]
    statuses: dict[str, int] = {}
    for row in outcome.rows:
        status = str(row.metrics.get("status", row.status))
        statuses[status] = statuses.get(status, 0) + 1
    sum_fit = math.fsum(f for f in fits if math.isfinite(f))
    warmup = first.first_s - first.first_fit_s  # to the first fit's start
    return {
        "trials": trials,
        "wall_s": wall,
        "run_sweep_wall_s": outcome.wall_s,
        "first_result_s": first.first_s,
        "last_result_s": first.last_s,
        "warmup_s": warmup,
        "tail_s": wall - first.last_s,
        "first_fit_time_s": first.first_fit_s,
        "sum_fit_s": sum_fit,
        "mean_fit_s": sum_fit / len(fits) if fits else math.nan,
        "results": first.results,
        "statuses": statuses,
        "overhead_per_trial_s": (wall - sum_fit / CONCURRENCY) / trials,
        "overhead_per_trial_excl_warmup_s": (wall - warmup - sum_fit / CONCURRENCY) / trials,
        "overhead_per_trial_steady_s": (first.last_s - warmup - sum_fit / CONCURRENCY) / trials,
    }


DRIVER_STEPS = """
import json, sys, time
t = time.perf_counter()
import versatil.sweep.cli.main
steps = {"cli_imports": time.perf_counter() - t}
t = time.perf_counter()
from versatil.sweep import load_sweep
config = load_sweep(sys.argv[1])
steps["load_sweep"] = time.perf_counter() - t
t = time.perf_counter()
from versatil.sweep import run_sweep
from versatil.sweep.engine.runner import connect_ray
steps["import_runner"] = time.perf_counter() - t
t = time.perf_counter()
from ray import tune
steps["import_ray_tune"] = time.perf_counter() - t
t = time.perf_counter()
from versatil.sweep.config.checks import check_task
check_task(config)
steps["check_task"] = time.perf_counter() - t
t = time.perf_counter()
connect_ray(None)
steps["ray_init"] = time.perf_counter() - t
import ray
ray.shutdown()
print(json.dumps(steps))
"""
"""The CLI driver's steps before run_sweep's progress clock starts, each timed, in order."""


def measure_cli(timeout_s: float, length: str) -> dict[str, Any]:
    """Times ``python -m versatil.sweep`` (2 trials, fresh driver) to its first result.

    Measured in the CLI's run: ``to_first_line_s`` (this process's clock from spawning it to
    reading its first ``epoch 1`` line), the line's own stamp (the progress printer's clock,
    which starts inside run_sweep after ``ray.init``, to that result), and the first
    result's ``fit_time_s`` (its result.json). Measured apart, each in a fresh process:
    ``python -c pass``, and the driver's steps before the progress clock
    (:data:`DRIVER_STEPS`: the CLI's imports, loading the sweep file, importing the runner
    and Ray Tune, checking the task, ``ray.init``). Derived by subtraction: what is left
    before the progress clock, and Tune + workers (start, torch/Lightning imports, trial
    setup) before the first fit.
    """
    with tempfile.TemporaryDirectory(prefix="bench_overhead_cli_") as tmp:
        storage = Path(tmp) / "runs"
        sweep_file = Path(tmp) / "cli_overhead.yaml"
        cli_sweep = sweep_dict("cli_overhead", 2, storage, length)
        sweep_file.write_text(json.dumps(cli_sweep))  # YAML ⊃ JSON
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-m", "versatil.sweep", "--config", str(sweep_file)]
        start = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        to_first_line = math.nan
        progress_clock = math.nan
        first_trial = None
        lines = []
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = PROGRESS_LINE.match(line)
            if match and first_trial is None:
                to_first_line = time.perf_counter() - start
                progress_clock = float(match.group(1))
                first_trial = match.group(2)
        returncode = process.wait(timeout=timeout_s)
        process_s = time.perf_counter() - start
        if returncode != 0 or first_trial is None:
            raise RuntimeError(f"CLI failed (exit {returncode}):\n{''.join(lines)[-4000:]}")
        result_files = list(storage.glob(f"cli_overhead-*/{first_trial}/result.json"))
        first_fit = math.nan
        if result_files:
            first_fit = float(json.loads(result_files[0].read_text().splitlines()[0])["fit_time_s"])
        python_pass = _wall_of([sys.executable, "-c", "pass"])
        done = subprocess.run(
            [sys.executable, "-c", DRIVER_STEPS, str(sweep_file)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        steps = json.loads(done.stdout.strip().splitlines()[-1])
    before_clock = to_first_line - progress_clock
    return {
        "command": "python -m versatil.sweep --config <2-trial sweep file> (fresh driver)",
        "measured": {
            "to_first_line_s": to_first_line,
            "progress_clock_at_first_line_s": progress_clock,
            "first_result_fit_time_s": first_fit,
            "process_total_s": process_s,
        },
        "measured_apart": {
            "python_c_pass_s": python_pass,
            **{f"{name}_s": seconds for name, seconds in steps.items()},
        },
        "derived": {
            "before_progress_clock_s": before_clock,
            "before_progress_clock_unaccounted_s": before_clock
            - python_pass
            - math.fsum(steps.values()),
            "tune_workers_before_first_fit_s": progress_clock - first_fit,
        },
    }


def _wall_of(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def machine() -> dict[str, Any]:
    versions = {}
    for package in ("torch", "lightning", "ray", "mlflow"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **versions,
    }


def table(report: dict[str, Any]) -> str:
    rows = [
        "| N | wall | warm-up | tail | Σfit/c | overhead/trial | excl. warm-up | steady state |",
        "|---|---|---|---|---|---|---|---|",
    ]
    runs = [*report["scaling"], *([report["main"]] if report.get("main") else [])]
    for run in runs:
        rows.append(
            f"| {run['trials']} | {run['wall_s']:.1f} s | {run['warmup_s']:.1f} s | "
            f"{run['tail_s']:.2f} s | {run['sum_fit_s'] / CONCURRENCY:.1f} s | "
            f"{run['overhead_per_trial_s']:.3f} s | "
            f"{run['overhead_per_trial_excl_warmup_s']:.3f} s | "
            f"{run['overhead_per_trial_steady_s']:.3f} s |"
        )
    cli = report.get("cli")
    if cli:
        m, a, d = cli["measured"], cli["measured_apart"], cli["derived"]
        steps = ", ".join(
            f"{name.removesuffix('_s')} {seconds:.2f} s"
            for name, seconds in a.items()
            if name != "python_c_pass_s"
        )
        rows += [
            "",
            f"CLI, process start to first result: {m['to_first_line_s']:.1f} s (measured)",
            f"  before the progress clock: {d['before_progress_clock_s']:.1f} s (derived) = "
            f"python start {a['python_c_pass_s']:.2f} s + {steps} (measured apart) "
            f"+ {d['before_progress_clock_unaccounted_s']:.2f} s unaccounted",
            f"  progress clock to first result: {m['progress_clock_at_first_line_s']:.1f} s "
            f"(measured) = Tune + workers {d['tune_workers_before_first_fit_s']:.1f} s "
            f"(derived) + first fit {m['first_result_fit_time_s']:.2f} s (measured)",
        ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="N of the main run (0: skip)")
    parser.add_argument("--trial-length", choices=sorted(TRIAL_LENGTHS), default="1s")
    parser.add_argument("--scaling", default="8,16,32,64", help="comma-separated N ('' skips)")
    parser.add_argument("--out", type=Path, default=None, help="the JSON report")
    parser.add_argument("--skip-cli", action="store_true", help="skip the CLI's first result")
    parser.add_argument("--cli-timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    scaling = [int(n) for n in args.scaling.split(",") if n.strip()]
    suffix = "" if args.trial_length == "1s" else f"-{args.trial_length}"
    out = args.out or Path(__file__).parent / "results" / (
        f"overhead{suffix}-{time.strftime('%Y%m%d')}.json"
    )
    params, epochs = TRIAL_LENGTHS[args.trial_length]
    started = time.perf_counter()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "parameters": {
            "trials": args.trials,
            "scaling": scaling,
            "concurrency": CONCURRENCY,
            "trial_length": args.trial_length,
            "epochs": epochs,
            "task_params": params,
            "axis": "data_seed grid",
            "search": "grid",
            "scheduler": "fifo",
            "resources_cpu": 1,
            "tracking": "MLflow, embedded SQLite store under a temp storage path",
            "ray_release_reference_s": RAY_RELEASE_S,
            "target_s": TARGET_S,
        },
        "scaling": [],
        "main": None,
        "cli": None,
    }
    # The CLI first: its fresh driver starts its own local Ray, before this one starts.
    if not args.skip_cli:
        print("CLI: time to first result ...", flush=True)
        report["cli"] = measure_cli(args.cli_timeout, args.trial_length)
    import ray

    t = time.perf_counter()
    ray.init(include_dashboard=False, logging_level=logging.WARNING)
    report["ray_init_s"] = time.perf_counter() - t
    try:
        for n in scaling:
            print(f"scaling: {n} trials ...", flush=True)
            report["scaling"].append(measure_sweep(n, args.trial_length))
        if args.trials > 0:
            print(f"main: {args.trials} trials ...", flush=True)
            report["main"] = measure_sweep(args.trials, args.trial_length)
    finally:
        ray.shutdown()
    report["benchmark_wall_s"] = time.perf_counter() - started
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(table(report))
    print(f"\nbenchmark wall {report['benchmark_wall_s']:.0f} s; JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
