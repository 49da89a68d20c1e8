"""Benchmark: does the same sweep give the same answer when it runs again?

Each run is ``python -m versatil.sweep`` in a new process with fresh storage (a new
storage path and MLflow store), then ``python -m versatil.sweep report NAME --format json``
reads its answer back. The answer is the recommended setting, or the settings tied with
it; the benchmark reports how often the runs agree with the most frequent answer, and
each run's sentence and speedups.

::

    python benchmarks/reproducibility.py --sweep quickstart --runs 5
    python benchmarks/reproducibility.py --sweep conv --runs 5
    python benchmarks/reproducibility.py --sweep pointwise --runs 5
    python benchmarks/reproducibility.py --sweep two-sweeps --runs 3

``quickstart`` is the shipped zero-argument sweep. ``conv`` is a user-style task
(``tests.user_tasks.conv_classifier``: a residual conv net with BatchNorm, ``val_acc``),
float32 against float64 and bf16-mixed, whose fp64 runs at about half the speed on CPU.
``pointwise`` is a user-style task on which compile pays off on a CPU
(``tests.user_tasks.pointwise``: blocks of small pointwise ops, which ``torch.compile``
fuses): each run's answer, and the compiled setting's speedup, compile time and break-even.
``two-sweeps`` runs two sweep files of one task whose epochs are too short to time from
the trials (``tests.user_tasks.dict_batches``), sharing two settings; each run reports
both sweeps' speed calls on the shared settings and whether they agree. Each run compiles
cold, with a torch compile cache of its own.

It writes JSON to ``--out`` (default
``benchmarks/results/reproducibility-<sweep>-<date>.json``). Run it on an otherwise idle
machine, from the repository root.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

CONV = """\
name: conv
task:
  name: "tests.user_tasks.conv_classifier:build"
  params: {n_train: 2048, n_val: 512, image_size: 16, channels: 16, blocks: 1, batch_size: 128}
objective: {metric: val_acc, mode: max}
space:
  precision: [32, 64, bf16-mixed]
  lr: {grid: [0.001, 0.003]}
search: {algorithm: grid}
resources: {cpu: 1}
max_concurrent_trials: 2
trainer: {max_epochs: 3, accelerator: cpu}
"""

POINTWISE = """\
name: pointwise
task:
  name: "tests.user_tasks.pointwise:build"
  params: {n_train: 16384, batch_size: 64}
objective: {metric: val_loss, mode: min}
space:
  compile_mode: [none, default]
search: {algorithm: grid}
resources: {cpu: 1}
max_concurrent_trials: 1
trainer: {max_epochs: 3, accelerator: cpu}
"""

SHORT_A = """\
name: short-a
task: {name: "tests.user_tasks.dict_batches:build", params: {n_samples: 512}}
objective: {metric: val_loss, mode: min, tolerance: 0.5}
space:
  precision: [32, bf16-true, 64]
search: {algorithm: grid}
resources: {cpu: 1}
max_concurrent_trials: 1
trainer: {max_epochs: 2, accelerator: cpu}
"""

SHORT_B = """\
name: short-b
task: {name: "tests.user_tasks.dict_batches:build", params: {n_samples: 512}}
objective: {metric: val_loss, mode: min, tolerance: 0.5}
space:
  precision: [32, bf16-true]
  compile_mode: [none, default]
search: {algorithm: grid}
resources: {cpu: 1}
max_concurrent_trials: 1
trainer: {max_epochs: 2, accelerator: cpu}
"""

COMPILE_KEYS = (
    "compile_s",
    "compile_graphs",
    "compile_graph_breaks",
    "compile_recompiles",
    "break_even_s",
)
"""A compiled setting's cost in the answer (``report --format json``)."""

SWEEPS = {"quickstart": None, "conv": CONV, "pointwise": POINTWISE, "short-a": SHORT_A}
SWEEPS["short-b"] = SHORT_B
CHOICES = ("quickstart", "conv", "pointwise", "two-sweeps")
SHARED = ("32 + eager", "bf16-true + eager")
"""The settings both of ``two-sweeps``' sweep files hold."""


