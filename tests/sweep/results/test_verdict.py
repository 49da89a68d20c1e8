"""The verdict: settings against eager fp32, a difference called only beyond its noise."""

import pytest

from versatil.status import TrialStatus
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.verdict import make_verdict, reference_objective
from versatil.sweep.results.verdict_text import percent, verdict_table


def row(trial_id, precision, compile_mode, val_loss, speed, noise=0.03, status=None, **axes):
    """A finished trial whose fit measured ``speed`` samples/s, its interval +-``noise``."""
    metrics = {"val_loss": val_loss, "samples_per_sec": speed}
    if noise is not None:
        metrics.update(
            samples_per_sec_median=speed,
            samples_per_sec_ci_low=speed * (1 - noise),
            samples_per_sec_ci_high=speed * (1 + noise),
            throughput_windows=8.0,
            throughput_too_short=0.0,
        )
    return TrialRow(
        trial_id=trial_id,
        axes={"precision": precision, "compile_mode": compile_mode, **axes},
        status=status or TrialStatus.COMPLETED,
        objective=val_loss,
        metrics=metrics,
        epochs=2,
    )


ROWS = [
    row("a", "32", "none", 0.200, 100.0),
    row("b", "bf16-mixed", "none", 0.2008, 180.0),  # within 1% of the baseline, 1.8x
    row("c", "bf16-true", "default", 0.260, 400.0),  # fastest, but 30% worse
    row("d", "32", "default", 0.199, 102.0, noise=0.10),  # 1.02x inside 10% noise: a tie
    row("e", "64", "none", 0.150, 999.0, status=TrialStatus.STOPPED),  # did not finish
]


def test_a_real_speedup_no_worse_is_recommended_with_its_interval():
    verdict = make_verdict(ROWS, "val_loss", "min", tolerance=0.01)
    assert verdict.recommended == "b" and verdict.is_baseline
    assert verdict.recommended_setting == "bf16-mixed + eager"
    assert verdict.text.startswith(
        "Recommended: bf16-mixed + eager: 1.80x eager fp32 (95% CI 1.70-1.91x); "
        "val_loss +0.4% (one seed): no worse (tolerance 1.0%)."
    )
    calls = {s.label: s.speed_call for s in verdict.settings}
    assert calls == {
        "32 + eager": "reference",
        "bf16-true + default": "faster",
        "bf16-mixed + eager": "faster",
        "32 + default": "tie",
    }
    worse = {s.label for s in verdict.settings if not s.no_worse}
    assert worse == {"bf16-true + default"}
    table = verdict_table(verdict)
    assert "1.80x" in table and "1.70-1.91" in table and "tie" in table


def test_a_wider_tolerance_lets_the_faster_worse_setting_win():
    verdict = make_verdict(ROWS, "val_loss", "min", tolerance=0.5)
    assert verdict.recommended == "c"
    assert "Recommended: bf16-true + default: 4.00x eager fp32" in verdict.text
    assert "val_loss +30.0% (one seed): no worse (tolerance 50.0%)" in verdict.text


def test_nothing_beyond_noise_is_a_tie_and_the_baseline_is_recommended():
    rows = [r for r in ROWS if r.trial_id in ("a", "c", "d")]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.01)
    assert verdict.recommended == "a" and verdict.recommended_setting == "32 + eager"
    assert verdict.text.startswith(
        "No setting beats eager fp32 beyond noise (closest: 32 + default, 1.02x, "
        "95% CI 0.89-1.16x)."
    )
    assert "Faster but worse: bf16-true + default, 4.00x" in verdict.text
    assert verdict.text.endswith("Recommended: 32 + eager, the eager fp32 baseline (trial a).")


def test_a_slower_setting_is_found_slower_and_never_recommended():
    # fp64 on CPU: about 0.6x, the same predictions (accuracies equal but for rounding).
    rows = [
        row("f32", "32", "none", None, 14411.0, noise=0.05, acc=None),
        row("f64", "64", "none", None, 9142.0, noise=0.05, acc=None),
    ]
    rows = [
        TrialRow(**{**r.__dict__, "objective": acc, "metrics": {**r.metrics, "acc": acc}})
        for r, acc in zip(rows, (0.97222220898, 0.97222222222), strict=True)
    ]
    verdict = make_verdict(rows, "acc", "max")
    slow = next(s for s in verdict.settings if s.label == "64 + eager")
    assert slow.speed_call == "slower" and slow.speedup.high < 1
    assert slow.change.value == 0 and slow.no_worse  # float rounding is no difference
    assert verdict.recommended == "f32"


def test_without_a_baseline_it_says_so_and_compares_with_the_slowest():
    rows = [r for r in ROWS if r.trial_id != "a"]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.01)
    assert not verdict.is_baseline
    assert verdict.text.startswith("No eager fp32 baseline")
    assert "compared with the slowest finished setting, 32 + default" in verdict.text
    assert "Recommended: bf16-mixed + eager: 1.76x 32 + default" in verdict.text


def test_too_short_to_time_is_said_and_not_ranked():
    rows = [
        row("a", "32", "none", 0.2, 100.0, noise=None),
        row("b", "bf16-mixed", "none", 0.2, 300.0, noise=None),  # one fast sample, no interval
    ]
    verdict = make_verdict(rows, "val_loss", "min")
    assert verdict.recommended == "a"
    assert verdict.text.startswith("Throughput was not timed long enough to compare settings")
    assert {s.speed_call for s in verdict.settings} == {"reference", "unmeasured"}


