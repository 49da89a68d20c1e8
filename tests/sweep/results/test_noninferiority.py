"""No worse as a non-inferiority claim: seeds paired across settings, undecided said so."""

import json

import pytest

from versatil.status import TrialStatus
from versatil.sweep.results.noninferiority import objective_call, objective_change
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.verdict import make_verdict
from versatil.sweep.results.verdict_text import verdict_table

T_975_1 = 12.706204736174698  # Student t(0.975) with one degree of freedom


def row(trial_id, precision, val_loss, speed=None, compile_mode="none", **axes):
    """A finished trial; ``speed`` samples/s measured within 3%, or ``None``: too short."""
    metrics = {"val_loss": val_loss}
    if speed is not None:
        metrics.update(
            samples_per_sec=speed,
            samples_per_sec_median=speed,
            samples_per_sec_ci_low=speed * 0.97,
            samples_per_sec_ci_high=speed * 1.03,
            throughput_windows=8.0,
            throughput_too_short=0.0,
        )
    return TrialRow(
        trial_id=trial_id,
        axes={"precision": precision, "compile_mode": compile_mode, **axes},
        status=TrialStatus.COMPLETED,
        objective=val_loss,
        metrics=metrics,
        epochs=2,
    )


def seeds(prefix, precision, losses, speed=None, first=0, **axes):
    """One configuration's replicates: seed ``first``, ``first + 1``, ..."""
    return [
        row(f"{prefix}{i}", precision, loss, speed, seed=first + i, **axes)
        for i, loss in enumerate(losses)
    ]


def by_label(verdict):
    return {s.label: s for s in verdict.settings}


def test_a_change_of_2_percent_plus_or_minus_100_is_undecided_never_no_worse():
    # Two seeds whose differences from the reference average +2%, spread so wide that the
    # paired interval is +2% ± 100%: inside seed noise, far from inside the 1% tolerance.
    x = 1 / T_975_1
    rows = [
        *seeds("a", "32", [1.0, 1.0], 100.0),
        *seeds("b", "bf16-mixed", [1.02 - x, 1.02 + x], 180.0),
    ]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.01)
    result = by_label(verdict)["bf16-mixed + eager"]
    assert result.paired
    assert result.change.value == pytest.approx(0.02)
    assert (result.change.high - result.change.low) / 2 == pytest.approx(1.0)
    assert result.objective_call == "undecided" and not result.no_worse
    assert result.seeds_to_decide is not None and result.seeds_to_decide > 100
    assert verdict.recommended_setting == "32 + eager"  # faster, but not shown no worse
    assert (
        "Faster but undecided: bf16-mixed + eager, 1.80x, 95% CI 1.70-1.91x, 2 pairs, "
        "val_loss +2.0% ± 100.0% over 2 seeds: undecided "
        f"({result.seeds_to_decide} seeds would decide it with 80% power)"
    ) in verdict.text
    assert "no worse" not in verdict.text
    answer = json.loads(json.dumps(result.as_dict()))
    assert answer["objective_call"] == "undecided" and answer["no_worse"] is False
    assert answer["seeds_to_decide"] == result.seeds_to_decide
    assert answer["objective_change_paired"] is True


def test_undecided_says_how_many_seeds_would_decide_it():
    # +0.2% with a per-seed spread of the differences near 1%: the worse end is beyond 1%.
    rows = [
        *seeds("a", "32", [1.0, 1.0, 1.0], 100.0),
        *seeds("b", "bf16-mixed", [1.012, 0.994, 1.000], 100.0),
    ]
    result = by_label(make_verdict(rows, "val_loss", "min"))["bf16-mixed + eager"]
    assert result.objective_call == "undecided"
    # Sized for 80% power at the observed spread and the 0.8% to the tolerance.
    from versatil.stats import seeds_to_decide

    sd = 0.009165151389911686  # stdev of the differences 0.012, -0.006, 0.0
    assert result.seeds_to_decide == seeds_to_decide(sd, 0.008)
    assert "undecided (~" in verdict_table(make_verdict(rows, "val_loss", "min"))


def test_identical_per_seed_objectives_give_exactly_zero_plus_or_minus_zero():
    # Eager and compiled trials of one seed reach bit-identical val_loss; seeds differ a lot.
    losses = [0.31, 0.47]
    rows = [
        *seeds("a", "32", losses, 100.0),
        *seeds("b", "32", losses, 101.0, compile_mode="default"),
    ]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.01)
    result = by_label(verdict)["32 + default"]
    assert result.paired
    assert (result.change.value, result.change.low, result.change.high) == (0.0, 0.0, 0.0)
    assert result.objective_call == "no worse" and result.no_worse
    assert result.seeds_to_decide is None
    line = next(x for x in verdict_table(verdict).splitlines() if x.startswith("32 + default"))
    assert "+0.00% ± 0.00%" in line and "no worse" in line and "unpaired" not in line


