"""Benchmark: what shipping a task's code to a cluster costs a sweep.

A sweep that joins a cluster hands Ray the task's directory as ``working_dir`` (see
``versatil.sweep.engine.shipping``): the driver zips and uploads it in ``ray.init``, and a
node's runtime-env agent downloads and unpacks it before the first worker that needs it
starts. Each run is a new driver process that joins a running local cluster and runs one
task importing the user's module, timed from before ``ray.init`` to the task's answer:

- ``shipped``: with the runtime_env ``plan_shipment`` builds for the task's directory;
- ``plain``: without (the node sees the directory anyway: one machine).

The two alternate (A B A B ...), so they share the machine's conditions; the difference of
each pair is the cost of shipping, reported as the median with its range. The task's
directory is the one the cluster tests use (``tests/user_project.py``: a task module, a
helper module, a sweep file and an 11 MiB data file left out). Also reported: the files and
bytes shipped, and the zipped package's bytes.

::

    python benchmarks/code_shipping.py --runs 5

It writes JSON to ``--out`` (default ``benchmarks/results/code_shipping-<date>.json``). Run
it on an otherwise idle machine, from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.ray_head import start_ray_head, stop_ray_head  # noqa: E402
from tests.user_project import write_project  # noqa: E402

DRIVER = """
import json, sys, time
start = time.perf_counter()
import ray
from versatil.sweep.config.load import load_sweep
from versatil.sweep.engine.shipping import plan_shipment
shipment = plan_shipment(load_sweep("sweep.yaml"), joining=True)
env = shipment.runtime_env if sys.argv[2] == "shipped" else None
ray.init(address=sys.argv[1], runtime_env=env, logging_level="ERROR")
@ray.remote(num_cpus=1)
def imports_the_task():
    import my_helpers
    return my_helpers.__file__
where = ray.get(imports_the_task.remote())
print(json.dumps({"s": time.perf_counter() - start, "where": where,
                  "files": shipment.files, "bytes": shipment.size}))
"""


def one_run(project: Path, address: str, variant: str, env: dict[str, str]) -> dict[str, Any]:
    """One driver process: joins, runs the task; its wall time and where the module was.

    A new file in the project each run gives its package a new hash: Ray uploads and
    unpacks it anew instead of reusing the package of an earlier run.
    """
    (project / "run_id.txt").write_text(secrets.token_hex(16))
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, address, variant],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def zipped_bytes(project: Path) -> int:
    """The package Ray uploads, zipped as Ray zips it."""
    from ray._private.runtime_env.packaging import _zip_files

    from versatil.sweep.config.load import load_sweep
    from versatil.sweep.engine.shipping import plan_shipment

    cwd = Path.cwd()
    os.chdir(project)
    sys.path.insert(0, str(project))
    try:
        env = plan_shipment(load_sweep("sweep.yaml"), joining=True).runtime_env
        with tempfile.TemporaryDirectory() as scratch:
            target = Path(scratch) / "package.zip"
            _zip_files(str(project), env["excludes"], str(target), include_gitignore=True)
            return target.stat().st_size
    finally:
        os.chdir(cwd)


def main() -> int:
    """Runs the benchmark and writes its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="pairs of runs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="shipping-"))
    project = work / "project"
    write_project(project, str(work / "runs"), name="shipping")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTHONPATH"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    env.update(RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(REPO))
    head = start_ray_head(num_cpus=2, env=env, host="127.0.0.2")
    runs: dict[str, list[dict[str, Any]]] = {"shipped": [], "plain": []}
    try:
        one_run(project, head.address, "plain", env)  # warm: the first worker's imports
        for _ in range(args.runs):
            for variant in ("shipped", "plain"):
                runs[variant].append(one_run(project, head.address, variant, env))
    finally:
        stop_ray_head(head)
    costs = [a["s"] - b["s"] for a, b in zip(runs["shipped"], runs["plain"], strict=True)]
    first = runs["shipped"][0]
    result = {
        "command": f"python benchmarks/code_shipping.py --runs {args.runs}",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": {p: metadata.version(p) for p in ("ray", "torch", "lightning")},
        "shipped": {"files": first["files"], "bytes": first["bytes"]},
        "zipped_bytes": zipped_bytes(project),
        "shipped_imported_from_package": all("_ray_pkg_" in r["where"] for r in runs["shipped"]),
        "wall_s": {v: [round(r["s"], 3) for r in rs] for v, rs in runs.items()},
        "cost_s": {
            "median": round(statistics.median(costs), 3),
            "min": round(min(costs), 3),
            "max": round(max(costs), 3),
        },
    }
    out = (
        args.out
        or REPO / "benchmarks" / "results" / f"code_shipping-{time.strftime('%Y%m%d')}.json"
    )
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
