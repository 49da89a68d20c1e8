"""The tracking store fails during a sweep: nothing is lost, nothing is logged twice.

Each test runs a real ``mlflow server`` of its own and faults it for real: stopped
(SIGTERM, then restarted on the same port and store) or hung (SIGSTOP: the kernel still
accepts connections, nobody answers). Every wait is for an observable state: the gated
trial waiting at its gate, a trial's result on disk.
"""

import io
import json
import logging
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.sweep.drivers import BOUND_S, gated_sweep, wait_for
from tests.sweep.exactly_once import assert_exactly_once
from versatil.cli_common import run_main
from versatil.sweep.cli.main import main
from versatil.sweep.vocab.names import SWEEP_ENDED

pytestmark = pytest.mark.slow  # sweeps against mlflow servers stopped and restarted


def sweep_data(tmp_path, name, max_epochs=4, **task_params):
    """Two trials on two nodes; the one with lr 0.001 waits at its second epoch's start."""
    return gated_sweep(
        tmp_path,
        name,
        [0.001, 0.002],
        max_concurrent_trials=2,
        trainer={"max_epochs": max_epochs, "accelerator": "cpu"},
        task_params=task_params,
    )


def completed(experiment_dir, count):
    """Whether ``count`` trials' last results on disk say completed."""
    done = 0
    for path in experiment_dir.glob("*/result.json"):
        lines = path.read_text().splitlines()
        done += bool(lines) and json.loads(lines[-1]).get("status") == "completed"
    return done >= count


class Fault(threading.Thread):
    """Runs ``steps`` beside the sweep; an error in them is raised again by ``check``."""

    def __init__(self, steps):
        super().__init__(daemon=True)
        self.steps, self.error = steps, None

    def run(self):
        try:
            self.steps()
        except BaseException as error:  # re-raised in the test's thread
            self.error = error

    def check(self):
        self.join(timeout=BOUND_S)
        if self.error is not None:
            raise self.error


def test_server_down_for_30_s_mid_sweep_then_back(ray_cluster, tmp_path, caplog):
    """Results during the outage reach MLflow once the server is back, each epoch once."""
    from versatil.sweep.config.load import validate_sweep
    from versatil.sweep.engine.runner import run_sweep

    root = tmp_path / "server"
    root.mkdir()
    server, uri = start_mlflow_server(root)
    port = int(uri.rsplit(":", 1)[1])
    gate, second, servers, started = tmp_path / "gate", tmp_path / "second", [server], []

    def outage():
        for each in (gate, second):  # both trials wait at their second epoch
            wait_for(lambda each=each: Path(f"{each}.waiting").exists(), f"{each.name} waiting")
        stop_mlflow_server(servers[0])
        down = time.monotonic()
        # One trial reports its remaining epochs, and ends, while nothing answers; the
        # other holds the sweep open until the server is back.
        second.touch()
        wait_for(lambda: started and completed(started[0], 1), "one trial completed")
        time.sleep(max(0.0, 30 - (time.monotonic() - down)))
        servers.append(start_mlflow_server(root, port=port)[0])
        gate.touch()

    fault = Fault(outage)
    fault.start()
    caplog.set_level(logging.WARNING, logger="versatil.sweep.tracking.live")
    try:
        outcome = run_sweep(
            validate_sweep(
                sweep_data(tmp_path, "outage", second_gate=str(second), second_lr=0.002)
            ),
            tracking_uri=uri,
            stream=io.StringIO(),
            on_start=started.append,
        )
        fault.check()
        counted = assert_exactly_once(outcome.experiment_dir)  # the restarted server
    finally:
        gate.touch()
        second.touch()
        for each in servers:
            stop_mlflow_server(each)
    assert counted.epochs == 8
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"MLflow: could not log to {uri}") for m in messages), messages
    assert any(m.startswith(f"MLflow: {uri} answers again after") for m in messages), messages
    assert outcome.gap is None
    assert {row.status for row in outcome.rows} == {"completed"}


@pytest.mark.parametrize("fault_kind", ["stopped", "hung"])
def test_the_sweep_ends_without_the_store_and_sync_backfills(
    ray_cluster, tmp_path, capsys, monkeypatch, fault_kind
):
    """The store fails after the first result and stays down: the sweep still ends well."""
    import os
    import signal

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")  # a hung call ends in seconds
    root = tmp_path / "server"
    root.mkdir()
    server, uri = start_mlflow_server(root)
    port = int(uri.rsplit(":", 1)[1])
    gate, servers = tmp_path / "gate", [server]
    name = f"ends-{fault_kind}"
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_data(tmp_path, name, max_epochs=3)))

    def fail():
        wait_for(lambda: Path(f"{gate}.waiting").exists(), "the gated trial at its gate")
        if fault_kind == "stopped":
            stop_mlflow_server(server)
        else:
            os.killpg(server.pid, signal.SIGSTOP)
        gate.touch()

    fault = Fault(fail)
    fault.start()
    try:
        start = time.monotonic()
        code = run_main(main, ["--config", str(path), "--tracking-uri", uri])
        ended_s = time.monotonic() - start
        fault.check()
        out, err = capsys.readouterr()
        assert code == 0, err[-3000:]
        # None of the CLI's own (Ray forwards a worker's lines prefixed "(run_trial pid=N)";
        # one shut down at the end may print Ray's own SIGTERM traceback there).
        assert not [line for line in err.splitlines() if line.startswith("Traceback")]
        assert "2 trials in" in out and "2 completed" in out
        (experiment_dir,) = (tmp_path / "runs").glob(f"{name}-*")
        for trial in (p.parent.name for p in experiment_dir.glob("*/result.json")):
            assert trial in out  # the summary came from Tune's records
        assert f"MLflow at {uri} failed at the end of the sweep" in err
        storage = tmp_path / "runs"
        assert f"run `python -m versatil.sweep sync {name} --storage-path {storage}`" in err
        assert "Not in MLflow yet: " in err
        assert ended_s < 200
        # Its end is not in MLflow: --auto-resume would continue this run, not start one.
        assert not (experiment_dir / SWEEP_ENDED).exists()
        # The store comes back; sync fills in what it missed.
        if fault_kind == "stopped":
            servers.append(start_mlflow_server(root, port=port)[0])
        else:
            os.killpg(server.pid, signal.SIGCONT)
        code = run_main(main, ["sync", name, "--storage-path", str(storage)])
        out, err = capsys.readouterr()
        assert code == 0, err
        line = out.strip().splitlines()[-1]
        assert line.startswith(f"{experiment_dir.name}: ") and "parent run ended" in line
        # The gated trial's last two epochs and its end came after the fault, at least.
        backfilled = int(line.split(": ", 1)[1].split(" epochs backfilled")[0])
        assert backfilled >= 2 and " 0 runs ended" not in line, line
        assert_exactly_once(experiment_dir)
        # A second sync finds nothing missing.
        assert run_main(main, ["sync", name, "--storage-path", str(storage)]) == 0
        assert (
            f"{experiment_dir.name}: nothing missing, parent run ended" in capsys.readouterr().out
        )
    finally:
        gate.touch()
        for each in servers:
            stop_mlflow_server(each)
