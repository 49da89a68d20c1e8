"""A worker node of a multi-node cluster dies mid-trial: the trial finishes on the other.

A cluster of its own (a head and two 1-CPU worker nodes, on this machine, sharing the
storage path as real nodes share a network disk), so the session's cluster is untouched.
The gated trial reports two epochs (a checkpoint each) and waits; its node is killed
(raylet and workers, no grace); Tune retries the trial on the surviving node from its
last checkpoint, and its run continues.
"""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.sweep.drivers import cli, gated_sweep, kill_leftovers, node_processes, wait_for
from tests.sweep.exactly_once import assert_exactly_once

pytestmark = pytest.mark.slow  # a sweep driver, and a node killed under it


def alive(pid):
    """Whether process ``pid`` exists (a zombie of ours counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def gated_results(tmp_path):
    """The gated trial's ``result.json`` and its whole lines, once it holds two; else None."""
    for path in (tmp_path / "runs").glob("nodeloss-*/*/result.json"):
        text = path.read_text()
        lines = text[: text.rfind("\n") + 1].splitlines()  # whole lines only
        if len(lines) >= 2 and json.loads(lines[0])["config"]["lr"] == 0.001:
            return path, lines
    return None


def test_a_node_lost_mid_trial_and_the_trial_finishes_on_the_other(ray_cluster, tmp_path):
    from ray.cluster_utils import Cluster

    gate = tmp_path / "gate"
    data = gated_sweep(
        tmp_path,
        "nodeloss",
        [0.001, 0.002],
        gated_epoch=2,
        max_concurrent_trials=2,
        max_failures=2,
        trainer={"max_epochs": 4, "accelerator": "cpu"},
    )
    path = tmp_path / "nodeloss.yaml"
    path.write_text(yaml.safe_dump(data))
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    driver = None
    try:
        nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
        cluster.wait_for_nodes(timeout=120)
        driver = subprocess.Popen(
            cli("--config", str(path), "--address", cluster.address),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: Path(f"{gate}.waiting").exists(), "the gated trial at its gate")
        # The driver records results on its own time: wait for the gated trial's two.
        wait_for(lambda: gated_results(tmp_path), "the gated trial's two epochs recorded")
        gated, lines = gated_results(tmp_path)
        lost, worker = json.loads(lines[1])["node_id"], json.loads(lines[1])["pid"]
        (node,) = [n for n in nodes if n.node_id == lost]
        processes = node_processes(node)
        cluster.remove_node(node, allow_graceful=False)
        kill_leftovers(processes)  # a lost node takes every process on it
        # The trial's worker outlives its raylet for a moment: open the gate only once it
        # is gone, or it could finish the trial on a node that no longer exists.
        wait_for(lambda: not alive(worker), "the lost node's worker gone")
        gate.touch()
        out, err = driver.communicate(timeout=300)
    finally:
        gate.touch()
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        cluster.shutdown()
    assert driver.returncode == 0, err[-3000:]
    assert "2 trials in" in out and "2 completed" in out
    results = [json.loads(line) for line in gated.read_text().splitlines()]
    assert [r["epoch"] for r in results[:2]] == [0, 1]
    after = results[2:]
    assert after and all(r["node_id"] != lost for r in after)  # finished on the other node
    assert after[0]["iterations_since_restore"] == 1  # restored, not restarted
    assert after[-1]["epoch"] == 3 and after[-1]["status"] == "completed"
    counted = assert_exactly_once(gated.parents[1])
    assert counted.epochs == 8
