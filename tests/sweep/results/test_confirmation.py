"""Which settings the sweep's end re-times, and what their paired rounds decide."""

import pytest

from tests.sweep.results.test_verdict import row
from versatil.sweep.results.confirmation import (
    candidates,
    confirmed_speedups,
    round_metrics,
    should_confirm,
)
from versatil.sweep.results.verdict import make_verdict


def with_checkpoint(r):
    return r.__class__(**{**r.__dict__, "checkpoint": f"/ckpt/{r.trial_id}"})


ROWS = [
    with_checkpoint(r)
    for r in (
        row("a", "32", "none", 0.200, 100.0),
        row("b", "bf16-mixed", "none", 0.2008, 103.0, noise=0.1),  # a tie, no worse
        row("c", "bf16-true", "default", 0.260, 400.0),  # faster, but worse
        row("d", "64", "none", 0.200, 60.0),  # slower
        row("e", "32", "default", 0.199, 98.0, noise=0.1),  # a tie, no worse
    )
]


def document(rates):
    labels = list(rates)
    settings = {
        "32 + eager": ("32", "none"),
        "bf16-mixed + eager": ("bf16-mixed", "none"),
        "32 + default": ("32", "default"),
    }
    return {
        "contenders": [
            {
                "label": label,
                "precision": settings[label][0],
                "compile_mode": settings[label][1],
                "matmul_precision": "highest",
                "trial_id": {"32 + eager": "a", "bf16-mixed + eager": "b"}.get(label, "e"),
            }
            for label in labels
        ],
        "labels": labels,
        "samples_per_sec": rates,
        "orders": [labels, labels[::-1]] * 3,
        "steps": 50,
        "warmup_steps": 2,
        "device": "CPU",
        "torch_threads": 1,
    }


def test_the_candidates_are_the_reference_and_the_settings_in_contention():
    verdict = make_verdict(ROWS, "val_loss", "min")
    found = candidates(verdict, ROWS, front={"c"}, limit=6)
    labels = [c.label for c in found]
    assert labels[0] == "32 + eager" and found[0].checkpoint == "/ckpt/a"
    # In contention: the ties; on the front: the faster worse one. Not the slower fp64.
    assert set(labels[1:]) == {"bf16-mixed + eager", "32 + default", "bf16-true + default"}
    assert should_confirm(verdict, found, "auto") and should_confirm(verdict, found, "on")
    assert not should_confirm(verdict, found, "off")
    # A cap of 2 leaves none in contention out: they are re-timed in groups of 2.
    assert len(candidates(verdict, ROWS, front=(), limit=2)) == 3


def test_nothing_in_contention_is_not_re_timed_unless_asked():
    rows = [r for r in ROWS if r.trial_id in ("a", "d")]
    verdict = make_verdict(rows, "val_loss", "min")
    found = candidates(verdict, rows, front={"d"}, limit=6)
    assert [c.label for c in found] == ["32 + eager"]  # 64 is slower beyond noise already
    assert not should_confirm(verdict, found, "auto") and not should_confirm(verdict, found, "on")
    # Asked for (confirm.enabled: on), the Pareto set's slower settings are re-timed too.
    found = candidates(verdict, rows, front={"d"}, limit=6, slower=True)
    assert [c.label for c in found] == ["32 + eager", "64 + eager"]
    assert not should_confirm(verdict, found, "auto") and should_confirm(verdict, found, "on")


def test_paired_rounds_decide_the_speed_and_say_so():
    rates = {
        "32 + eager": [100.0, 90.0, 110.0, 95.0, 105.0, 100.0],
        "bf16-mixed + eager": [151.0, 134.0, 166.0, 143.0, 157.0, 150.0],  # 1.5x each round
        "32 + default": [101.0, 89.0, 112.0, 94.0, 106.0, 99.0],  # 1.0x: a tie
    }
    doc = document(rates)
    speedups = confirmed_speedups(doc)
    fast = speedups[("bf16-mixed", "none", "highest")]
    assert fast.value == pytest.approx(1.5, rel=0.01) and fast.low > 1.4 and fast.n == 6
    verdict = make_verdict(ROWS, "val_loss", "min", confirmed=speedups)
    assert verdict.recommended_setting == "bf16-mixed + eager"
    assert "1.50x eager fp32 (95% CI" in verdict.text and "6 paired rounds" in verdict.text
    by = {s.label: s for s in verdict.settings}
    assert by["32 + default"].speed_call == "tie" and by["32 + default"].rounds == 6
    assert by["bf16-true + default"].rounds == 0  # not re-timed: the trials' own pairs

    parent, children = round_metrics(doc)
    assert parent["confirm/32_eager/samples_per_sec"] == rates["32 + eager"]
    assert parent["confirm/bf16-mixed_eager/speedup"] == [fast.value]
    assert children["b"]["confirm/samples_per_sec"] == rates["bf16-mixed + eager"]
    assert children["b"]["confirm/speedup_ci_low"] == [fast.low]
    assert "confirm/speedup" not in children["a"]  # the reference is the unit


def test_a_speedup_over_few_rounds_states_the_coverage_its_interval_has():
    from versatil.stats import ratio_ci
    from versatil.sweep.results.verdict_text import ci_text

    rates = [1.9, 2.0, 1.8, 2.1, 1.95, 2.05]
    # A median over n rounds: the range covers 1 - 2 / 2**n (87.5% at 4, 93.75% at 5).
    four = ratio_ci(rates[:4], [1.0] * 4)
    assert four.coverage == 0.875
    assert ci_text(four, rounds=4) == "87.5% CI 1.80-2.10x, 4 paired rounds"
    assert ci_text(ratio_ci(rates[:5], [1.0] * 5), rounds=5).startswith("93.8% CI ")
    # From 6 rounds on, the interval covers at least 95%.
    assert ci_text(ratio_ci(rates, [1.0] * 6), rounds=6).startswith("95% CI ")
