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


def test_the_summary_leads_with_the_verdict_ranks_the_front_and_says_what_it_left_out():
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
    assert text.startswith(judgement.verdict.text)
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


def timed_row(trial_id, precision, compile_mode, val_loss, speed, noise=0.01):
    r = row(trial_id, precision, val_loss, speed)
    r.axes["compile_mode"] = compile_mode
    r.metrics.update(
        samples_per_sec_median=speed,
        samples_per_sec_ci_low=speed * (1 - noise),
        samples_per_sec_ci_high=speed * (1 + noise),
        throughput_windows=8.0,
    )
    return r


def test_one_answer_the_best_line_and_the_mark_are_the_recommended_trial():
    # b is 1.5x eager fp32 and within 1% of its val_loss; c has the best val_loss but is
    # no faster: the answer is b, and the summary says why c is not it.
    rows = [
        timed_row("a", "32", "none", 0.2000, 100.0),
        timed_row("b", "bf16-mixed", "none", 0.2010, 150.0),
        timed_row("c", "64", "none", 0.1990, 60.0),
    ]
    judgement = judge(rows, OBJECTIVES[:1], tolerance=0.01)
    assert judgement.verdict.recommended == "b"
    assert judgement.best.trial_id == "b" and judgement.best_objective.trial_id == "c"
    assert judgement.marks["b"] == "*" and judgement.marks["c"] == "P"
    assert judgement.front == {"a", "b", "c"}
    text = summary_text(rows, judgement)
    assert text.startswith(judgement.verdict.text)
    assert "* the recommended trial" in text
    assert (
        "best val_loss: c (64 + eager, val_loss=0.199), not the answer: 64 + eager is not "
        "faster than 32 + eager beyond noise (slower)"
    ) in text


def test_the_reference_with_the_best_objective_is_explained_against_the_faster_answer():
    rows = [
        timed_row("a", "32", "none", 0.2000, 100.0),
        timed_row("b", "bf16-mixed", "none", 0.2010, 150.0),
    ]
    judgement = judge(rows, OBJECTIVES[:1], tolerance=0.01)
    assert judgement.best.trial_id == "b" and judgement.marks == {"b": "*", "a": "P"}
    assert (
        "not the answer: bf16-mixed + eager is faster (1.50x 32 + eager) and its val_loss is "
        "no worse, within the 1.0% tolerance"
    ) in summary_text(rows, judgement)


def test_no_note_when_the_best_objective_is_the_answer():
    rows = [timed_row("a", "32", "none", 0.2000, 100.0), timed_row("b", "64", "none", 0.3, 50.0)]
    judgement = judge(rows, OBJECTIVES[:1], tolerance=0.01)
    assert judgement.best.trial_id == "a" and judgement.best_objective is None
    assert "not the answer" not in summary_text(rows, judgement)