def read_answer(sweep: str, storage: Path, workdir: Path, env: dict[str, str]) -> dict[str, Any]:
    """The sweep's JSON answer, read back by ``report --format json`` in a new process."""
    command = [sys.executable, "-m", "versatil.sweep", "report", sweep]
    command += ["--storage-path", str(storage), "--format", "json"]
    report = subprocess.run(
        [*command, "--output", str(workdir / "report")],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(report.stdout)


def one_run(sweep: str, workdir: Path) -> dict[str, Any]:
    """Runs the sweep once in ``workdir`` with fresh storage; returns its answer."""
    env = dict(os.environ, PYTHONPATH=str(REPO), MLFLOW_DISABLE_TELEMETRY="true")
    # Each run compiles cold: torch's own cache of compiled graphs is per run, not shared.
    env["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor-cache")
    storage = workdir / "runs"
    command = [sys.executable, "-m", "versatil.sweep", "--storage-path", str(storage)]
    if SWEEPS[sweep] is not None:
        path = workdir / f"{sweep}.yaml"
        path.write_text(SWEEPS[sweep])
        command += ["--config", str(path)]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if run.returncode != 0:
        raise RuntimeError(f"the sweep exited {run.returncode}: {run.stderr[-2000:]}")
    answer = read_answer(sweep, storage, workdir, env)
    verdict = answer["verdict"]
    tied = verdict["tied"]
    return {
        "answer": " = ".join(sorted(tied)) if tied else verdict["recommended"],
        "recommended": verdict["recommended"],
        "tied": verdict["tied"],
        "text": verdict["text"],
        "confirmed": "confirm: re-timing" in run.stdout,
        "settings": {
            s["label"]: {
                "speed": s["speed"],
                "speedup": s["speedup"],
                "speedup_ci": [s["speedup_ci_low"], s["speedup_ci_high"]],
                "rounds": s["rounds"],
                "no_worse": s["no_worse"],
                **{k: s.get(k) for k in COMPILE_KEYS},
            }
            for s in answer["settings"]
        },
        "wall_s": round(wall, 1),
    }


def two_sweeps(workdir: Path) -> dict[str, Any]:
    """Runs both sweep files of one task; their speed calls on the shared settings."""
    first = one_run("short-a", workdir / "a")
    second = one_run("short-b", workdir / "b")
    calls = {
        label: [first["settings"][label]["speed"], second["settings"][label]["speed"]]
        for label in SHARED
    }
    agree = all(a == b for a, b in calls.values())
    answer = "same calls" if agree else "different calls"
    wall = round(first["wall_s"] + second["wall_s"], 1)
    return {"answer": answer, "calls": calls, "runs": [first, second], "wall_s": wall}


def main() -> None:
    """Runs the sweep ``--runs`` times and writes how often the answers agree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", choices=CHOICES, default="quickstart")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    runs = []
    for index in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="versatil-repro-") as directory:
            workdir = Path(directory)
            if args.sweep == "two-sweeps":
                (workdir / "a").mkdir()
                (workdir / "b").mkdir()
                result = two_sweeps(workdir)
            else:
                result = one_run(args.sweep, workdir)
        runs.append(result)
        print(f"run {index + 1}: {result['answer']} ({result['wall_s']} s)", flush=True)
    counts = collections.Counter(r["answer"] for r in runs)
    answer, agreeing = counts.most_common(1)[0]
    summary = {
        "benchmark": "reproducibility",
        "sweep": args.sweep,
        "command": f"python benchmarks/reproducibility.py --sweep {args.sweep} --runs {args.runs}",
        "runs": args.runs,
        "answer": answer,
        "agreeing": agreeing,
        "agreement": agreeing / args.runs,
        "answers": dict(counts),
        "results": runs,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": metadata.version("torch"),
            "ray": metadata.version("ray"),
        },
        "date": time.strftime("%Y-%m-%d"),
    }
    out = args.out or REPO / "benchmarks" / "results" / (
        f"reproducibility-{args.sweep}-{time.strftime('%Y%m%d')}.json"
    )
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{agreeing} of {args.runs} runs answered {answer!r}; written to {out}")


if __name__ == "__main__":
    main()
