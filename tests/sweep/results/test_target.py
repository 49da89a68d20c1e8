"""Time to target: training seconds until a trial's objective first reached the target."""

import pytest

from tests.sweep.results.test_verdict import row
from versatil.sweep.results.target import apply_target, reached, time_to_target
from versatil.sweep.results.verdict import make_verdict
from versatil.sweep.results.verdict_text import verdict_table


class Record:
    def __init__(self, trial_id, epochs):
        self.trial_id = trial_id
        self._epochs = epochs

    def epochs(self):
        return {
            i: {"epoch": i, "epoch_time_s": t, "val_loss": v}
            for i, (t, v) in enumerate(self._epochs)
        }


def test_reaching_is_within_the_tolerance_and_mode_aware():
    assert reached(0.101, 0.1, "min", 0.01) and not reached(0.102, 0.1, "min", 0.01)
    assert reached(0.891, 0.9, "max", 0.01) and not reached(0.89, 0.9, "max", 0.01)


def test_the_time_is_the_training_time_up_to_the_first_epoch_that_reached_it():
    history = [(1.0, 0.5), (1.5, 0.2), (2.0, 0.1), (2.0, 0.09)]
    assert time_to_target(history, 0.2, "min", 0.0) == pytest.approx(2.5)
    assert time_to_target(history, 0.05, "min", 0.0) is None
    assert time_to_target([(1.0, float("nan")), (1.0, 0.1)], 0.1, "min", 0.0) == 2.0


def test_the_default_target_is_the_reference_objective_and_each_setting_reports_its_time():
    rows = [row("a", "32", "none", 0.2, 100.0), row("b", "bf16-mixed", "none", 0.25, 190.0)]
    records = [
        Record("a", [(1.0, 0.4), (1.0, 0.2)]),  # eager fp32 reaches its own final 0.2 at 2 s
        Record("b", [(0.5, 0.4), (0.5, 0.25)]),  # never within 1% of 0.2
    ]
    first = make_verdict(rows, "val_loss", "min")
    timed, target = apply_target(
        rows, records, first.reference.objective.value, "val_loss", "min", 0.01
    )
    assert target == pytest.approx(0.2)
    assert timed[0].metrics["time_to_target_s"] == 2.0
    assert "time_to_target_s" not in timed[1].metrics
    verdict = make_verdict(timed, "val_loss", "min", target=target)
    by = {s.label: s for s in verdict.settings}
    assert by["32 + eager"].time_to_target == 2.0 and by["32 + eager"].reached_target == 1
    assert by["bf16-mixed + eager"].time_to_target is None
    table = verdict_table(verdict)
    assert "time to target (s)" in table and "never" in table
    assert verdict.as_dict()["target"] == pytest.approx(0.2)
    # An explicit target wins over the reference's.
    timed, target = apply_target(rows, records, 0.2, "val_loss", "min", 0.0, explicit=0.4)
    assert target == 0.4 and [r.metrics["time_to_target_s"] for r in timed] == [1.0, 0.5]


def test_with_seeds_the_time_is_their_median_only_when_at_least_half_reached_it():
    from tests.sweep.results.test_noninferiority import seeds

    rows = [
        *seeds("a", "32", [0.2, 0.2, 0.2], 100.0),
        *seeds("b", "bf16-mixed", [0.2, 0.2, 0.2], 190.0),
        *seeds("c", "bf16-true", [0.2, 0.2, 0.2], 200.0),
    ]
    reached = {"a0": 3.0, "a1": 2.0, "a2": 4.0, "b0": 1.0, "b1": 9.0, "c0": 0.5}
    for r in rows:
        if r.trial_id in reached:
            r.metrics["time_to_target_s"] = reached[r.trial_id]
    verdict = make_verdict(rows, "val_loss", "min", target=0.2)
    by = {s.label: s for s in verdict.settings}
    assert (by["32 + eager"].time_to_target, by["32 + eager"].reached_target) == (3.0, 3)
    # 2 of 3 seeds reached it: the median of those two.
    assert (by["bf16-mixed + eager"].time_to_target, by["bf16-mixed + eager"].reached_target) == (
        5.0,
        2,
    )
    # 1 of 3: not its 0.5 s, which would make the setting that mostly never gets there
    # look fastest.
    assert by["bf16-true + eager"].time_to_target is None
    assert by["bf16-true + eager"].as_dict()["reached_target"] == 1
    assert by["bf16-true + eager"].as_dict()["seeds"] == 3
    table = verdict_table(verdict)
    assert "3 (3/3 seeds)" in table and "5 (2/3 seeds)" in table
    assert "never (1/3 seeds)" in table
