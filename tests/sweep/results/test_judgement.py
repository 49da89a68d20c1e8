"""The judged summary: the legend says which trials the front leaves out; the front plot."""

from versatil.status import TrialStatus
from versatil.sweep.results.judgement import judge, summary_text
from versatil.sweep.results.plots import ExtraPoint, plot_front
from versatil.sweep.results.rows import TrialRow

OBJECTIVES = [("val_loss", "min"), ("samples_per_sec", "max")]


def row(trial_id, precision, val_loss, speed, status=TrialStatus.COMPLETED):
    return TrialRow(
        trial_id=trial_id,
        axes={"precision": precision, "compile_mode": "none"},
        status=status,
        objective=val_loss,
        metrics={"val_loss": val_loss, "samples_per_sec": speed, "peak_memory_mb": 10.0},
        epochs=2,
    )


ROWS = [
    row("a", "32", 0.20, 100.0),
    row("b", "bf16-mixed", 0.21, 200.0),
    row("c", "64", 0.30, 50.0),
    row("d", "bf16-true", 0.01, 900.0, TrialStatus.STOPPED),
]


def test_the_summary_ranks_the_front_says_what_it_left_out_and_ends_with_the_verdict():
    judgement = judge(ROWS, OBJECTIVES, tolerance=0.01)
    assert judgement.best.trial_id == "a"
    assert judgement.marks == {"a": "*", "b": "P"}
    tags = judgement.child_tags()
    assert tags["d"] == {"versatil.pareto": "false"}
    assert tags["c"]["versatil.pareto"] == "false" and tags["c"]["versatil.pareto_level"] == "2"
    assert {tags[t]["versatil.pareto_rank"] for t in "ab"} == {"1", "2"}
    text = summary_text(ROWS, judgement)
    assert (
        "left out of the front: 1 trial(s) stopped early by the scheduler did not finish (d)"
        in (text)
    )
    assert text.rstrip().endswith(judgement.verdict.text)
    assert judgement.verdict.recommended == "a"


def test_single_objective_keeps_its_marks_and_gets_no_pareto_tags():
    judgement = judge(ROWS, OBJECTIVES[:1], tolerance=0.01)
    assert judgement.ranking is None and judgement.child_tags() == {}
    # A trial stopped early trained less: it is neither best nor on the front, however good.
    assert judgement.best.trial_id == "a"
    assert judgement.marks == {"a": "*", "b": "P"}


def test_the_front_plot_takes_extra_labelled_points(tmp_path):
    judgement = judge(ROWS, OBJECTIVES, tolerance=0.01)
    extra = [ExtraPoint("int8 (a)", {"val_loss": 0.22, "samples_per_sec": 150.0})]
    path = plot_front(ROWS, judgement.ranking, tmp_path / "front.png", extra)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    three = judge(ROWS, [*OBJECTIVES, ("peak_memory_mb", "min")], tolerance=0.01)
    assert plot_front(ROWS, three.ranking, tmp_path / "front3.png").is_file()


def test_a_trial_off_the_front_but_inside_the_noise_is_marked():
    def timed(trial_id, val_loss, speed, noise):
        r = row(trial_id, "32", val_loss, speed)
        r.metrics.update(
            samples_per_sec_ci_low=speed * (1 - noise), samples_per_sec_ci_high=speed * (1 + noise)
        )
        return r

    rows = [
        timed("a", 0.200, 100.0, 0.02),
        timed("b", 0.2005, 98.0, 0.05),  # dominated by a, but within 1% and the intervals
        timed("c", 0.300, 60.0, 0.02),  # beaten beyond noise on both
    ]
    judgement = judge(rows, OBJECTIVES[:1], tolerance=0.01)
    assert judgement.marks == {"a": "*", "b": "~"}
    assert judgement.front == {"a"}
    assert "~ within noise of it" in summary_text(rows, judgement)
