"""One home for names: run names unique within a sweep, experiment directories parsed back."""

import random

from versatil.sweep.vocab.names import (
    experiment_dir_name,
    experiment_names,
    int8_dir,
    int8_run_name,
    run_name,
    sweep_of,
)


def test_run_name_reads_settings_first_then_axes():
    axes = {"lr": 0.003, "precision": "bf16-mixed", "compile_mode": "none", "width": 64}
    assert run_name(axes, "t1") == "bf16-mixed/eager/lr=0.003/width=64"
    assert run_name({}, "t1") == "t1"
    assert run_name({"matmul_precision": None}, "t1") == "matmul_precision=none"


def test_sampled_values_keep_the_digits_that_tell_trials_apart():
    # 4 significant digits named two trials of a random lr alike: 0.003783 both.
    assert run_name({"lr": 0.0037834}, "a") != run_name({"lr": 0.0037831}, "b")
    assert run_name({"lr": 0.0037834}, "a") == "lr=0.0037834"
    rng = random.Random(0)
    lrs = [10 ** rng.uniform(-4, -2) for _ in range(1000)]
    assert len({run_name({"precision": "32", "lr": lr}, "x") for lr in lrs}) == len(set(lrs))


def test_experiment_directories_are_named_and_found_by_their_sweep():
    name = experiment_dir_name("quick", when=0)
    assert sweep_of(name) == "quick"
    assert sweep_of("quick-2fast-20261204-101500") == "quick-2fast"
    assert sweep_of("quick") is None and sweep_of("notes-2026") is None
    directories = [
        "quick-20261204-101500",
        "quick-2fast-20261204-101501",
        "quick-20261203-090000",
        ".compile_cache",
    ]
    found = experiment_names(directories, "quick")
    assert found == ["quick-20261203-090000", "quick-20261204-101500"]
    assert experiment_names([], "quick") == []


def test_int8_copies_share_one_suffix(tmp_path):
    assert int8_run_name("32/lr=0.003") == "32/lr=0.003/int8"
    assert int8_dir(tmp_path, "abc_00001") == tmp_path / "abc_00001-int8"
