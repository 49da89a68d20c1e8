"""check_objectives, check_task and check_storage called directly on a validated sweep."""

import re

import pytest

from versatil.errors import ConfigError
from versatil.sweep.config.checks import check_objectives, check_storage, check_task

MEASURED = "samples_per_sec, epoch_time_s, peak_memory_mb, compile_time_s"
SCHEMALESS_TASK = "tests.user_tasks.own_dataloaders:build"
REACHING_PARAMS = (
    "action_noise, batch_size, data_seed, depth, eps, horizon, lr, n_episodes, val_fraction, "
    "weight_decay, width"
)


def bookkeeping(field: str, metric: str) -> str:
    return (
        f"{field}: {metric!r} is bookkeeping of each result, not a metric; use a metric the "
        f"module logs (val_loss) or one versatil measures ({MEASURED})"
    )


# --- check_objectives ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "objective",
    [
        {"metric": "val_loss", "mode": "min"},
        {"metric": "samples_per_sec", "mode": "max"},
        {"metrics": {"val_loss": "min", "peak_memory_mb": "min"}},
    ],
)
def test_metrics_a_module_logs_or_versatil_measures_pass(sweep_config, objective):
    assert check_objectives(sweep_config(objective=objective)) is None


def test_a_bookkeeping_objective_names_itself_and_what_to_use(sweep_config):
    config = sweep_config(objective={"metric": "time_total_s", "mode": "min"})
    message = "^" + re.escape(bookkeeping("objective.metric", "time_total_s")) + "$"
    with pytest.raises(ConfigError, match=message):
        check_objectives(config)


def test_every_bookkeeping_objective_of_several_is_named_under_objective_metrics(sweep_config):
    config = sweep_config(
        objective={"metrics": {"done": "max", "val_loss": "min", "training_iteration": "min"}}
    )
    with pytest.raises(ConfigError) as raised:
        check_objectives(config)
    assert str(raised.value) == "; ".join(
        [
            bookkeeping("objective.metrics", "done"),
            bookkeeping("objective.metrics", "training_iteration"),
        ]
    )


# --- check_task ---------------------------------------------------------------------------


