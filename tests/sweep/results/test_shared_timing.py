"""Trials timed on a shared GPU are not ranked on that timing: the end re-times them."""

import pytest

from tests.sweep.results.test_confirmation import with_checkpoint
from tests.sweep.results.test_verdict import row
from versatil.stats import Estimate
from versatil.sweep.config.load import validate_sweep
from versatil.sweep.config.planning import make_plan
from versatil.sweep.results.confirmation import candidates, should_confirm
from versatil.sweep.results.ranking import dominates_beyond_noise
from versatil.sweep.results.rows import timed_shared
from versatil.sweep.results.verdict import make_verdict, trial_speed
from versatil.sweep.results.verdict_text import SHARED_NOTE, verdict_table


def shared(r, **metrics):
    """``r`` timed while another trial shared its GPU."""
    values = {"device_trials_max": 2.0, "device_trials_mean": 1.6, "throughput_shared": 1.0}
    return r.__class__(**{**r.__dict__, "metrics": {**r.metrics, **values, **metrics}})


ROWS = [
    with_checkpoint(shared(r))
    for r in (
        row("a", "32", "none", 0.200, 100.0),
        row("b", "bf16-mixed", "none", 0.2008, 300.0),  # 3x, but timed shared
        row("c", "bf16-true", "none", 0.300, 400.0),  # worse
    )
]


def test_a_trial_timed_shared_has_no_speed_and_its_setting_says_why():
    assert all(timed_shared(r) and trial_speed(r) is None for r in ROWS)
    # The last epoch alone, an earlier one shared: the fit's windows hold the shared time.
    assert timed_shared(shared(ROWS[0], device_trials_max=1.0))
    # Only the last epoch's count known (no fit-wide flag): shared too.
    alone = row("x", "32", "none", 0.2, 100.0)
    assert not timed_shared(alone) and trial_speed(alone) is not None
    assert timed_shared(shared(alone, throughput_shared=0.0))

    verdict = make_verdict(ROWS, "val_loss", "min")
    calls = {s.label: s.speed_call for s in verdict.settings}
    assert calls == {
        "32 + eager": "reference",
        "bf16-mixed + eager": "shared",
        "bf16-true + eager": "shared",
    }
    assert all(s.speed is None and s.speedup is None for s in verdict.settings)
    assert verdict.recommended_setting == "32 + eager"  # not the 3x timed shared
    assert verdict.text.startswith("Throughput was timed while trials shared a GPU")
    table = verdict_table(verdict)
    assert " shared " in table and table.endswith(SHARED_NOTE)


def test_the_reference_timed_shared_leaves_the_others_shared_too():
    rows = [ROWS[0], row("b", "bf16-mixed", "none", 0.2008, 300.0)]
    by = {s.label: s for s in make_verdict(rows, "val_loss", "min").settings}
    assert by["bf16-mixed + eager"].speed_call == "shared"
    assert by["bf16-mixed + eager"].speed is not None  # its own timing, shown, not compared


def test_settings_timed_shared_are_re_timed_and_the_rounds_decide():
    verdict = make_verdict(ROWS, "val_loss", "min")
    found = candidates(verdict, ROWS, front=(), limit=6)
    # In contention: the no-worse shared one; not the worse one.
    assert [c.label for c in found] == ["32 + eager", "bf16-mixed + eager"]
    assert should_confirm(verdict, found, "auto")
    rounds = {("bf16-mixed", "none", "highest"): Estimate(1.8, 1.7, 1.9, 6)}
    confirmed = make_verdict(ROWS, "val_loss", "min", confirmed=rounds)
    by = {s.label: s for s in confirmed.settings}
    assert by["bf16-mixed + eager"].speed_call == "faster" and by["bf16-mixed + eager"].rounds == 6
    assert confirmed.recommended_setting == "bf16-mixed + eager"
    assert SHARED_NOTE in verdict_table(confirmed)  # bf16-true's own timing was still shared


def test_a_trial_timed_shared_does_not_dominate_on_speed():
    fast, slow = ROWS[1], shared(row("d", "32", "none", 0.2008, 100.0))
    assert not dominates_beyond_noise(fast, slow, "min", 0.01)
    assert dominates_beyond_noise(
        row("e", "32", "none", 0.2008, 300.0), row("f", "32", "none", 0.2008, 100.0), "min", 0.01
    )


@pytest.mark.parametrize(
    ("resources", "accelerator", "gpus"),
    [
        ({"gpu": 0.25}, "gpu", 1),
        ({"gpu": 0.5, "cpu": 2}, "cpu", 1),
        ({"gpu": 1.5}, "cuda", 2),
        ({}, "gpu", 1),
        ({}, "cpu", 0),
    ],
)
def test_the_re_timing_holds_whole_gpus(resources, accelerator, gpus):
    config = validate_sweep(
        {"name": "x", "resources": resources, "trainer": {"accelerator": accelerator}}
    )
    assert make_plan(config).resources.retime == {
        "num_cpus": resources.get("cpu", 1),
        "num_gpus": gpus,
    }
