"""Benchmark: compile once per graph per cluster, measured on a local multi-node Ray cluster.

A local cluster of a head (no CPUs) and ``--nodes`` worker nodes of 1 CPU each, every node
with its own empty inductor cache directory (``TORCHINDUCTOR_CACHE_DIR``), as separate
machines would have. One grid sweep of compiled trials runs on it twice, on fresh clusters
and fresh cache directories each time: with the compile cache (``trainer.compile_cache:
true``, the default) and without it. The grid is ``--graphs`` precisions (one graph each)
times ``--lrs`` learning rates (the same graph), so each graph is trained ``--lrs`` times.

For each run it reports every trial's ``compile_time_s`` (its first training step: the
compile of its graphs) and whether it loaded, published or compiled; the cold compiles
(trials that compiled a graph from nothing) against the warm ones; the compile seconds of
all trials, the seconds trials waited for another one's compile, and the sweep's wall::

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

    from versatil.sweep import run_sweep, validate_sweep

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
    return summarize({"cache": cache, "wall_s": round(outcome.wall_s, 2), "trials": trials})


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """Adds the cold compiles and the compile seconds of all trials to one run's record.

    A cold compile is a trial that compiled its graph from nothing: with the cache, the
    trial that published the graph's bundle; without it, the first trial of each graph
    on each node (later trials on that node find the node's own inductor cache warm).
    """
    trials = [t for t in run["trials"] if t["compile_time_s"] is not None]
    if run["cache"]:
        cold = [t for t in trials if not t["cache_loaded"]]
    else:
        seen: set[tuple[str, str]] = set()
        cold = []
        for t in trials:
            if (t["node"], t["precision"]) not in seen:
                seen.add((t["node"], t["precision"]))
                cold.append(t)
    warm = [t for t in trials if t not in cold]
    return {
        **run,
        "cold_compiles": len(cold),
        "cold_compile_s": [round(t["compile_time_s"], 2) for t in cold],
        "median_warm_s": round(statistics.median(t["compile_time_s"] for t in warm), 2)
        if warm
        else None,
        "compile_s_all_trials": round(sum(t["compile_time_s"] for t in trials), 2),
        "waited_s_all_trials": round(sum(t["cache_wait_s"] or 0 for t in trials), 2),
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
    print("cache  wall s  cold compiles (s each)      warm median s  compile s, all  waited s")
    for run in runs:
        print(
            f"{'on' if run['cache'] else 'off':6} {run['wall_s']:6.1f}  "
            f"{run['cold_compiles']} ({', '.join(map(str, run['cold_compile_s']))})".ljust(42)
            + f"{run['median_warm_s']!s:>13}  {run['compile_s_all_trials']:14}  "
            f"{run['waited_s_all_trials']:8}"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