def test_valid_params_fixed_swept_and_mutated_pass(sweep_config):
    config = sweep_config(
        task={"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "depth": 1}},
        space={
            "precision": ["32", "bf16-mixed"],
            "lr": {"loguniform": [1e-4, 1e-2]},
            "width": {"choice": [8, 16]},
        },
        scheduler={"type": "pbt", "hyperparam_mutations": {"lr": {"uniform": [1e-4, 1e-3]}}},
    )
    assert check_task(config) is None


def test_check_task_checks_the_objectives_first(sweep_config):
    config = sweep_config(
        objective={"metric": "timestamp", "mode": "min"},
        task={"name": "reaching", "params": {"widht": 8}},
    )
    with pytest.raises(ConfigError, match=r"^objective\.metric: 'timestamp' is bookkeeping"):
        check_task(config)


def test_every_unknown_param_is_named_under_its_field_with_the_valid_ones(sweep_config):
    config = sweep_config(
        task={"name": "reaching", "params": {"widht": 8}},
        space={"precision": ["32"], "lrr": {"choice": [0.01]}},
        scheduler={"type": "pbt", "hyperparam_mutations": {"widht": {"choice": [4, 8]}}},
    )
    with pytest.raises(ConfigError) as raised:
        check_task(config)
    # Each field in turn; precision, a setting of every trial and no task param, is not one.
    assert str(raised.value) == "; ".join(
        [
            "task.params.widht: 'widht' is not a param of task 'reaching' (did you mean "
            f"'width'?); valid params: {REACHING_PARAMS}",
            "space.lrr: 'lrr' is not a param of task 'reaching' (did you mean 'lr'?); "
            f"valid params: {REACHING_PARAMS}",
            "scheduler.hyperparam_mutations.widht: 'widht' is not a param of task 'reaching' "
            f"(did you mean 'width'?); valid params: {REACHING_PARAMS}",
        ]
    )


def test_a_name_far_from_every_param_gets_no_suggestion(sweep_config):
    config = sweep_config(task={"name": "reaching", "params": {"zzzzzz": 1}})
    message = (
        r"^task\.params\.zzzzzz: 'zzzzzz' is not a param of task 'reaching'; valid params: "
        + re.escape(REACHING_PARAMS)
        + "$"
    )
    with pytest.raises(ConfigError, match=message):
        check_task(config)


def test_unknown_names_are_reported_before_any_value_is_checked(sweep_config):
    config = sweep_config(task={"name": "reaching", "params": {"widht": 8, "depth": 0}})
    with pytest.raises(ConfigError) as raised:
        check_task(config)
    assert "'widht' is not a param" in str(raised.value)
    assert "depth" not in str(raised.value).split("; valid params: ")[0]


def test_bad_values_are_named_under_their_field_each_once(sweep_config):
    config = sweep_config(
        task={"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "width": 0}},
        space={"lr": {"choice": [0.01, -1, -1]}, "depth": {"randint": [0, 3]}},
        scheduler={"type": "pbt", "hyperparam_mutations": {"lr": {"uniform": [-0.5, 0.1]}}},
    )
    with pytest.raises(ConfigError) as raised:
        check_task(config)
    # The fixed param once (not again with each swept value), the swept and mutated
    # values under their own sections; a range is checked at its bounds.
    assert str(raised.value) == "; ".join(
        [
            "task.params.width: 0 is invalid: Input should be greater than or equal to 1",
            "space.lr: -1 is invalid: Input should be greater than 0",
            "space.depth: 0 is invalid: Input should be greater than or equal to 1",
            "scheduler.hyperparam_mutations.lr: -0.5 is invalid: Input should be greater than 0",
        ]
    )


def test_a_task_without_a_params_model_takes_any_params(sweep_config):
    config = sweep_config(
        task={"name": SCHEMALESS_TASK, "params": {"anything": 1}},
        space={"whatever": {"choice": [-1, 1]}},
    )
    assert check_task(config) is None


def test_a_task_that_cannot_be_imported_is_one_error(sweep_config):
    config = sweep_config(task={"name": "tests.user_tasks.nope:build"})
    with pytest.raises(ConfigError, match=r"'tests\.user_tasks\.nope:build' cannot be imported"):
        check_task(config)


# --- check_storage ------------------------------------------------------------------------


def test_the_storage_path_is_made_and_left_empty(sweep_config, tmp_path):
    config = sweep_config(storage_path=str(tmp_path / "a" / "b"))
    storage = check_storage(config).mirror()
    assert storage == tmp_path / "a" / "b"
    assert storage.is_dir() and list(storage.iterdir()) == []  # the probe file is gone


def test_a_relative_storage_path_comes_back_absolute(sweep_config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = check_storage(sweep_config(storage_path="runs/sweeps")).mirror()
    assert storage.is_absolute() and storage == tmp_path.resolve() / "runs" / "sweeps"


def test_an_existing_storage_path_keeps_what_it_holds(sweep_config, tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "earlier").write_text("kept")
    storage = check_storage(sweep_config(storage_path=str(tmp_path / "runs")))
    assert not storage.remote and storage.mirror() == tmp_path / "runs"
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["earlier"]


def test_a_storage_path_under_a_file_names_the_value_the_reason_and_a_fix(sweep_config, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    storage = str(blocker / "sweeps")
    message = (
        f"storage_path: {storage!r} cannot be written (Not a directory: {storage}); choose a "
        "directory this user can create and write (every Ray node must reach it), e.g. "
        "storage_path: runs/sweeps"
    )
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        check_storage(sweep_config(storage_path=storage))
    assert blocker.read_text() == ""
