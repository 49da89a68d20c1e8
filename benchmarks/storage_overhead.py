"""Benchmark: what keeping the storage path in an S3 bucket costs a sweep, side by side.

The same sweep runs as a user types it, in a process of its own, with its storage path on
the local disk and in a bucket of moto's S3 server on loopback (a real HTTP S3 API, run by
its PID), both logging to one real ``mlflow server``. Each round runs both, in alternating
order (ABBA), so that drift hits both alike; the overhead is the median of the rounds'
paired ratios with its 95% interval (``versatil.stats.ratio_ci``)::

    python benchmarks/storage_overhead.py --rounds 4

Loopback has no network latency: this measures what the storage layer itself adds (Tune's
uploads, versatil's mirror and its files), not a remote store's round trips. It prints the
sweep's own wall time (the CLI's ``N trials in X s``) and the whole command's, and writes
them to ``--out`` (default ``benchmarks/results/storage_overhead-<date>.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server  # noqa: E402
from tests.s3_server import start_s3_server, stop_s3_server  # noqa: E402
from versatil.stats import median_ci, ratio_ci  # noqa: E402

BUCKET = "bench"
SWEEP = {
    "name": "storage-bench",
    "task": {"name": "reaching", "params": {"n_episodes": 640, "horizon": 40, "width": 64}},
    "space": {"lr": {"grid": [0.001, 0.003, 0.01, 0.03]}},
    "resources": {"cpu": 1},
    "max_concurrent_trials": 2,
    "trainer": {"max_epochs": 3, "accelerator": "cpu"},
    "confirm": {"enabled": "off"},
}
_WALL = re.compile(r"(\d+) trials in ([0-9.]+)s")


def run_once(sweep: Path, storage: str, uri: str, env: dict[str, str], cwd: Path) -> dict:
    """One sweep command; returns its walls (the sweep's and the command's)."""
    command = [sys.executable, "-m", "versatil.sweep", "--config", str(sweep)]
    command += ["--storage-path", storage, "--tracking-uri", uri]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    command_s = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{storage}: exit {done.returncode}\n{done.stderr[-3000:]}")
    found = _WALL.search(done.stdout)
    if found is None:
        raise SystemExit(f"{storage}: no 'N trials in X s' line:\n{done.stdout[-2000:]}")
    return {"sweep_s": float(found.group(2)), "command_s": command_s}


def main() -> None:
    """Runs the rounds and writes the JSON."""
    import yaml

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%d")
    out = args.out or ROOT / "benchmarks" / "results" / f"storage_overhead-{stamp}.json"
    with tempfile.TemporaryDirectory(prefix="storage-bench-") as scratch:
        work = Path(scratch)
        sweep = work / "sweep.yaml"
        sweep.write_text(yaml.safe_dump(SWEEP))
        (work / "mlflow").mkdir()
        s3 = start_s3_server(work / "moto.log")
        server = None
        try:
            s3.client().create_bucket(Bucket=BUCKET)
            server, uri = start_mlflow_server(work / "mlflow")
            env = {**os.environ, **s3.environment(), "XDG_CACHE_HOME": str(work / "cache")}
            env.pop("RAY_ADDRESS", None)
            places = {"local": str(work / "runs"), "s3": f"s3://{BUCKET}/sweeps"}
            rounds = []
            for number in range(args.rounds):
                order = ["local", "s3"] if number % 2 == 0 else ["s3", "local"]
                walls = {name: run_once(sweep, places[name], uri, env, work) for name in order}
                rounds.append({"order": order, **walls})
                print(f"round {number + 1}: " + ", ".join(
                    f"{name} sweep {walls[name]['sweep_s']:.1f} s "
                    f"(command {walls[name]['command_s']:.1f} s)" for name in order
                ), flush=True)  # fmt: skip
        finally:
            if server is not None:
                stop_mlflow_server(server)
            stop_s3_server(s3)
    summary = {}
    for wall in ("sweep_s", "command_s"):
        s3_walls = [r["s3"][wall] for r in rounds]
        local_walls = [r["local"][wall] for r in rounds]
        ratio = ratio_ci(s3_walls, local_walls)
        summary[wall] = {
            "local_median": median_ci(local_walls).value,
            "s3_median": median_ci(s3_walls).value,
            "ratio_s3_over_local": ratio.value,
            "ratio_ci95": [ratio.low, ratio.high],
            "ratio_coverage": ratio.coverage,
        }
        print(
            f"{wall}: local {summary[wall]['local_median']:.1f} s, s3 "
            f"{summary[wall]['s3_median']:.1f} s, s3/local {ratio.value:.3f}x "
            f"(95% CI {ratio.low:.3f}-{ratio.high:.3f}, coverage {ratio.coverage:.2f})"
        )
    result = {
        "benchmark": "storage_overhead",
        "command": f"python benchmarks/storage_overhead.py --rounds {args.rounds}",
        "sweep": SWEEP,
        "rounds": rounds,
        "summary": summary,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "versions": {p: metadata.version(p) for p in ("ray", "pyarrow", "moto", "mlflow")},
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
