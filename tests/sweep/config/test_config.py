"""Sweep files: every shipped file is a test case; bad files get one clear message."""

import os
from pathlib import Path

import pytest
import yaml

from versatil.cli_common import parse_assignment
from versatil.errors import ConfigError
from versatil.sweep.cli.main import main
from versatil.sweep.config.load import apply_overrides, load_sweep, validate_sweep
from versatil.sweep.config.shipped import resolve_config, shipped_sweeps
from versatil.sweep.config.trials import expand_trials

SWEEPS = sorted((Path(__file__).resolve().parents[3] / "sweeps").glob("*.yaml"))
EXPECTED_TRIALS = {
    "quickstart": 16,
    "precision_matrix": 90,
    "asha_lr": 16,
    "pbt": 4,
    "frontier": 8,
    "gpu": 8,
}


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
    assert "plan (logged as plan.json on the sweep's parent run):" in out
    assert f"search: {config.search.algorithm}, " in out and "  reference: " in out
    if config.objective.is_multi:
        assert "objectives, ranked as a Pareto set: val_loss (min), samples_per_sec (max)" in out


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
    assert len(combos) == len(trials) == 4 * 2 * 2


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
        "search.algorithm: 'bayes' is invalid: Input should be 'grid', 'random', 'optuna' or "
        "'race'",
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


def test_shipped_sweeps_are_found_where_the_package_runs():
    assert shipped_sweeps() == {p.stem: p for p in SWEEPS}


