"""A sweep that compares settings without eager fp32 says which setting is its reference."""

import io

import yaml

from versatil.sweep.config.load import load_sweep
from versatil.sweep.config.reference import reference_note, reference_settings


def write(tmp_path, space):
    path = tmp_path / "sweep.yaml"
    data = {"name": "t", "task": {"name": "reaching"}, "space": space,
            "search": {"algorithm": "random", "num_samples": 2}}  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_space_without_eager_fp32_notes_its_reference_at_load(tmp_path, capsys):
    path = write(tmp_path, {"precision": ["bf16-mixed", "16-true"], "compile_mode": ["default"]})
    notes = io.StringIO()
    config = load_sweep(path, notes=notes)
    assert reference_settings(config) == {"precision": "bf16-mixed", "compile_mode": "default"}
    assert notes.getvalue() == (
        "note: space.precision has no 32, space.compile_mode has no none: this sweep has no "
        "eager fp32 baseline; its reference is bf16-mixed + default, each of those axes at "
        "its first listed value\n"
    )
    load_sweep(path)  # by default on standard error, as the command's warnings
    captured = capsys.readouterr()
    assert captured.err == notes.getvalue() and captured.out == ""


def test_the_note_names_only_the_axes_that_leave_eager_fp32_out(tmp_path):
    path = write(tmp_path, {"precision": ["bf16-mixed", "32"], "matmul_precision": ["high"]})
    notes = io.StringIO()
    config = load_sweep(path, notes=notes)
    assert reference_settings(config) == {"precision": "32", "matmul_precision": "high"}
    assert notes.getvalue().startswith("note: space.matmul_precision has no highest: ")
    assert "its reference is 32 + eager + matmul high, each of" in notes.getvalue()


def test_no_note_with_eager_fp32_or_a_single_setting(tmp_path):
    for space in (
        {"precision": ["bf16-mixed", "32"], "compile_mode": ["default", "none"]},
        {"precision": ["bf16-mixed"], "lr": {"loguniform": [1e-4, 1e-2]}},  # compares none
        {"lr": {"choice": [0.1, 0.2]}},
    ):
        notes = io.StringIO()
        config = load_sweep(write(tmp_path, space), notes=notes)
        assert notes.getvalue() == "" and reference_note(config) is None
