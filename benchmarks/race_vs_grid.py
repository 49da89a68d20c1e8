"""Benchmark: a race against the grid of the same sweep, side by side.

Each pair runs the same sweep file twice, as ``search.algorithm: grid`` and as
``search.algorithm: race``, each ``python -m versatil.sweep`` in a new process with fresh
storage (a new storage path, MLflow store and torch compile cache), one after the other;
the order alternates between pairs, so a drift of the machine weighs on both alike. Then
``python -m versatil.sweep report NAME --format json`` reads each answer back. It reports
how often the two recommend the same setting, each command's wall time and the ratio,
the device-seconds by phase (the JSON answer's ``compute``), and each run's summary lines.

::

    python benchmarks/race_vs_grid.py --sweep quickstart --pairs 5
    python benchmarks/race_vs_grid.py --sweep pointwise --pairs 5

``quickstart`` is the shipped zero-argument sweep (16 trials of under a second).
``pointwise`` is a user-style task on which compile pays off on a CPU
(``tests.user_tasks.pointwise``: blocks of small pointwise ops, tuple batches): 6 settings
(precision 32, bf16-mixed, 64 by compile mode none, default), 2 replicates, 12 trials.

It writes JSON to ``--out`` (default ``benchmarks/results/race_vs_grid-<sweep>-<date>.json``).
Run it on an otherwise idle machine, from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from reproducibility import read_answer  # beside this script: its sys.path entry

REPO = Path(__file__).resolve().parents[1]

LOGS: Path | None = None
"""Where each run's whole output is kept (``--logs``); ``None``: not kept."""

POINTWISE = {
    "name": "pointwise",
    "task": {
        "name": "tests.user_tasks.pointwise:build",
        "params": {"n_train": 16384, "batch_size": 64},
    },
    "objective": {"metric": "val_loss", "mode": "min"},
    "space": {"precision": ["32", "bf16-mixed", "64"], "compile_mode": ["none", "default"]},
    "replicates": 2,
    "resources": {"cpu": 1},
    "max_concurrent_trials": 1,
    "trainer": {"max_epochs": 16, "accelerator": "cpu"},
}


def _sweep_file(sweep: str, algorithm: str, workdir: Path) -> Path:
    """The sweep file of ``sweep`` with ``search.algorithm`` set."""
    if sweep == "quickstart":
        data = yaml.safe_load((REPO / "sweeps" / "quickstart.yaml").read_text())
    else:
        data = dict(POINTWISE)
    data["search"] = {**data.get("search", {}), "algorithm": algorithm}
    path = workdir / f"{sweep}-{algorithm}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _summary_lines(stdout: str) -> list[str]:
    """The run's answer as it printed it: the verdict's sentence, the race and compute lines."""
    keep = ("Recommended", "No setting", "race: ", "compute: ", "confirm: ")
    return [line for line in stdout.splitlines() if line.startswith(keep)]


def one_run(sweep: str, algorithm: str, workdir: Path) -> dict[str, Any]:
    """Runs the sweep once as ``algorithm`` in ``workdir`` with fresh storage; its answer."""
    workdir.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), MLFLOW_DISABLE_TELEMETRY="true")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor-cache")  # each run compiles cold
    storage = workdir / "runs"
    path = _sweep_file(sweep, algorithm, workdir)
    command = [sys.executable, "-m", "versatil.sweep", "--config", str(path)]
    command += ["--storage-path", str(storage)]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if LOGS is not None:  # each run's whole output, kept for reading
        (LOGS / f"{workdir.parent.name}-{algorithm}.txt").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        raise RuntimeError(f"the {algorithm} exited {run.returncode}: {run.stderr[-2000:]}")
    answer = read_answer(sweep, storage, workdir, env)
    verdict = answer["verdict"]
    tied = verdict["tied"]
    return {
        "answer": " = ".join(sorted(tied)) if tied else verdict["recommended"],
        "text": verdict["text"],
        "wall_s": round(wall, 1),
        "compute": answer.get("compute"),
        "race": answer.get("race"),
        "summary": _summary_lines(run.stdout),
    }


def one_pair(sweep: str, index: int, workdir: Path) -> dict[str, Any]:
    """A grid and a race of the sweep, one after the other (the order alternating)."""
    order = ("grid", "race") if index % 2 == 0 else ("race", "grid")
    runs = {algorithm: one_run(sweep, algorithm, workdir / algorithm) for algorithm in order}
    grid, race = runs["grid"], runs["race"]
    spent = [r["compute"]["device_s"]["total"] for r in (race, grid)]
    return {
        "order": list(order),
        "same_answer": grid["answer"] == race["answer"],
        "wall_ratio": round(race["wall_s"] / grid["wall_s"], 3),
        "device_s_ratio": round(spent[0] / spent[1], 3) if spent[1] else None,
        "grid": grid,
        "race": race,
    }


def _machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": metadata.version("torch"),
        "ray": metadata.version("ray"),
    }


def main() -> None:
    """Runs ``--pairs`` pairs and writes how often they agree, and their costs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", choices=("quickstart", "pointwise"), default="quickstart")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--logs", type=Path, default=None, help="keep each run's output here")
    args = parser.parse_args()
    global LOGS
    LOGS = args.logs
    if LOGS is not None:
        LOGS.mkdir(parents=True, exist_ok=True)
    pairs = []
    for index in range(args.pairs):
        with tempfile.TemporaryDirectory(prefix="versatil-race-") as directory:
            workdir = Path(directory) / f"{args.sweep}-pair{index + 1}"
            pair = one_pair(args.sweep, index, workdir)
        pairs.append(pair)
        print(
            f"pair {index + 1}: grid {pair['grid']['answer']!r} ({pair['grid']['wall_s']} s), "
            f"race {pair['race']['answer']!r} ({pair['race']['wall_s']} s), "
            f"wall {pair['wall_ratio']}x, device-s {pair['device_s_ratio']}x",
            flush=True,
        )
    agreeing = sum(p["same_answer"] for p in pairs)
    walls = [p["wall_ratio"] for p in pairs]
    spent = [p["device_s_ratio"] for p in pairs if p["device_s_ratio"] is not None]
    summary = {
        "benchmark": "race_vs_grid",
        "sweep": args.sweep,
        "command": f"python benchmarks/race_vs_grid.py --sweep {args.sweep} --pairs {args.pairs}",
        "pairs": args.pairs,
        "same_answer": agreeing,
        "wall_ratio": {"median": statistics.median(walls), "min": min(walls), "max": max(walls)},
        "device_s_ratio": {
            "median": statistics.median(spent) if spent else None,
            "min": min(spent, default=None),
            "max": max(spent, default=None),
        },
        "results": pairs,
        "machine": _machine(),
        "date": time.strftime("%Y-%m-%d"),
    }
    out = args.out or REPO / "benchmarks" / "results" / (
        f"race_vs_grid-{args.sweep}-{time.strftime('%Y%m%d')}.json"
    )
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(
        f"{agreeing} of {args.pairs} pairs recommend the same setting; race/grid wall "
        f"{summary['wall_ratio']['median']}x (median); written to {out}"
    )


if __name__ == "__main__":
    main()