@pytest.mark.parametrize("value", ["asha_lr", "asha_lr.yaml"])
def test_config_names_a_shipped_sweep(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config(value) == shipped_sweeps()["asha_lr"]
    assert resolve_config(None) == shipped_sweeps()["quickstart"]


def test_an_existing_path_wins_over_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pbt").write_text("name: mine\n")
    assert resolve_config("pbt") == Path("pbt")
    assert load_sweep(resolve_config("pbt")).name == "mine"


def test_an_unknown_config_name_lists_the_shipped_sweeps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        resolve_config("asha")
    assert str(error.value) == (
        "--config: 'asha' is neither a sweep file nor a shipped sweep; "
        "shipped sweeps: asha_lr, frontier, gpu, pbt, precision_matrix, quickstart"
    )
    with pytest.raises(ConfigError, match=r"^--config: sweep file 'no/such\.yaml' does not exist$"):
        resolve_config("no/such.yaml")


@pytest.mark.parametrize(
    "name",
    [
        "../../etc",
        "a/b",
        "/abs",
        "",
        "   ",
        "a b",
        "x\n",
        "tab\there",
        ".hidden",
        "-x",
        "é",
        "a" * 101,
    ],
)
@pytest.mark.parametrize("field", ["name", "mlflow.experiment"])
def test_unsafe_names_are_rejected_with_field_value_and_rule(field, name):
    data = {"name": "x", "mlflow": {"experiment": name}} if "." in field else {"name": name}
    with pytest.raises(ConfigError) as error:
        validate_sweep(data)
    assert str(error.value) == (
        f"sweep: {field}: {name!r} is not a valid name: use letters, digits, '.', '_' and '-', "
        "starting with a letter or digit, at most 100 characters"
    )


@pytest.mark.parametrize("name", ["x", "asha_lr", "v1.2-rc_3", "A" * 100, "0start"])
def test_safe_names_are_accepted(name):
    config = validate_sweep({"name": name, "mlflow": {"experiment": name}})
    assert config.experiment_name == name


def test_enum_axes_accept_lightnings_aliases_as_canonical_values():
    config = validate_sweep(
        {
            "name": "x",
            "space": {
                "precision": ["bf16", "bf16-mixed", "32-true", 16, 64, "BF16-True"],
                "compile_mode": ["None", "default", None],
                "matmul_precision": {"values": "all", "exclude": ["medium"]},
            },
        }
    )
    assert config.space["precision"] == ["bf16-mixed", "32", "16-mixed", "64", "bf16-true"]
    assert config.space["compile_mode"] == ["none", "default"]
    assert config.space["matmul_precision"] == ["highest", "high"]
    excluded = validate_sweep({"name": "x", "space": {"precision": {"exclude": ["bf16", 16]}}})
    assert excluded.space["precision"] == ["32", "16-true", "bf16-true", "64"]


@pytest.mark.parametrize("value", [None, "8", "bf16-mix", "fp32", [32]])
def test_a_precision_that_is_no_alias_is_rejected(value):
    with pytest.raises(ConfigError) as error:
        validate_sweep({"name": "x", "space": {"precision": [value]}})
    shown = repr(str(value) if isinstance(value, int) else value)
    assert str(error.value) == (
        f"sweep: space.precision: {shown} is not a PrecisionType valid for training; "
        "choose from 32, 16-mixed, bf16-mixed, 16-true, bf16-true, 64"
    )


def test_an_unknown_field_lists_the_fields_of_its_own_section():
    with pytest.raises(ConfigError) as error:
        validate_sweep({"name": "x", "trainer": {"max_epoch": 2}})
    # The trainer section also takes Lightning's Trainer arguments: both are listed.
    assert str(error.value).startswith(
        "sweep: trainer.max_epoch: unknown field, and not an argument of "
        "lightning.pytorch.Trainer (did you mean 'max_epochs'?); valid: the section's fields "
        "(max_epochs, accelerator, seed, compile_cache) and Lightning's Trainer arguments "
        "(accumulate_grad_batches, "
    )
    with pytest.raises(ConfigError) as error:
        validate_sweep({"name": "x", "resources": {"cpus": 2}})
    assert str(error.value) == (
        "sweep: resources.cpus: unknown field; valid fields: cpu, gpu, workers_per_trial"
    )


def test_overrides_copy_only_what_they_change_and_name_bad_keys():
    data = {"name": "s", "trainer": {"max_epochs": 5}, "space": {"lr": [1]}}
    result = apply_overrides(data, {"trainer.max_epochs": 2, "search.seed": 3})
    assert result["trainer"] == {"max_epochs": 2} and result["search"] == {"seed": 3}
    assert data == {"name": "s", "trainer": {"max_epochs": 5}, "space": {"lr": [1]}}
    assert result["space"] is data["space"]
    with pytest.raises(ConfigError, match=r"^--set name\.x: name is not a section; it holds 's'$"):
        apply_overrides(data, {"name.x": 1})
    with pytest.raises(ConfigError, match=r"^--set space\.lr\.choice: space\.lr is not a section"):
        apply_overrides(data, {"space.lr.choice": 1})
    for key in ("trainer..max_epochs", ".x", "x.", "a. .b"):
        with pytest.raises(ConfigError, match="empty name in the dotted key"):
            apply_overrides(data, {key: 1})


def test_bad_override_syntax_is_a_config_error():
    assert parse_assignment("trainer.max_epochs=2") == ("trainer.max_epochs", 2)
    for text in ("max_epochs", "=2", " =2"):
        with pytest.raises(ConfigError, match="is not of the form key=value"):
            parse_assignment(text)
    with pytest.raises(ConfigError) as error:
        parse_assignment("lr=[1, 2")
    assert str(error.value) == (
        "override 'lr=[1, 2': the value '[1, 2' is not valid YAML (line 1, column 6: "
        "expected ',' or ']', but got '<stream end>' (while parsing a flow sequence))"
    )


def write(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_bytes(content)
    return path


def test_files_that_cannot_be_used_name_the_path_and_the_reason(tmp_path):
    label = f"sweep file '{tmp_path}"
    with pytest.raises(ConfigError, match=f"^{label}' is a directory, not a sweep file$"):
        load_sweep(tmp_path)
    os.mkfifo(tmp_path / "fifo")  # stat only: opening a FIFO with no writer would block
    with pytest.raises(ConfigError, match=f"^{label}/fifo' is not a regular file$"):
        load_sweep(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(ConfigError, match=f"^{label}/loop' cannot be read: Too many levels"):
        load_sweep(tmp_path / "loop")
    with pytest.raises(ConfigError, match=f"^{label}/sweep.yaml' is not UTF-8 text: byte 0xff at"):
        load_sweep(write(tmp_path, b"name: caf\xff\n"))
    with pytest.raises(ConfigError, match=f"^{label}/sweep.yaml' is empty; a sweep file is a map"):
        load_sweep(write(tmp_path, b"# nothing\n"))
    with pytest.raises(
        ConfigError, match=r"must hold a mapping \(name: \.\.\., space: \.\.\.\), not"
    ):
        load_sweep(write(tmp_path, b"- name: x\n"))
    with pytest.raises(ConfigError, match="is larger than 1000000 bytes"):
        load_sweep(write(tmp_path, b"#" * 1_000_001))
    with pytest.raises(ConfigError) as error:
        load_sweep(write(tmp_path, b"name: [x\n"))
    assert str(error.value).endswith(
        "is not valid YAML: line 2, column 1: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence)"
    )


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc")
def test_a_file_whose_read_fails_is_a_config_error():
    # Readable by its mode, even for root, but reading it fails (EIO at address 0).
    with pytest.raises(ConfigError) as error:
        load_sweep("/proc/self/mem")
    assert str(error.value) == "sweep file '/proc/self/mem' cannot be read: Input/output error"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nresources: {cpu: .inf}\n", "resources.cpu: inf is not a finite number"),
        ("name: x\nspace: {lr: {choice: [1, .nan]}}\n", "space.lr.choice[1]: nan is not a finite"),
        ("name: x\nscheduler: {reduction_factor: '-inf'}\n", "'-inf' is invalid: Input should be"),
        ("name: x\nsearch: {seed: -1}\n", "search.seed: -1 is out of range; use 0 to 4294967295"),
        ("name: x\ntrainer: {seed: 4294967296}\n", "trainer.seed: 4294967296 is out of range"),
        ("name: x\nsearch: {num_samples: 10001}\n", "search.num_samples: 10001 samples of 1 grid"),
        ("name: x\nspace: {lr: {grid: [1, 2]}}\nsearch: {num_samples: 5001}\n", "of 2 grid combi"),
        ("name: x\nspace: {lr: {uniform: [2, 1]}}\n", "space.lr: uniform needs low < high"),
        ("name: x\ntask: {params: {a: &a [*a]}}\n", "task.params.a[0][0]"),
        ("name: x\n" + "a: [" * 40 + "]" * 40 + "\n", "nests deeper than 32 levels"),
        ("name: x\nspace: {a: " + "[" * 1000 + "]" * 1000 + "}\n", "nests deeper than 32 levels"),
        (
            "name: x\nseed: " + "9" * 5000 + "\n",
            "is not valid YAML: Exceeds the limit (4300 digits)",
        ),
        ("name: x\n1: 2\n", "1: 1 is invalid: Keys should be strings"),
    ],
)
def test_values_no_sweep_needs_are_named(tmp_path, text, message):
    with pytest.raises(ConfigError) as error:
        load_sweep(write(tmp_path, text.encode()))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_aliases_that_expand_without_bound_are_rejected(tmp_path):
    lines = ["name: x", "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(ConfigError, match="holds more than 100000 values"):
        load_sweep(write(tmp_path, "\n".join(lines).encode()))


def test_several_objectives_and_the_single_form():
    single = validate_sweep({"name": "x", "objective": {"metric": "val_loss", "mode": "min"}})
    assert single.objective.objectives == [("val_loss", "min")]
    assert not single.objective.is_multi and single.objective.tolerance == 0.01
    multi = validate_sweep(
        {
            "name": "x",
            "objective": {"metrics": {"val_loss": "min", "samples_per_sec": "max"}},
            "scheduler": {"type": "asha"},
        }
    )
    assert multi.objective.objectives == [("val_loss", "min"), ("samples_per_sec", "max")]
    assert (multi.objective.metric, multi.objective.mode) == ("val_loss", "min")
    assert multi.scheduler_objective == ("val_loss", "min")
    # What a sweep logs as sweep.yaml loads again.
    assert validate_sweep(multi.model_dump(mode="json")) == multi


@pytest.mark.parametrize(
    ("objective", "scheduler", "message"),
    [
        ({"metrics": {"val_loss": "low"}}, {}, "objective.metrics.val_loss: 'low' is invalid"),
        ({"metrics": {}}, {}, "objective.metrics: {} names no metric"),
        (
            {"metric": "acc", "metrics": {"val_loss": "min"}},
            {},
            "objective.metric: 'acc' is not the first of objective.metrics (val_loss: min)",
        ),
        ({"tolerance": -0.1}, {}, "objective.tolerance: -0.1 is invalid"),
        (
            {"metrics": {"val_loss": "min", "samples_per_sec": "max"}},
            {"type": "asha", "metric": "val_los"},
            "scheduler.metric: 'val_los' is not an objective metric (did you mean 'val_loss'?); "
            "choose from val_loss, samples_per_sec",
        ),
        ({}, {"metric": "val_loss"}, "scheduler.metric: 'val_loss' is not used by scheduler fifo"),
    ],
)
def test_bad_objectives_name_field_value_and_choices(objective, scheduler, message):
    with pytest.raises(ConfigError) as error:
        validate_sweep({"name": "x", "objective": objective, "scheduler": scheduler})
    assert message in str(error.value)


def test_a_missing_objective_names_every_missing_metric():
    from versatil.sweep.config.planning import make_plan
    from versatil.sweep.worker.reports import missing_objective

    config = make_plan(
        validate_sweep({"name": "x", "objective": {"metrics": {"val_loss": "min", "acc": "max"}}})
    ).trial
    assert missing_objective(config, {"val_loss": 0.1, "acc": 0.9}, ["val_loss", "acc"]) is None
    failed = missing_objective(config, {"val_loss": 0.1}, ["val_loss"])
    assert failed["status"] == "failed" and failed["stops_sweep"]
    assert failed["reason"].startswith(
        "objective.metrics: 'acc' was not logged by the module in epoch 0; it logged val_loss"
    )
    assert failed["val_loss"] == float("inf") and failed["acc"] == float("-inf")


def test_replicates_are_validated_with_field_value_and_choices():
    base = {"name": "r", "task": {"name": "reaching"}, "space": {"lr": 0.01}}
    assert validate_sweep(base).replicates == 1
    config = validate_sweep({**base, "replicates": 3, "trainer": {"seed": 5}})
    assert config.replicate_seeds() == [5, 6, 7] and config.axis_names == ["lr", "seed"]
    with pytest.raises(ConfigError, match=r"replicates: .*greater than or equal to 1"):
        validate_sweep({**base, "replicates": 0})
    with pytest.raises(ConfigError, match=r"replicates: 2 .* an axis 'seed'; remove one"):
        validate_sweep({**base, "replicates": 2, "space": {"seed": {"grid": [0, 1]}}})
    pbt = {"type": "pbt", "hyperparam_mutations": {"lr": {"uniform": [0.01, 0.1]}}}
    with pytest.raises(ConfigError, match=r"replicates: 2 cannot replicate PBT"):
        validate_sweep({**base, "replicates": 2, "scheduler": pbt})


def test_a_seed_axis_is_the_fits_seed_not_a_task_param():
    from versatil.sweep.config.checks import check_task
    from versatil.sweep.config.planning import make_plan

    config = validate_sweep(
        {"name": "r", "task": {"name": "reaching"}, "space": {"seed": {"grid": [3, 4]}}}
    )
    check_task(config)  # no "not a param of task" error
    run = make_plan(config).trial.train_config({"seed": 4, "precision": "32"})
    assert run.seed == 4 and "seed" not in run.params
    assert make_plan(config).trial.train_config({"precision": "32"}).seed == config.trainer.seed


def test_a_sweep_lists_the_compute_dtypes_its_device_can_run(sweep_config):
    from versatil.sweep.config.planning import make_plan
    from versatil.training.spec import DeviceInfo

    config = sweep_config(
        space={
            "precision": ["32", "16-mixed", "bf16-mixed", "64"],
            "matmul_precision": ["high", "highest"],
        }
    )
    cpu = DeviceInfo.detect("cpu")
    # 16-mixed cannot run on a CPU: its fp16 is not measured there.
    assert make_plan(config).trial.compute_dtypes(cpu) == [
        "fp32-high",
        "fp32-highest",
        "bf16",
        "fp64",
    ]
    assert make_plan(sweep_config()).trial.compute_dtypes(cpu) == ["fp32-highest"]