def test_seeds_that_do_not_line_up_fall_back_to_an_unpaired_interval_and_say_so():
    rows = [
        *seeds("a", "32", [0.200, 0.201], 100.0, first=0),
        *seeds("b", "bf16-mixed", [0.2001, 0.2005], 180.0, first=5),  # other seeds
    ]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.05)
    result = by_label(verdict)["bf16-mixed + eager"]
    assert not result.paired and result.change.bounded
    assert result.objective_call == "no worse"
    assert "over 2 seeds, unpaired: no worse" in verdict.text
    assert " unpaired" in verdict_table(verdict)
    assert result.as_dict()["objective_change_paired"] is False


def test_one_common_seed_is_not_enough_to_pair():
    mine = seeds("b", "bf16-mixed", [0.21, 0.22], first=1)
    theirs = seeds("a", "32", [0.20, 0.20], first=0)
    found = objective_change(mine, theirs)
    assert not found.paired  # seeds 1, 2 against 0, 1: one in common
    paired = objective_change(mine, seeds("a", "32", [0.20, 0.20], first=1))
    assert paired.paired and paired.change.value == pytest.approx(0.075)


def test_with_one_seed_the_point_estimate_is_the_rule():
    rows = [
        row("a", "32", 0.200, 100.0),
        row("b", "bf16-mixed", 0.2008, 180.0),  # +0.4%: within 1%
        row("c", "bf16-true", 0.204, 300.0),  # +2%: beyond it
    ]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.01)
    by = by_label(verdict)
    assert by["bf16-mixed + eager"].objective_call == "no worse"
    assert by["bf16-true + eager"].objective_call == "worse"
    assert by["bf16-true + eager"].seeds_to_decide is None
    assert "val_loss +0.4% (one seed): no worse" in verdict.text


def test_an_interval_whose_better_end_is_beyond_the_tolerance_is_worse():
    rows = [
        *seeds("a", "32", [0.90, 0.92, 0.91]),
        *seeds("b", "bf16-true", [0.85, 0.86, 0.855]),  # accuracy down 6%, tight
    ]
    found = objective_change(rows[3:], rows[:3])
    assert found.paired and found.change.high < -0.04
    assert objective_call(found, "max", 0.01) == ("worse", None)
    assert objective_call(found, "max", 0.10)[0] == "no worse"  # all of it within 10%
    assert objective_call(found, "min", 0.01)[0] == "no worse"  # lower is better: a gain


def test_the_sentence_never_says_no_setting_beats_while_a_no_worse_setting_is_unmeasured():
    rows = [
        row("a", "32", 0.200, 100.0),
        row("b", "64", 0.200, 60.0),  # measured: slower
        row("c", "bf16-true", 0.2004, None),  # no worse, timed too short
        row("d", "bf16-mixed", 0.2001, None, compile_mode="default"),  # no worse, too short
    ]
    verdict = make_verdict(rows, "val_loss", "min", tolerance=0.01)
    assert verdict.recommended_setting == "32 + eager"
    assert "No setting beats" not in verdict.text
    assert verdict.text.startswith("Nothing measured beats eager fp32 beyond noise")
    assert (
        "Left without a measured speed: bf16-mixed + default (no worse, unmeasured), "
        "bf16-true + eager (no worse, unmeasured)."
    ) in verdict.text
    # Once every no-worse setting is measured, nothing is left out and it may say so.
    measured = make_verdict(rows[:2], "val_loss", "min", tolerance=0.01)
    assert measured.text.startswith("No setting beats eager fp32 beyond noise")
    assert "Left without" not in measured.text


def test_settings_left_unmeasured_are_named_beside_a_recommendation_and_when_none_timed():
    fast = [row("a", "32", 0.200, 100.0), row("b", "bf16-mixed", 0.200, 200.0)]
    short = row("c", "bf16-true", 0.200, None)
    worse = row("d", "16-true", 0.300, None)  # worse: no speed owed
    verdict = make_verdict([*fast, short, worse], "val_loss", "min")
    assert verdict.recommended_setting == "bf16-mixed + eager"
    assert verdict.text.endswith(
        "Left without a measured speed: bf16-true + eager (no worse, unmeasured)."
    )
    untimed = [row("a", "32", 0.2, None), short, worse]
    text = make_verdict(untimed, "val_loss", "min").text
    assert text.startswith("Throughput was not timed long enough")
    assert (
        "Left without a measured speed: bf16-true + eager (no worse, unmeasured). Recommended"
    ) in text  # the worse 16-true owes no speed
