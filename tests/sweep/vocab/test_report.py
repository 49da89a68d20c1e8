"""A trial's report as one typed, versioned record: written flat for Tune, read back whole."""

import json
import math
import subprocess
import sys
import types

from hypothesis import given
from hypothesis import strategies as st

from versatil.status import TrialStatus
from versatil.sweep.vocab.keys import BOOKKEEPING, metric_items
from versatil.sweep.vocab.report import REPORT_VERSION, VERSION, TrialReport

INF = math.inf

# Today's keys of a fit's first epoch with a device ceiling, notes on the hardware metrics
# it could not measure, and an unreadable checkpoint skipped on restore; this module's
# metrics are train_loss, val_loss and samples_per_sec. A renamed key fails the test.
FIRST_EPOCH_KEYS = {
    "train_loss",
    "val_loss",
    "samples_per_sec",
    "epoch",
    "step",
    "node_id",
    "pid",
    "in_effect/matmul_precision",
    "in_effect/default_dtype",
    "status",
    "resumed",
    "world_size",
    "fit_time_s",
    "hparams",
    "hardware_ceiling",
    "hardware_notes",
    "checkpoint/unreadable_skipped",
    "report_version",
}

CEILING = {"key": {"device": "cpu"}, "tflops": {"float32": 1.5}, "sizes": {}, "measured_at": {}}


def first_epoch() -> TrialReport:
    return TrialReport(
        status=TrialStatus.RUNNING,
        epoch=0,
        step=8,
        resumed=False,
        world_size=1,
        node_id="abc123",
        pid=4242,
        fit_time_s=3.5,
        hparams={"lr": "0.01", "width": "64"},
        hardware_ceiling=CEILING,
        hardware_notes={"energy": "no energy counter on this device"},
        unreadable_skipped=1,
        facts={"in_effect/matmul_precision": "highest", "in_effect/default_dtype": "float32"},
        metrics={"train_loss": 0.5, "val_loss": 0.4, "samples_per_sec": 1200.0},
    )


def test_a_first_epoch_has_exactly_todays_keys_plus_the_version():
    result = first_epoch().to_dict()
    assert set(result) == FIRST_EPOCH_KEYS
    assert result[VERSION] == REPORT_VERSION == 1
    assert result["status"] == "running" and result["epoch"] == 0
    assert result["checkpoint/unreadable_skipped"] == 1


def test_metrics_stay_top_level_keys_and_the_version_is_not_one():
    result = first_epoch().to_dict()
    assert result["val_loss"] == 0.4 and result["samples_per_sec"] == 1200.0
    assert "metrics" not in result and "facts" not in result
    assert VERSION in BOOKKEEPING
    assert dict(metric_items(result)) == {
        "train_loss": 0.5,
        "val_loss": 0.4,
        "samples_per_sec": 1200.0,
        "fit_time_s": 3.5,
        "checkpoint/unreadable_skipped": 1.0,
    }


def test_an_ending_carries_its_reason_and_no_epoch_facts():
    ending = TrialReport(
        status=TrialStatus.INFEASIBLE,
        reason="bf16-mixed: not supported",
        metrics={"val_loss": INF},
        node_id="n",
        pid=1,
    )
    assert ending.to_dict() == {
        "val_loss": INF,
        "node_id": "n",
        "pid": 1,
        "status": "infeasible",
        "reason": "bf16-mixed: not supported",
        "report_version": 1,
    }
    # An ending always says why, even with nothing to say; an epoch only when it has.
    assert TrialReport(status=TrialStatus.FAILED).to_dict()["reason"] == ""
    assert "reason" not in TrialReport(status=TrialStatus.RUNNING, epoch=3).to_dict()
    missing = TrialReport(status=TrialStatus.FAILED, reason="r", stops_sweep=True)
    assert missing.to_dict()["stops_sweep"] is True