def test_settings_tied_with_the_fastest_go_to_the_simpler_one():
    rows = [
        row("a", "32", "none", 0.2, 100.0),
        row("b", "bf16-mixed", "default", 0.2, 205.0, noise=0.05),
        row("c", "bf16-mixed", "none", 0.2, 200.0, noise=0.05),
    ]
    verdict = make_verdict(rows, "val_loss", "min")
    assert verdict.recommended == "c"  # eager: one setting changed, not two
    assert verdict.tied == ["bf16-mixed + eager", "bf16-mixed + default"]
    assert "Tied with it on speed, within noise: bf16-mixed + default, 2.05x" in verdict.text


def test_replicates_give_the_objective_its_seed_noise():
    def seeds(prefix, precision, losses, speed):
        return [
            row(f"{prefix}{i}", precision, "none", loss, speed, seed=i)
            for i, loss in enumerate(losses)
        ]

    baseline = seeds("a", "32", [0.200, 0.204, 0.196], 100.0)
    close = seeds("b", "bf16-mixed", [0.2004, 0.2042, 0.1966], 190.0)  # +0.2% ± 0.25%
    noisy = seeds("n", "16-mixed", [0.205, 0.195, 0.215], 250.0)  # +2.5% ± 17%: undecided
    worse = seeds("c", "bf16-true", [0.250, 0.251, 0.249], 400.0)  # +25%, beyond it
    verdict = make_verdict(baseline + close + noisy + worse, "val_loss", "min")
    by = {s.label: s for s in verdict.settings}
    assert by["bf16-mixed + eager"].seeds == 3 and by["bf16-mixed + eager"].no_worse
    assert by["bf16-mixed + eager"].paired and by["bf16-mixed + eager"].change.high < 0.01
    assert by["bf16-true + eager"].change.low > 0.01 and not by["bf16-true + eager"].no_worse
    assert by["bf16-true + eager"].objective_call == "worse"
    assert by["16-mixed + eager"].objective_call == "undecided"
    assert not by["16-mixed + eager"].no_worse  # inside seed noise is not within tolerance
    # Three seeds paired by seed: the speedup's interval is the median of the pairs' bounds.
    assert by["bf16-mixed + eager"].speedup.n == 3
    assert verdict.recommended_setting == "bf16-mixed + eager"
    assert "val_loss +0.2% ± 0.25% over 3 seeds: no worse" in verdict.text
    table = verdict_table(verdict)
    assert "+2.5% ± " in table and "undecided (~" in table


def test_trials_pair_by_params_so_batch_sizes_compare_like_with_like():
    rows = [
        row("a1", "32", "none", 0.2, 100.0, batch_size=32),
        row("a2", "32", "none", 0.2, 400.0, batch_size=256),
        row("b1", "bf16-mixed", "none", 0.2, 150.0, batch_size=32),
        row("b2", "bf16-mixed", "none", 0.2, 600.0, batch_size=256),
    ]
    verdict = make_verdict(rows, "val_loss", "min")
    fast = next(s for s in verdict.settings if s.label == "bf16-mixed + eager")
    assert fast.speedup.value == pytest.approx(1.5) and fast.speed_call == "faster"


def test_a_setting_is_never_compared_with_itself():
    # No eager fp32 trial finished; the best trial is of the slowest setting, the reference.
    rows = [
        row("a", "bf16-mixed", "none", 0.176, 100.0, lr=0.1),
        row("b", "bf16-mixed", "none", 0.176, 102.0, lr=0.2),
        row("c", "bf16-true", "none", 0.300, 150.0, lr=0.1),
    ]
    verdict = make_verdict(rows, "val_loss", "min")
    assert "compared with the slowest finished setting, bf16-mixed + eager" in verdict.text
    assert "Recommended: bf16-mixed + eager (lr=0.1), the reference" in verdict.text
    assert "x bf16-mixed + eager" not in verdict.text.split("Recommended")[-1]


def test_nothing_finished():
    verdict = make_verdict([ROWS[-1]], "val_loss", "min")
    assert verdict.recommended is None and "nothing to recommend" in verdict.text


def test_the_answer_as_plain_values():
    verdict = make_verdict(ROWS, "val_loss", "min")
    answer = verdict.as_dict()
    assert answer["recommended"] == "bf16-mixed + eager" and answer["text"] == verdict.text
    fast = next(s.as_dict() for s in verdict.settings if s.label == "bf16-mixed + eager")
    assert fast["speedup"] == pytest.approx(1.8)
    assert fast["speedup_ci_low"] < 1.8 < fast["speedup_ci_high"]
    assert fast["objective"] == pytest.approx(0.2008) and fast["objective_ci_low"] is None


def test_changes_read_as_percentages():
    assert [percent(c) for c in (0.3, 0.004, 0.0018, -5.2e-8, 0.0)] == [
        "+30.0%",
        "+0.4%",
        "+0.18%",
        "-0.00%",
        "+0.00%",
    ]


@pytest.mark.parametrize(
    ("rows", "mode"),
    [
        (ROWS, "min"),  # the baseline is the reference
        ([r for r in ROWS if r.trial_id != "a"], "min"),  # the slowest setting is
        ([r for r in ROWS if r.trial_id != "a"], "max"),
    ],
)
def test_the_reference_objective_is_the_verdicts_own(rows, mode):
    verdict = make_verdict(rows, "val_loss", mode)
    assert reference_objective(rows, "val_loss", mode) == verdict.reference.objective.value


def test_the_reference_objective_of_a_sweep_where_nothing_finished_is_none():
    stopped = [row("a", "32", "none", 0.2, 100.0, status=TrialStatus.STOPPED)]
    assert reference_objective(stopped, "val_loss", "min") is None
