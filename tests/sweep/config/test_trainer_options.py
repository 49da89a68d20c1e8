"""The trainer section takes Lightning's Trainer arguments, checked against Lightning itself.

Each bad option is one clear line naming the option, the value and what is valid, exit
status 2 through the CLI, and nothing started (no storage directory, no Ray).
"""

import inspect

import pytest
import yaml
from lightning.pytorch import Trainer

from versatil.cli_common import run_main
from versatil.errors import ConfigError
from versatil.sweep.cli.main import main
from versatil.sweep.config.load import validate_sweep
from versatil.sweep.config.planning import make_plan
from versatil.training.budget import is_unbounded
from versatil.training.trainer_options import OWNED, instantiate_callbacks, step_options

BASE = {"name": "opts", "task": {"name": "reaching"}}
STOPPING = {
    "class_path": "lightning.pytorch.callbacks.EarlyStopping",
    "init_args": {"monitor": "val_loss", "patience": 2},
}


def _sweep(**trainer):
    return validate_sweep({**BASE, "trainer": {"accelerator": "cpu", **trainer}})


def test_trainer_options_pass_through_into_the_plan_and_every_trial():
    config = _sweep(
        max_steps=60,
        val_check_interval=20,
        accumulate_grad_batches=2,
        gradient_clip_val=1.0,
        gradient_clip_algorithm="norm",
        num_sanity_val_steps=0,
        deterministic=True,
        callbacks=[STOPPING],
    )
    plan = make_plan(config)
    assert (plan.budget.amount, plan.budget.unit, plan.budget.max_epochs) == (60, "steps", None)
    assert "budget: 60 steps per trial" in plan.lines()
    train = plan.trial.train_config({})
    assert train.max_epochs is None and train.trainer["accumulate_grad_batches"] == 2
    (callback,) = instantiate_callbacks(train.trainer)
    assert type(callback).__name__ == "EarlyStopping" and callback.patience == 2
    # A timed fit keeps what shapes a step, not the budget, the cadence or the callbacks.
    assert step_options(train.trainer) == {
        "accumulate_grad_batches": 2,
        "gradient_clip_val": 1.0,
        "gradient_clip_algorithm": "norm",
        "deterministic": True,
    }


@pytest.mark.parametrize(
    ("trainer", "budget"),
    [
        ({}, (3, "epochs", 3)),
        ({"max_epochs": 5}, (5, "epochs", 5)),
        ({"max_time": "00:00:10:00"}, ("00:00:10:00", "time", None)),
        ({"max_steps": 40, "max_epochs": 2}, (40, "steps", 2)),
    ],
)
def test_the_budget_is_counted_in_what_bounds_the_trial(trainer, budget):
    plan = make_plan(_sweep(**trainer))
    assert (plan.budget.amount, plan.budget.unit, plan.budget.max_epochs) == budget


@pytest.mark.parametrize(
    ("options", "unbounded"),
    [
        ({}, True),
        ({"max_steps": -1}, True),
        ({"limit_train_batches": 0.5}, True),  # a fraction of an endless epoch is endless
        ({"max_steps": 10}, False),
        ({"max_time": {"minutes": 5}}, False),
        ({"limit_train_batches": 100}, False),
    ],
)
def test_an_endless_epoch_is_bounded_only_by_steps_time_or_a_batch_count(options, unbounded):
    assert is_unbounded(options) is unbounded


@pytest.mark.parametrize(
    ("trainer", "message"),
    [
        (
            {"max_step": 60},
            "trainer.max_step: unknown field, and not an argument of lightning.pytorch.Trainer "
            "(did you mean 'max_steps'?); valid: the section's fields (max_epochs, accelerator, "
            "seed, compile_cache) and Lightning's Trainer arguments (accumulate_grad_batches, "
            "benchmark, callbacks,",
        ),
        (
            {"gradient_clip_val": "big"},
            "trainer.gradient_clip_val: 'big' is not of type int | float | null (Trainer's type)",
        ),
        (
            {"accumulate_grad_batches": True},
            "trainer.accumulate_grad_batches: True is not of type int",
        ),
        (
            {"precision": "16-mixed"},
            "trainer.precision: versatil owns this Trainer option: versatil sets it per trial "
            "from space.precision",
        ),
        ({"strategy": "ddp"}, "trainer.strategy: versatil owns this Trainer option"),
        ({"logger": True}, "trainer.logger: versatil owns this Trainer option"),
        (
            {"callbacks": [{"class_path": "my_package.callbacks.Nope"}]},
            "trainer.callbacks[0].class_path: 'my_package.callbacks.Nope' does not import "
            "(No module named 'my_package'); give a Callback class as package.module.Class",
        ),
        (
            {"callbacks": [{"class_path": "collections.OrderedDict"}]},
            "trainer.callbacks[0].class_path: 'collections.OrderedDict' is not a "
            "lightning.pytorch.Callback",
        ),
        (
            {"callbacks": [{**STOPPING, "init_args": {"monitr": "val_loss"}}]},
            "trainer.callbacks[0].init_args: {'monitr': 'val_loss'} do not fit "
            "lightning.pytorch.callbacks.EarlyStopping",
        ),
        (
            {"callbacks": ["EarlyStopping"]},
            "trainer.callbacks[0]: 'EarlyStopping' is not a callback; give it as LightningCLI",
        ),
        (
            {"gradient_clip_algorithm": "max"},
            "trainer.gradient_clip_algorithm: Lightning refuses these Trainer options: "
            "`gradient_clip_algorithm` max is invalid. Allowed algorithms: ['value', 'norm'].",
        ),
        (
            {"limit_train_batches": 10, "val_check_interval": 20},
            "trainer.val_check_interval: 20 training batches is longer than an epoch "
            "(trainer.limit_train_batches: 10); set trainer.check_val_every_n_epoch: null",
        ),
        ({"max_steps": 10, "val_check_interval": 5}, None),
    ],
)
def test_a_bad_trainer_option_is_one_clear_message(trainer, message):
    if message is None:  # the control: a good option passes
        assert _sweep(**trainer).trainer.options == trainer
        return
    with pytest.raises(ConfigError) as raised:
        _sweep(**trainer)
    assert message in str(raised.value)


def test_owned_options_are_lightnings_own_arguments():
    assert set(OWNED) <= set(inspect.signature(Trainer.__init__).parameters)


def test_a_scheduler_that_compares_epochs_refuses_a_step_budget():
    data = {**BASE, "trainer": {"max_steps": 50}, "scheduler": {"type": "asha"}}
    with pytest.raises(ConfigError, match=r"scheduler.type: 'asha' compares trials at epoch ends"):
        validate_sweep(data)


@pytest.mark.parametrize(
    ("trainer", "needle"),
    [
        ({"max_step": 60}, "trainer.max_step: unknown field, and not an argument of"),
        ({"gradient_clip_val": "big"}, "trainer.gradient_clip_val: 'big' is not of type"),
        ({"devices": 2}, "trainer.devices: versatil owns this Trainer option"),
        ({"callbacks": [{"class_path": "nowhere.Cb"}]}, "'nowhere.Cb' does not import"),
    ],
)
def test_the_cli_refuses_a_bad_option_with_exit_2_and_starts_nothing(
    trainer, needle, tmp_path, capsys
):
    sweep = {**BASE, "trainer": trainer, "storage_path": str(tmp_path / "runs")}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    assert run_main(main, ["--config", str(path)]) == 2
    captured = capsys.readouterr()
    assert needle in captured.err and "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1  # one paragraph
    assert not (tmp_path / "runs").exists()  # nothing started
