"""Sweep files: every shipped file is a test case; bad files get one clear message."""

from pathlib import Path

import pytest
import yaml

from versatil.errors import ConfigError
from versatil.sweep.__main__ import main, parse_args
from versatil.sweep.config import load_sweep, validate_sweep
from versatil.sweep.space import expand_trials

SWEEPS = sorted((Path(__file__).resolve().parents[2] / "sweeps").glob("*.yaml"))
EXPECTED_TRIALS = {"quickstart": 24, "precision_matrix": 90, "asha_lr": 16, "pbt": 4}


def test_the_shipped_sweeps_are_all_here():
    assert sorted(p.stem for p in SWEEPS) == sorted(EXPECTED_TRIALS)


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_shipped_sweep_validates_and_dry_runs(path, capsys):
    config = load_sweep(path)
    assert config.name == path.stem
    assert len(expand_trials(config)) == EXPECTED_TRIALS[path.stem]
    assert main(["--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"sweep {path.stem!r}: {EXPECTED_TRIALS[path.stem]} trials" in out
    assert out.rstrip().endswith("nothing started")


def test_enum_axis_forms():
    config = validate_sweep(
        {
            "name": "x",
            "space": {
                "precision": "all",
                "compile_mode": {"values": "all", "exclude": ["reduce-overhead", "max-autotune"]},
                "matmul_precision": ["high"],
            },
        }
    )
    assert config.space["precision"] == [
        "32",
        "16-mixed",
        "bf16-mixed",
        "16-true",
        "bf16-true",
        "64",
    ]
    assert config.space["compile_mode"] == ["none", "default", "max-autotune-no-cudagraphs"]
    assert config.space["matmul_precision"] == ["high"]


def test_quickstart_grid_is_the_exact_cross_product():
    trials = expand_trials(load_sweep(SWEEPS[[p.stem for p in SWEEPS].index("quickstart")]))
    combos = {(t["precision"], t["compile_mode"], t["lr"]) for t in trials}
    assert len(combos) == len(trials) == 6 * 2 * 2


def test_unknown_enum_member_names_field_value_and_choices():
    with pytest.raises(ConfigError) as error:
        validate_sweep({"name": "x", "space": {"precision": ["bf16-mix"]}})
    assert str(error.value) == (
        "sweep: space.precision: 'bf16-mix' is not a PrecisionType valid for training; "
        "choose from 32, 16-mixed, bf16-mixed, 16-true, bf16-true, 64"
    )


def test_int8_is_not_valid_for_training_in_a_sweep():
    with pytest.raises(ConfigError, match=r"space\.precision: '8' is not a PrecisionType"):
        validate_sweep({"name": "x", "space": {"precision": [8]}})


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as error:
        validate_sweep(
            {
                "name": "x",
                "space": {"compile_mode": ["fast"], "lr": {"loguniform": [0, 1]}},
                "search": {"algorithm": "bayes"},
                "trainer": {"max_epochs": "three"},
                "colour": "red",
            }
        )
    message = str(error.value)
    for expected in (
        "space.compile_mode: 'fast' is not a CompileMode valid for training; choose from none, "
        "default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs",
        "space.lr: loguniform needs low > 0; got [0.0, 1.0]",
        "search.algorithm: 'bayes' is invalid: Input should be 'grid', 'random' or 'optuna'",
        "trainer.max_epochs: 'three' is invalid: Input should be a valid integer",
        "colour: unknown field; valid fields: name, task, objective, space,",
    ):
        assert expected in message
    assert "\n" not in message


def test_impossible_combinations_are_rejected():
    with pytest.raises(ConfigError, match="'optuna' cannot sample grid axes \\(lr\\)"):
        validate_sweep(
            {"name": "x", "space": {"lr": {"grid": [0.1]}}, "search": {"algorithm": "optuna"}}
        )
    with pytest.raises(ConfigError, match=r"hyperparam_mutations\.precision: settings axes cannot"):
        validate_sweep(
            {
                "name": "x",
                "scheduler": {
                    "type": "pbt",
                    "hyperparam_mutations": {"precision": {"choice": ["32"]}},
                },
            }
        )


def test_overrides_and_missing_files(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "trainer": {"max_epochs": 5}}))
    assert load_sweep(path, {"trainer.max_epochs": 2}).trainer.max_epochs == 2
    with pytest.raises(ConfigError, match=r"sweep file '.*nope\.yaml' does not exist"):
        load_sweep(tmp_path / "nope.yaml")
    path.write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_sweep(path)


def test_cli_flags_are_frozen():
    """New flags are a public-surface change: add them here on purpose."""
    parser_flags = set(vars(parse_args([])))
    assert parser_flags == {
        "config",
        "address",
        "storage_path",
        "tracking_uri",
        "resume",
        "dry_run",
        "overrides",
    }
