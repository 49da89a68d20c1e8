"""Benchmark: compile once per graph per cluster, measured on a local multi-node Ray cluster.

A local cluster of a head (no CPUs) and ``--nodes`` worker nodes of 1 CPU each, every node
with its own empty inductor cache directory (``TORCHINDUCTOR_CACHE_DIR``), as separate
machines would have. One grid sweep of compiled trials runs on it twice, on fresh clusters
and fresh cache directories each time: with the compile cache (``trainer.compile_cache:
true``, the default) and without it. The grid is ``--graphs`` precisions (one graph each)
times ``--lrs`` learning rates (the same graph), so each graph is trained ``--lrs`` times.

For each run it reports every trial's ``compile_time_s`` (its first training step: the
compile of its graphs), the first trial of each graph against the later ones, whether the
trial loaded, published or compiled, and the sweep's wall time::

    python benchmarks/compile_cache.py                      # 2 graphs x 4 lrs on 2 nodes
    python benchmarks/compile_cache.py --graphs 32 --lrs 3

It writes JSON to ``--out`` (default ``benchmarks/results/compile_cache-<date>.json``).
Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

TASK = {"name": "reaching", "params": {"n_episodes": 64, "horizon": 40, "width": 64, "depth": 2}}


def sweep_dict(storage: Path, graphs: list[str], lrs: int, cache: bool) -> dict[str, Any]:
    """The grid sweep: ``graphs`` precisions x ``lrs`` learning rates, all compiled."""
    return {
        "name": "cache-on" if cache else "cache-off",
        "task": TASK,
        "space": {
            "precision": graphs,
            "compile_mode": ["default"],
            "lr": {"grid": [round(0.001 * (i + 1), 4) for i in range(lrs)]},
        },
        "search": {"algorithm": "grid"},
        "resources": {"cpu": 1},
        "max_concurrent_trials": 2,
        "trainer": {"max_epochs": 1, "accelerator": "cpu", "compile_cache": cache},
        "storage_path": str(storage),
    }


def run_once(graphs: list[str], lrs: int, nodes: int, cache: bool) -> dict[str, Any]:
    """One sweep on a fresh local cluster whose nodes have fresh, separate inductor caches."""
    import ray
    from ray.cluster_utils import Cluster

    from versatil.sweep.config import validate_sweep
    from versatil.sweep.runner import run_sweep

    work = Path(tempfile.mkdtemp(prefix="vcc-", dir="/tmp"))
    os.environ["RAY_TMPDIR"] = str(work)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for i in range(nodes):
        cluster.add_node(num_cpus=1, env_vars={"TORCHINDUCTOR_CACHE_DIR": str(work / f"ind{i}")})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, logging_level="WARNING")
    try:
        config = validate_sweep(sweep_dict(work / "runs", graphs, lrs, cache))
        outcome = run_sweep(config, stream=io.StringIO())
    finally:
        ray.shutdown()
        cluster.shutdown()
    trials = []
    for row in sorted(outcome.rows, key=lambda r: r.trial_id):
        m = row.metrics
        trials.append(
            {
                "trial_id": row.trial_id,
                "precision": row.axes["precision"],
                "lr": row.axes["lr"],
                "status": str(row.status),
                "node": str(m.get("node_id", ""))[:8],
                "compile_time_s": m.get("compile_time_s"),
                "cache_loaded": m.get("compile/cache_loaded"),
                "cache_published": m.get("compile/cache_published"),
                "cache_wait_s": m.get("compile/cache_wait_s"),
                "fxgraph_cache_hits": m.get("compile/fxgraph_cache_hits"),
                "fxgraph_cache_misses": m.get("compile/fxgraph_cache_misses"),
                "fit_time_s": m.get("fit_time_s"),
            }
        )
    first, later = [], []
    for precision in graphs:
        times = [t["compile_time_s"] for t in trials if t["precision"] == precision]
        times = [x for x in times if x is not None]
        if times:
            first.append(times[0])
            later += times[1:]
    return {
        "cache": cache,
        "wall_s": round(outcome.wall_s, 2),
        "trials": trials,
        "first_of_each_graph_compile_s": first,
        "later_trials_compile_s": later,
        "median_first_s": statistics.median(first) if first else None,
        "median_later_s": statistics.median(later) if later else None,
    }


def main() -> int:
    """Runs the sweep with the cache and without it, prints a table, writes the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="32,bf16-mixed", help="precisions, one graph each")
    parser.add_argument("--lrs", type=int, default=4, help="trials per graph")
    parser.add_argument("--nodes", type=int, default=2, help="worker nodes of 1 CPU")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    graphs = args.graphs.split(",")
    runs = [run_once(graphs, args.lrs, args.nodes, cache) for cache in (True, False)]
    stamp = time.strftime("%Y%m%d")
    out = args.out or Path(__file__).parent / "results" / f"compile_cache-{stamp}.json"
    report = {
        "benchmark": "compile_cache",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "versions": {p: metadata.version(p) for p in ("torch", "ray", "lightning")},
        "python": sys.version.split()[0],
        "graphs": graphs,
        "trials_per_graph": args.lrs,
        "nodes": args.nodes,
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{'cache':6} {'wall s':>7} {'first of graph s':>17} {'later trials s':>15}")
    for run in runs:
        print(
            f"{'on' if run['cache'] else 'off':6} {run['wall_s']:7.1f} "
            f"{run['median_first_s']:17.2f} {run['median_later_s']:15.2f}"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
