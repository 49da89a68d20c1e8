"""A LightningCLI config as the task: read by LightningCLI, its Trainer options joined.

The config is tests/user_tasks/configs/causal_lm.yaml, the causal language model on its
endless stream with a step budget, as a user's ``train.py fit --config`` reads it.
"""

from pathlib import Path

import pytest
import yaml

from versatil.cli_common import run_main
from versatil.errors import ConfigError
from versatil.sweep.cli.main import main
from versatil.sweep.config.checks import check_task
from versatil.sweep.config.load import validate_sweep
from versatil.sweep.config.planning import make_plan
from versatil.training.tasks.cli_config import CONFIG_PARAM, TASK, build

CONFIG = Path(__file__).resolve().parents[2] / "user_tasks" / "configs" / "causal_lm.yaml"


def _sweep(task=None, **fields):
    data = {"name": "cli", "task": task or {"config": str(CONFIG)}, **fields}
    return validate_sweep(data)


def test_the_files_trainer_options_and_seed_become_the_sweeps():
    config = _sweep(space={"precision": ["32", "bf16-mixed"], "model.lr": {"grid": [1e-3, 3e-3]}})
    assert config.task.config_text == CONFIG.read_text()
    assert config.trainer.options == {
        "max_steps": 12,
        "val_check_interval": 6,
        "gradient_clip_val": 1.0,
    }
    assert config.trainer.seed == 7  # the file's seed_everything
    plan = make_plan(config)
    assert (plan.budget.amount, plan.budget.unit) == (12, "steps")
    assert plan.trial.task == TASK and plan.trial.params == {CONFIG_PARAM: CONFIG.read_text()}
    check_task(config)  # every swept value fits the file's classes
    # A trial's axes reach LightningCLI as its dotted keys: the model is built with them.
    train = plan.trial.train_config({"precision": "32", "model.lr": 0.001})
    model, data = build(train.params)
    assert type(model).__name__ == "CausalLM" and model.hparams.lr == 0.001
    assert type(data).__name__ == "Stream" and data.batch_size == 16


def test_a_stored_sweep_needs_no_file():
    stored = _sweep().model_dump(mode="json")
    stored["task"]["config"] = "/nowhere/causal_lm.yaml"  # moved, or another machine
    again = validate_sweep(stored)
    assert again.task.config_text == CONFIG.read_text()
    assert again.trainer.options == _sweep().trainer.options


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"trainer": {"max_steps": 50}},
            "trainer.max_steps: 50 in the sweep file, and trainer.max_steps: 12 in task.config",
        ),
        (
            {"trainer": {"seed": 3}},
            "trainer.seed: 3 in the sweep file, and seed_everything: 7 in task.config",
        ),
        (
            {"task": {"config": "missing.yaml"}},
            "task.config: 'missing.yaml' cannot be read (looked for ",
        ),
        (
            {"task": {"config": str(CONFIG), "name": "my_package.tasks:build"}},
            "task: give name ('my_package.tasks:build') or config (",
        ),
        (
            {"space": {"model.lrr": {"grid": [0.1, 0.2]}}},
            "space.model.lrr: 0.1 for task.config ",
        ),
    ],
)
def test_a_conflict_or_a_bad_key_is_one_message_naming_both_places(fields, message):
    with pytest.raises(ConfigError) as raised:
        check_task(_sweep(**fields))
    assert message in str(raised.value)


def test_an_owned_option_in_the_file_is_refused_naming_the_file(tmp_path):
    data = yaml.safe_load(CONFIG.read_text())
    data["trainer"]["precision"] = "bf16-mixed"
    path = tmp_path / "lm.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as raised:
        _sweep(task={"config": str(path)})
    assert (
        f"task.config: trainer.precision in {str(path)!r}: versatil owns this Trainer option: "
        "versatil sets it per trial from space.precision; remove it from the file"
    ) in str(raised.value)


def test_the_cli_refuses_a_config_lightning_refuses_with_exit_2(tmp_path, capsys):
    data = yaml.safe_load(CONFIG.read_text())
    data["model"]["class_path"] = "tests.user_tasks.causal_lm_stream.NoSuchModel"
    bad = tmp_path / "lm.yaml"
    bad.write_text(yaml.safe_dump(data))
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "cli", "task": {"config": str(bad)}}))
    assert run_main(main, ["--config", str(sweep), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "task.config: LightningCLI refuses it: " in err and "NoSuchModel" in err
    assert "Traceback" not in err


def test_a_constant_axis_of_zero_is_checked_like_any_other():
    # A falsy value (0) is still the space's axis, not a missing one.
    check_task(_sweep(space={"data.n_val": 0}))
    with pytest.raises(ConfigError, match=r"space\.data\.n_vall: 0 for task\.config "):
        check_task(_sweep(space={"data.n_vall": 0}))
