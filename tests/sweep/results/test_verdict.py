"""The verdict: speeds against eager fp32, the recommendation within the tolerance."""

from versatil.status import TrialStatus
from versatil.sweep.results.verdict import make_verdict, verdict_table


def row(trial_id, precision, compile_mode, val_loss, speed, status=TrialStatus.COMPLETED):
    from versatil.sweep.results.rows import TrialRow

    return TrialRow(
        trial_id=trial_id,
        axes={"precision": precision, "compile_mode": compile_mode},
        status=status,
        objective=val_loss,
        metrics={"val_loss": val_loss, "samples_per_sec": speed},
        epochs=2,
    )


ROWS = [
    row("a", "32", "none", 0.200, 100.0),
    row("b", "bf16-mixed", "none", 0.2008, 180.0),  # within 1% of the best
    row("c", "bf16-true", "default", 0.260, 400.0),  # fastest, but 30% worse
    row("d", "32", "default", 0.199, 120.0),  # the best val_loss
    row("e", "64", "none", 0.150, 999.0, TrialStatus.STOPPED),  # did not finish
]


def test_recommends_the_fastest_within_tolerance_against_eager_fp32():
    verdict = make_verdict(ROWS, "val_loss", "min", tolerance=0.01)
    assert verdict.recommended == "b" and verdict.is_baseline
    assert verdict.text.startswith(
        "Recommended: bf16-mixed + eager trains 1.80x faster than eager fp32 (32 + eager) "
        "at val_loss +0.4%; it is the fastest finished trial (b) within 1.0% of the best "
        "val_loss (0.199)."
    )
    speeds = {s.label: s for s in verdict.settings}
    assert speeds["bf16-true + default"].speedup == 4.0
    assert verdict.settings[0].label == "bf16-true + default"
    assert "1.80x" in verdict_table(verdict)


def test_a_wider_tolerance_picks_a_faster_worse_trial():
    verdict = make_verdict(ROWS, "val_loss", "min", tolerance=0.5)
    assert verdict.recommended == "c"
    assert "trains 4.00x faster than eager fp32 (32 + eager) at val_loss +30.0%" in verdict.text


def test_without_a_baseline_it_says_so_and_compares_with_the_slowest():
    rows = [r for r in ROWS if r.trial_id != "a"]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.01)
    assert not verdict.is_baseline
    assert verdict.text.startswith("No eager fp32 baseline")
    assert "relative to the slowest finished setting, 32 + default" in verdict.text
    assert "bf16-mixed + eager trains 1.50x faster than 32 + default" in verdict.text


def test_the_baseline_itself_and_a_max_objective():
    rows = [
        row("a", "32", "none", 0.9, 100.0),
        row("b", "bf16-mixed", "none", 0.5, 200.0),
    ]
    rows = [
        r.__class__(**{**r.__dict__, "metrics": {"acc": r.objective, **r.metrics}}) for r in rows
    ]
    verdict = make_verdict(rows, "acc", "max", tolerance=0.01)
    assert verdict.recommended == "a"
    assert "the eager fp32 baseline itself" in verdict.text


def test_nothing_finished():
    verdict = make_verdict([ROWS[-1]], "val_loss", "min")
    assert verdict.recommended is None and "nothing to recommend" in verdict.text


def test_changes_read_as_percentages():
    from versatil.sweep.results.verdict import percent

    assert [percent(c) for c in (0.3, 0.004, 0.0018, -5.2e-8, 0.0)] == [
        "+30.0%",
        "+0.4%",
        "+0.18%",
        "-0.00%",
        "+0.00%",
    ]


def test_the_recommended_trial_names_the_other_axes_that_vary():
    rows = [
        row("a", "32", "none", 0.2, 100.0),
        row("b", "bf16-mixed", "none", 0.2, 200.0),
        row("c", "bf16-mixed", "none", 0.3, 300.0),
    ]
    for r, lr in zip(rows, (0.01, 0.01, 0.1), strict=True):
        r.axes.update(lr=lr, depth=2)
    verdict = make_verdict(rows, "val_loss", "min")
    # The setting's speed (the median of its two trials), not the one trial's.
    assert verdict.text.startswith("Recommended: bf16-mixed + eager (lr=0.01) trains 2.50x")


def test_a_setting_is_never_compared_with_itself():
    # No eager fp32 trial finished; the best trial is of the slowest setting, the reference.
    rows = [
        row("a", "bf16-mixed", "none", 0.176, 100.0),
        row("b", "bf16-mixed", "none", 0.176, 102.0),
        row("c", "bf16-true", "none", 0.300, 150.0),
    ]
    rows[1].axes["lr"] = 0.2
    rows[0].axes["lr"] = 0.1
    rows[2].axes["lr"] = 0.1
    verdict = make_verdict(rows, "val_loss", "min")
    assert "relative to the slowest finished setting, bf16-mixed + eager" in verdict.text
    assert "Recommended: bf16-mixed + eager (lr=0.2), that setting itself" in verdict.text
    assert "faster than bf16-mixed + eager" not in verdict.text