def test_an_older_result_without_a_version_reads_with_the_defaults():
    # What earlier versions wrote: the same keys, no report_version; Tune's keys beside.
    older = {
        "val_loss": 0.25,
        "samples_per_sec": 900.0,
        "epoch": 4,
        "node_id": "n1",
        "pid": 77,
        "in_effect/default_dtype": "float32",
        "status": "completed",
        "resumed": True,
        "world_size": 2,
        "fit_time_s": 12.0,
        "training_iteration": 5,
        "config": {"lr": 0.1},
        "done": False,
    }
    report = TrialReport.from_dict(older)
    assert report.version == 0
    assert report.status is TrialStatus.COMPLETED and report.epoch == 4
    assert report.resumed and report.world_size == 2 and report.pid == 77
    assert report.reason == "" and report.hparams is None and not report.stops_sweep
    assert report.unreadable_skipped == 0 and report.hardware_ceiling is None
    assert report.metrics == {"val_loss": 0.25, "samples_per_sec": 900.0}
    assert report.facts == {
        "in_effect/default_dtype": "float32",
        "training_iteration": 5,
        "config": {"lr": 0.1},
        "done": False,
    }
    assert report.to_dict() == {**older, "report_version": 0}


def test_a_result_with_nothing_reads_as_every_default():
    assert TrialReport.from_dict({}) == TrialReport(status=None, version=0)
    ending = TrialReport.from_dict({"val_loss": INF, "status": "failed", "reason": "oom"})
    assert ending.epoch is None and not ending.resumed and ending.world_size == 1
    assert ending.metrics == {"val_loss": INF}


def test_a_newer_versions_unknown_keys_are_kept():
    newer = {
        "report_version": 7,
        "status": "running",
        "epoch": 2,
        "val_loss": 0.3,
        "grad_norm/p99": 4.0,
        "scheduler_phase": "warmup",
        "pid": "worker-3",  # a field whose type changed: kept, not guessed
    }
    report = TrialReport.from_dict(newer)
    assert report.version == 7 and report.epoch == 2
    assert report.metrics == {"val_loss": 0.3, "grad_norm/p99": 4.0}
    assert report.pid is None
    assert report.facts == {"scheduler_phase": "warmup", "pid": "worker-3"}
    assert report.to_dict() == {**newer, "resumed": False, "world_size": 1}


def test_a_status_this_version_does_not_know_is_none_and_kept():
    report = TrialReport.from_dict({"status": "paused-by-user", "epoch": 1})
    assert report.status is None and report.facts == {"status": "paused-by-user"}
    assert report.to_dict()["status"] == "paused-by-user"


def test_nan_stays_a_metric_and_a_nan_epoch_is_no_epoch():
    report = TrialReport.from_dict({"train_loss": float("nan"), "epoch": float("nan")})
    assert math.isnan(report.metrics["train_loss"])
    assert report.epoch is None and math.isnan(report.facts["epoch"])


texts = st.text(max_size=12)
maybe = st.none
reports = st.builds(
    TrialReport,
    status=st.sampled_from(TrialStatus) | maybe(),
    reason=texts,
    epoch=st.integers(0, 10**6) | maybe(),
    step=st.integers(0, 10**9) | maybe(),
    resumed=st.booleans(),
    world_size=st.integers(1, 256),
    node_id=texts | maybe(),
    pid=st.integers(1, 2**22) | maybe(),
    fit_time_s=st.floats(0, 1e7) | maybe(),
    hparams=st.dictionaries(texts, texts) | maybe(),
    hardware_ceiling=st.dictionaries(texts, st.floats(0, 1e3) | texts) | maybe(),
    hardware_notes=st.dictionaries(texts, texts) | maybe(),
    stops_sweep=st.booleans(),
    unreadable_skipped=st.integers(0, 50),
    facts=st.dictionaries(
        texts.map("fact/{}".format), texts | st.booleans() | st.none() | st.lists(texts)
    ),
    metrics=st.dictionaries(texts.map("metric/{}".format), st.floats(allow_nan=False)),
    version=st.integers(0, 9),
)


