"""Tasks: the built-in reaching task and user tasks named "package.module:factory"."""

import pytest
import torch

from versatil.errors import ConfigError
from versatil.training.tasks import build_task, load_task, resolve_params
from versatil.training.tasks.reaching import (
    BehaviorCloningPolicy,
    ReachingDemonstrations,
    expert_action,
    generate_demonstrations,
)


def test_demonstrations_are_deterministic_per_seed():
    a = generate_demonstrations(8, 10, 0.1, seed=3)
    b = generate_demonstrations(8, 10, 0.1, seed=3)
    c = generate_demonstrations(8, 10, 0.1, seed=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    assert a[0].shape == (8, 10, 6) and a[1].shape == (8, 10, 2)


def test_labels_are_the_expert_actions_and_the_expert_reaches_the_goal():
    obs, actions = generate_demonstrations(16, 80, 0.0, seed=0)
    assert torch.allclose(actions, expert_action(obs))
    start = (obs[:, 0, 4:6] - obs[:, 0, 0:2]).norm(dim=-1)
    end = (obs[:, -1, 4:6] - obs[:, -1, 0:2]).norm(dim=-1)
    assert (end < 0.1 * start + 0.02).all()


def test_input_stats_come_from_the_training_split():
    _, datamodule = build_task("reaching", {"n_episodes": 10, "horizon": 5})
    datamodule.setup("fit")
    train_obs = datamodule.train_set.tensors[0]
    assert len(datamodule.train_set) == 8 * 5 and len(datamodule.val_set) == 2 * 5
    assert torch.allclose(torch.tensor(datamodule.input_stats["mean"]), train_obs.mean(0))


def test_builtin_task_params_shape_the_model():
    model, datamodule = build_task("reaching", {"width": 16, "depth": 3})
    assert isinstance(model, BehaviorCloningPolicy) and isinstance(
        datamodule, ReachingDemonstrations
    )
    linears = [m for m in model.policy if isinstance(m, torch.nn.Linear)]
    assert [layer.out_features for layer in linears] == [16, 16, 16, 2]


def test_resolve_params_fills_defaults():
    params = resolve_params("reaching", {"width": 8})
    assert params["width"] == 8 and params["depth"] == 2 and params["eps"] == 1e-8


def test_user_task_loads_by_module_and_factory():
    model, datamodule = build_task("tests.training.toy_task:build", {"hidden": 5})
    assert type(model).__name__ == "ToyRegressor" and model.net[0].out_features == 5
    assert type(datamodule).__name__ == "ToyData"


def test_bad_task_params_name_field_value_and_choices():
    with pytest.raises(ConfigError) as error:
        build_task("reaching", {"widht": 3, "depth": 0})
    message = str(error.value)
    assert "task.params.widht: unknown field; valid fields: n_episodes, horizon" in message
    assert "task.params.depth: 0 is invalid: Input should be greater than or equal to 1" in message


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("no.such.module:build", "cannot be imported (no module named 'no')"),
        (
            "versatil.training.tasks.reaching:missing",
            "names no callable 'missing' in module 'versatil.training.tasks.reaching'",
        ),
        ("reachin", "is not a built-in task nor of the form 'package.module:factory'"),
    ],
)
def test_bad_task_path_is_one_clear_error(spec, problem):
    with pytest.raises(ConfigError) as error:
        load_task(spec)
    assert str(error.value) == (
        f"task: {spec!r} {problem}; use a built-in task (reaching) or "
        "'package.module:factory' naming an importable callable"
    )
