"""A sweep stopped by SIGTERM or SIGINT: one line, its exit status, and a resume that finishes.

SIGTERM is what Kubernetes sends a pod (then SIGKILL after the grace period); SIGINT is
Ctrl-C. The sweep driver is a process of its own on the session's cluster; each signal
comes at a known point, a trial held at its gate, never after a delay. (The tests on the
cluster are slow ones; the handler's own runs without it.)
"""

import argparse
import os
import shlex
import signal
import subprocess
import threading
from pathlib import Path

import pytest
import ray
import yaml
from mlflow.tracking import MlflowClient

from tests.sweep.drivers import cli, gated_sweep, run, wait_cpus_freed, wait_for
from tests.sweep.exactly_once import assert_exactly_once, tally
from versatil.sweep.cli.run import interrupted_line
from versatil.sweep.engine.stops import Stops, SweepInterrupted, get_or_cancel
from versatil.sweep.results.records import read_trials
from versatil.sweep.tracking import child_runs, reopen_sweep_run
from versatil.sweep.vocab import tags

LRS = [0.001, 0.002, 0.003]


def test_sigterm_mid_trial_saves_the_sweep_says_how_to_go_on_and_the_resume_finishes(
    ray_cluster, tmp_path
):
    # The first trial reports epoch 0, then waits at epoch 1's start: mid-way at the signal.
    data = gated_sweep(
        tmp_path,
        "stopped",
        LRS,
        gated_epoch=1,
        max_concurrent_trials=1,
        trainer={"max_epochs": 2, "accelerator": "cpu"},
        confirm={"enabled": "off"},
    )
    config = tmp_path / "stopped.yaml"
    config.write_text(yaml.safe_dump(data))
    args = ("--config", str(config), "--address", ray_cluster.address)
    driver = subprocess.Popen(cli(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: Path(f"{tmp_path / 'gate'}.waiting").exists(), "the trial at its gate")
        driver.send_signal(signal.SIGTERM)
        out, err = driver.communicate(timeout=180)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
    assert driver.returncode == 143, (out[-3000:], err[-3000:])
    assert "SIGTERM received" not in err and "Traceback" not in err, err[-3000:]
    (experiment_dir,) = (tmp_path / "runs").glob("stopped-*")
    command = shlex.join(["python", "-m", "versatil.sweep", *args, "--resume"])
    last = out.splitlines()[-1]
    assert last.startswith("stopped by SIGTERM at "), out[-3000:]
    assert last.endswith(
        ": 0 of 3 trials ended, 1 stopped mid-way (it goes on from its last checkpoint); "
        f"Tune's state is saved in {experiment_dir}; continue with: {command}"
    ), last
    # Tune saved the stopped trial as unfinished, with its first epoch's checkpoint.
    (stopped,) = [r for r in read_trials(experiment_dir) if r.results]
    assert not stopped.ended and stopped.checkpoint is not None, stopped
    # The parent run says it was interrupted, and when; no run is left RUNNING.
    counted = tally(experiment_dir)
    assert counted.parent_status == "KILLED" and counted.runs_running == 0, counted
    context = reopen_sweep_run(experiment_dir)
    client = MlflowClient(context.tracking_uri)
    interrupted = client.get_run(context.parent_run_id).data.tags[tags.INTERRUPTED]
    assert interrupted == last.removeprefix("stopped by ").split(": ")[0], interrupted
    (child,) = child_runs(client, context)
    assert child.info.status == "KILLED" and child.data.tags[tags.TRIAL_ID] == stopped.trial_id

    (tmp_path / "gate").touch()
    wait_cpus_freed()
    resumed = run(cli(*args, "--resume"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr and "ERROR" not in resumed.stderr, resumed.stderr
    assert "3 trials in" in resumed.stdout and "3 completed" in resumed.stdout, resumed.stdout
    # The stopped trial went on from its checkpoint: nothing lost, nothing twice.
    counted = assert_exactly_once(experiment_dir)
    assert counted.trials == 3 and counted.epochs == 6, counted
    (again,) = [r for r in read_trials(experiment_dir) if r.trial_id == stopped.trial_id]
    assert [(r["epoch"], r["resumed"]) for r in again.results] == [(0, False), (1, True)]
    assert client.get_run(context.parent_run_id).info.status == "FINISHED"


@ray.remote(num_cpus=0)
def _held(gate: str) -> str:
    """A task that waits at ``gate`` (``<gate>.waiting`` says it does), as a phase's task."""
    import time

    Path(f"{gate}.waiting").touch()
    while not Path(gate).exists():
        time.sleep(0.05)
    return "done"


def _signal_when(path: Path, signum: signal.Signals, then=None) -> threading.Thread:
    """Sends this process ``signum`` once ``path`` exists; and again once ``then()`` holds.

    (Two signals sent at once would be one: a pending signal is not queued twice.)
    """

    def send() -> None:
        wait_for(path.exists, path.name)
        os.kill(os.getpid(), signum)
        if then is not None:
            wait_for(then, "the first signal handled")
            os.kill(os.getpid(), signum)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_a_signal_while_a_phase_waits_on_its_ray_task_stops_it_and_cancels_the_task(
    ray_cluster, tmp_path
):
    # The re-timing and a race's screen wait on one Ray task, in get_or_cancel.
    gate = tmp_path / "gate"
    stops = Stops()
    ref = _held.remote(str(gate))
    with stops.installed():
        sender = _signal_when(Path(f"{gate}.waiting"), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt) as raised:
            get_or_cancel(ref)
        sender.join(timeout=60)
    stop = stops.stop_of(raised.value)
    assert stop is not None and stop.signum == signal.SIGINT and not stop.at_once
    assert stop.exit_status == 130
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(ref, timeout=120)
    # The handlers before it are back.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert os.environ.get("TUNE_DISABLE_SIGINT_HANDLER") is None


def test_a_second_signal_during_the_fit_stops_at_once(tmp_path):
    # During Tune's fit the first signal only asks (Tune stops at its next step); a
    # second one, before Tune has, stops at once.
    stops = Stops()
    marker = tmp_path / "in-fit"
    with stops.installed(), pytest.raises(KeyboardInterrupt) as raised, stops.fit():
        sender = _signal_when(marker, signal.SIGTERM, then=lambda: stops.request is not None)
        marker.touch()
        wait_for(lambda: stops.at_once is not None, "the second signal", 60)
    sender.join(timeout=60)
    stop = stops.stop_of(raised.value)
    assert stop is stops.at_once and stop.at_once and stop.exit_status == 143
    assert stops.request is not None and not stops.request.at_once


def test_the_line_says_what_was_saved_and_the_command_that_goes_on():
    args = argparse.Namespace(argv=["--config", "my sweep.yaml"], auto_resume=False)
    stop = SweepInterrupted(signal.SIGINT, 1796657421.0)
    assert interrupted_line(stop, args) == (
        "stopped by SIGINT at 2026-12-07T15:30:21Z before its trials started; "
        "run the same command to start again"
    )
    stop.ended, stop.planned, stop.stopped, stop.where = 5, 16, 2, "s3://team/sweeps/q-1"
    assert interrupted_line(stop, args) == (
        "stopped by SIGINT at 2026-12-07T15:30:21Z: 5 of 16 trials ended, 2 stopped mid-way "
        "(they go on from their last checkpoint); Tune's state is saved in "
        "s3://team/sweeps/q-1; continue with: python -m versatil.sweep --config "
        "'my sweep.yaml' --resume"
    )
    # The command a retried job runs goes on as it is.
    retried = argparse.Namespace(argv=["--auto-resume", "--config", "q.yaml"], auto_resume=True)
    assert interrupted_line(stop, retried).endswith(
        "continue with: python -m versatil.sweep --config q.yaml --auto-resume"
    )
    assert stop.exit_status == 130