@given(reports)
def test_every_report_reads_back_as_itself(report):
    assert TrialReport.from_dict(report.to_dict()) == report


@given(reports)
def test_every_report_reads_back_from_result_json(report):
    line = json.dumps(report.to_dict())  # Tune writes one such line per result
    assert TrialReport.from_dict(json.loads(line)) == report


@given(reports)
def test_a_written_result_is_written_again_unchanged(report):
    result = report.to_dict()
    again = TrialReport.from_dict(result).to_dict()
    assert again == result and list(again) == list(result)


def test_a_row_without_a_status_is_running_until_its_trial_ends():
    from versatil.sweep.results.rows import make_row

    def row(metrics, **kwargs):
        base = {"trial_id": "t", "config": {}, "epochs": [], "axes": [], "objective": "v"}
        return make_row(**base, metrics=metrics, **kwargs)

    assert row({}, ended=False).status == TrialStatus.RUNNING
    assert row({}).status == TrialStatus.FAILED
    assert row({"status": "running", "epoch": 1}).status == TrialStatus.STOPPED
    assert row({"status": "running"}, ended=False).status == TrialStatus.RUNNING
    failed = row({"status": "failed", "reason": "oom"}, checkpoint=None)
    assert failed.status == TrialStatus.FAILED and failed.reason == "oom"
    assert row({"checkpoint_path": "/c"}).checkpoint == "/c"
    assert row({}, error="Traceback\nValueError: x").reason == "ValueError: x"


def test_the_worker_reports_exactly_todays_keys(monkeypatch):
    import ray

    import versatil.training.hardware.utilization as utilization
    from versatil.sweep.config.load import validate_sweep
    from versatil.sweep.config.planning import make_plan
    from versatil.sweep.worker.outcome import Resume, ending_result, epoch_report

    monitor = types.SimpleNamespace(
        ceiling=types.SimpleNamespace(as_dict=lambda: CEILING), notes={"energy": "none"}
    )
    node = types.SimpleNamespace(get_node_id=lambda: "abc123")
    monkeypatch.setattr(ray, "get_runtime_context", lambda: node)
    monkeypatch.setattr(utilization, "utilization_of", lambda trainer: monitor)
    sweep = make_plan(validate_sweep({"name": "x", "objective": {"metric": "val_loss"}})).trial
    trainer = types.SimpleNamespace(
        current_epoch=0,
        max_epochs=3,
        max_steps=-1,
        global_step=8,
        callbacks=[],
        world_size=1,
        lightning_module=types.SimpleNamespace(hparams={"lr": 0.01, "width": 64}),
        callback_metrics={"val_loss": 0.4, "train_loss": 0.5},
    )
    metrics = {"train_loss": 0.5, "val_loss": 0.4, "samples_per_sec": 1200.0, "epoch": 0}
    report, with_checkpoint = epoch_report(sweep, trainer, metrics, 0.0, resumed=False)
    result = Resume(skipped=("newest: truncated",)).annotate(report).to_dict()
    assert with_checkpoint and set(result) == FIRST_EPOCH_KEYS
    assert result["hparams"] == {"lr": "0.01", "width": "64"} and result["epoch"] == 0

    failed, with_checkpoint = epoch_report(sweep, trainer, {"epoch": 0}, 0.0, resumed=False)
    assert not with_checkpoint and trainer.should_stop
    ending = {"val_loss", "status", "reason", "node_id", "pid", "report_version"}
    in_effect = {"in_effect/matmul_precision", "in_effect/default_dtype"}
    assert set(failed.to_dict()) == ending | in_effect | {"stops_sweep"}
    out_of_memory = ending_result(sweep, MemoryError())
    assert set(out_of_memory.to_dict()) == ending | in_effect


def test_importing_the_report_leaves_torch_ray_lightning_and_mlflow_out():
    code = (
        "import sys, versatil.sweep.vocab.report; "
        "print(sorted(m for m in ('torch', 'ray', 'lightning', 'mlflow') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"
