"""Benchmark: a sweep command's fixed costs, before the sweep starts and after its summary.

Each run is ``python -m versatil.sweep --config <a 12-trial user task>`` in a new process
and a new working directory (a new storage path and MLflow store). Every line the command
prints is timestamped as it arrives, which splits the command's wall time into:

- ``start_s``: from the command's start to the sweep's start (the moment the progress
  printer's clock starts, just before Tune's fit: the first progress line's arrival minus
  the time it prints);
- ``sweep_s``: the sweep itself, as its summary says ("N trials in X s");
- ``exit_s``: from the last line of the summary to the process's exit.

::

    python benchmarks/fixed_costs.py --runs 3
    python benchmarks/fixed_costs.py --runs 3 --tree "previous=/tmp/versatil-previous"

``--tree LABEL=PATH`` adds a variant: the versatil of another source tree (a ``git
worktree`` of an earlier commit, say), run alternately with this one so that both share
the machine's conditions.

It writes JSON to ``--out`` (default ``benchmarks/results/fixed_costs-<date>.json``). Run it
on an otherwise idle machine, from the repository root (the task is
``tests.user_tasks.dict_batches``, a regression with dict batches).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROGRESS = re.compile(r"^\[\s*([0-9.]+)s\] ")
SUMMARY = re.compile(r"^(\d+) trials in ([0-9.]+)s")

SWEEP = """\
name: fixed-costs
task: {name: "tests.user_tasks.dict_batches:build", params: {hidden: 32, n_samples: 512}}
objective: {metric: val_loss, mode: min}
space:
  precision: [32, bf16-mixed, bf16-true]
  compile_mode: [none]
  lr: {grid: [0.001, 0.003, 0.01, 0.03]}
trainer: {max_epochs: 3, accelerator: cpu}
resources: {cpu: 1}
"""


def one_run(workdir: Path, tree: Path = REPO) -> dict[str, Any]:
    """Runs the sweep once in ``workdir`` with the versatil of ``tree``; its phases' times."""
    sweep = workdir / "fixed_costs.yaml"
    sweep.write_text(SWEEP)
    # The task module comes from this repository's tests; versatil from ``tree``.
    path = os.pathsep.join(dict.fromkeys([str(tree), str(REPO)]))
    env = dict(os.environ, PYTHONPATH=path, MLFLOW_DISABLE_TELEMETRY="true")
    command = [sys.executable, "-m", "versatil.sweep", "--config", str(sweep)]
    command += ["--storage-path", str(workdir / "runs")]
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    lines: list[tuple[float, str]] = []
    assert process.stdout is not None
    for line in process.stdout:
        lines.append((time.perf_counter() - start, line.rstrip("\n")))
    code = process.wait(timeout=600)
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"the sweep exited {code}: {lines[-5:]}")
    first = next((t, m) for t, line in lines if (m := PROGRESS.match(line)))
    summary = next(m for _, line in lines if (m := SUMMARY.match(line)))
    return {
        "wall_s": wall,
        "start_s": first[0] - float(first[1].group(1)),
        "sweep_s": float(summary.group(2)),
        "exit_s": wall - lines[-1][0],
        "trials": int(summary.group(1)),
    }


def main() -> None:
    """Runs the benchmark and writes its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--tree", action="append", default=[], metavar="LABEL=PATH", help="another variant"
    )
    args = parser.parse_args()
    variants = [("this", REPO)]
    for text in args.tree:
        label, _, tree = text.partition("=")
        variants.append((label, Path(tree).resolve()))
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in variants}
    for index in range(args.runs):
        for label, tree in variants:  # alternately: A B A B ...
            with tempfile.TemporaryDirectory(prefix="versatil-fixed-costs-") as workdir:
                runs[label].append(one_run(Path(workdir), tree))
            times = ", ".join(f"{k} {v:.2f}" for k, v in runs[label][-1].items())
            print(f"{label} run {index + 1}: {times}")
    medians = {
        label: {k: statistics.median(r[k] for r in mine) for k in mine[0]}
        for label, mine in runs.items()
    }
    for label, median in medians.items():
        print(f"{label} median: " + ", ".join(f"{k} {v:.2f}" for k, v in median.items()))
    stamp = time.strftime("%Y%m%d")
    out = args.out or Path(__file__).parent / "results" / f"fixed_costs-{stamp}.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "fixed_costs",
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                "versions": {p: metadata.version(p) for p in ("torch", "ray", "mlflow")},
                "sweep": SWEEP,
                "variants": {label: str(tree) for label, tree in variants},
                "runs": runs,
                "median": medians,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
