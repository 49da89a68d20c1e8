"""The MLflow tags of a sweep's runs, read as typed records: defaults, and bad values named."""

from __future__ import annotations

import json

import pytest

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.vocab import tags
from versatil.sweep.vocab.direction import Direction
from versatil.sweep.vocab.run_tags import DEFAULT_TOLERANCE, Int8Tags, SweepTags, TrialTags


def test_a_parent_run_of_today_reads_every_tag() -> None:
    held = {
        tags.OBJECTIVE: "val_loss",
        tags.MODE: "min",
        tags.OBJECTIVES: json.dumps([["val_loss", "min"], ["samples_per_sec", "max"]]),
        tags.TOLERANCE: "0.05",
        tags.TARGET: "0.25",
        tags.EXPERIMENT_DIR: "s3://bucket/sweeps/demo-1",
    }
    read = SweepTags.read(held)
    assert read.objective == "val_loss"
    assert read.mode is Direction.MIN
    assert read.objectives == [("val_loss", Direction.MIN), ("samples_per_sec", Direction.MAX)]
    assert read.tolerance == 0.05
    assert read.target == 0.25
    assert read.experiment_dir == "s3://bucket/sweeps/demo-1"


def test_a_parent_run_with_the_objective_alone_takes_the_defaults() -> None:
    read = SweepTags.read({tags.OBJECTIVE: "val_acc"})
    assert read.mode is Direction.MIN
    assert read.objectives == [("val_acc", Direction.MIN)]
    assert read.tolerance == DEFAULT_TOLERANCE
    assert read.target is None
    assert read.experiment_dir is None


def test_the_mode_defaults_to_the_first_listed_objectives() -> None:
    held = {tags.OBJECTIVE: "val_acc", tags.OBJECTIVES: json.dumps([["val_acc", "max"]])}
    assert SweepTags.read(held).mode is Direction.MAX


def test_a_target_the_end_recorded_as_none_is_no_target() -> None:
    assert SweepTags.read({tags.OBJECTIVE: "m", tags.TARGET: "None"}).target is None


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        (tags.MODE, "maximize", ["versatil.mode", "'maximize'", "min, max"]),
        (tags.OBJECTIVES, "[[", ["versatil.objectives", "not JSON"]),
        (tags.OBJECTIVES, '[["m", "up"]]', ["versatil.objectives", "'up'", "min, max"]),
        (tags.OBJECTIVES, '["m"]', ["versatil.objectives", "[metric, mode]"]),
        (tags.TOLERANCE, "loose", ["versatil.tolerance", "'loose'", "finite number"]),
        (tags.TARGET, "inf", ["versatil.target", "'inf'", "finite number"]),
    ],
)
def test_a_value_no_sweep_writes_is_named_with_its_tag(
    name: str, value: str, words: list[str]
) -> None:
    with pytest.raises(ConfigError) as raised:
        SweepTags.read({tags.OBJECTIVE: "m", name: value})
    for word in words:
        assert word in str(raised.value)


def test_a_run_without_an_objective_is_not_a_sweep_run() -> None:
    with pytest.raises(ConfigError, match=r"versatil\.objective"):
        SweepTags.read({tags.MODE: "min"})


def test_a_trial_run_reads_its_tags() -> None:
    held = {
        tags.TRIAL_ID: "trial_00001",
        tags.AXES: "precision,lr",
        tags.TRAINED_AXES: json.dumps({"lr": 0.02}),
        tags.STATUS: "infeasible",
        tags.REASON: "bf16 needs a device that supports it",
    }
    read = TrialTags.read(held, "run-id")
    assert read.trial_id == "trial_00001"
    assert read.axes == ("precision", "lr")
    assert read.trained_axes == {"lr": 0.02}
    assert read.status is TrialStatus.INFEASIBLE
    assert read.reason == "bf16 needs a device that supports it"


def test_a_trial_run_that_never_reported_reads_as_running() -> None:
    read = TrialTags.read({}, "run-id")
    assert read == TrialTags("run-id", None, {}, TrialStatus.RUNNING, "")


def test_a_status_no_version_writes_reads_as_failed_and_keeps_its_text() -> None:
    read = TrialTags.read({tags.STATUS: "lost", tags.REASON: "no record"}, "r")
    assert read.status is TrialStatus.FAILED
    assert read.reason == "lost: no record"


def test_an_int8_run_reads_its_tags_and_defaults_to_empty() -> None:
    held = {
        tags.INT8_TRIAL: "trial_00002",
        tags.INT8_SWEEP_RUN: "sweep-run",
        tags.PARENT: "trial-run",
        tags.INT8_BACKEND: "torchao",
        tags.INT8_SOURCE: "mlflow-artifacts:/x",
    }
    read = Int8Tags.read(held)
    assert (read.trial_id, read.sweep_run_id, read.parent_run_id) == (
        "trial_00002",
        "sweep-run",
        "trial-run",
    )
    assert (read.backend, read.source, read.fallback_reason) == (
        "torchao",
        "mlflow-artifacts:/x",
        "",
    )
    assert Int8Tags.read({}) == Int8Tags("", "", "", "", "", "")
