"""Which trials ``compress`` picks, and the sweep file's ``post_training`` section."""

import math

import pytest

from versatil.errors import ConfigError
from versatil.status import TrialStatus
from versatil.sweep.config.load import load_sweep, validate_sweep
from versatil.sweep.config.post_training import Selection
from versatil.sweep.int8.selection import select_pareto, select_top, select_trials
from versatil.sweep.results.ranking import summary_marks
from versatil.sweep.results.rows import TrialRow, finished


def row(trial_id, objective, speed, status=TrialStatus.COMPLETED):
    return TrialRow(
        trial_id=trial_id,
        axes={},
        status=status,
        objective=objective,
        metrics={"samples_per_sec": speed} if speed is not None else {},
        epochs=2,
    )


ROWS = [
    row("a", 0.10, 100.0),  # best objective
    row("b", 0.20, 300.0),  # faster, worse: on the front
    row("c", 0.25, 200.0),  # dominated by b
    row("d", 0.10, 150.0),  # ties a on objective, faster: dominates a
    row("e", 0.05, 50.0, TrialStatus.INFEASIBLE),  # not finished: never picked
    row("f", math.nan, 900.0),  # no finite objective: never picked
    row("g", 0.30, 400.0, TrialStatus.STOPPED),  # stopped early: finished, but not compared
]


def ids(rows):
    return [r.trial_id for r in rows]


def test_finished_trials_are_completed_or_stopped_with_a_finite_objective():
    assert ids([r for r in ROWS if finished(r)]) == ["a", "b", "c", "d", "g"]


def test_pareto_is_the_non_dominated_set_and_the_reports_marks():
    # g trained less (stopped by the scheduler): it is not compared with whole budgets.
    assert ids(select_pareto(ROWS, "min")) == ["b", "d"]
    # The trials the report marks * or P (without a tie for best, which the report
    # breaks by trial order).
    untied = [r for r in ROWS if r.trial_id != "a"]
    assert set(ids(select_pareto(untied, "min"))) == set(summary_marks(untied, "min"))
    # Maximizing: c has the highest objective, b is faster.
    assert ids(select_pareto(ROWS, "max")) == ["b", "c"]
    # select_trials lists the front best objective first.
    assert ids(select_trials(ROWS, "min", Selection("pareto"))) == ["d", "b"]


def test_top_k_ranks_by_objective_and_breaks_ties_by_throughput():
    assert ids(select_top(ROWS, "min", 2)) == ["d", "a"]
    assert ids(select_top(ROWS, "max", 2)) == ["c", "b"]
    assert ids(select_top(ROWS, "min", 50)) == ["d", "a", "b", "c"]
    tie = [row("x", 0.1, None), row("y", 0.1, 10.0)]
    assert ids(select_top(tie, "min", 1)) == ["y"]  # a throughput beats none
    assert ids(select_trials(ROWS, "min", Selection("top", k=1))) == ["d"]
    assert ids(select_trials(ROWS, "min", Selection("trial", trial_id="c"))) == ["c"]
    assert select_trials(ROWS, "min", Selection("trial", trial_id="e")) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("pareto", Selection("pareto")),
        ("best", Selection("top", k=1)),
        ({"top": 3}, Selection("top", k=3)),
        ("none", None),
        (None, None),
    ],
)
def test_post_training_int8_choices(value, expected):
    config = validate_sweep({"name": "s", "post_training": {"int8": value}})
    assert config.post_training.selection() == expected
    assert validate_sweep({"name": "s"}).post_training.selection() is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "int8: paretto",
            "post_training.int8: 'paretto' is not a choice: use one of pareto, best, none, "
            "or {top: K} with an integer K >= 1",
        ),
        (
            "int8: {top: 0}",
            "post_training.int8: top 0 is not a number of trials: use one of pareto, best, "
            "none, or {top: K} with an integer K >= 1",
        ),
        ("int8: {top: 2, k: 1}", "post_training.int8: {'top': 2, 'k': 1} is not a choice"),
        ("int4: best", "post_training.int4: unknown field; valid fields: int8"),
    ],
)
def test_a_bad_post_training_section_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: s\npost_training: {{{text}}}\n")
    with pytest.raises(ConfigError) as error:
        load_sweep(path)
    assert str(error.value).startswith(f"{path}: {message}")
    assert "\n" not in str(error.value)


def test_int8_runs_become_plot_points_with_their_objective_and_inference_speed():
    from types import SimpleNamespace

    from versatil.sweep.report.load import Int8Row
    from versatil.sweep.report.plots import int8_extra_points

    def row(trial, metrics):
        return Int8Row(trial, "r-" + trial, "p-" + trial, "torch.ao", "mlflow", metrics)

    report = SimpleNamespace(
        context=SimpleNamespace(objective="val_loss"),
        int8=[
            row("a", {"int8/val_loss": 0.03, "int8/samples_per_sec": 900.0, "fp32/val_loss": 0.02}),
            row("b", {"int8/val_loss": float("nan"), "int8/samples_per_sec": 800.0}),
            row("c", {"int8/samples_per_sec": 700.0}),
        ],
    )
    (point,) = int8_extra_points(report)
    assert point.label == "a INT8 (torch.ao, inference)"
    assert point.values["val_loss"] == 0.03 and point.values["samples_per_sec"] == 900.0
    assert "fp32/val_loss" not in point.values
