"""Every setting in contention is re-timed, in groups with the reference, and none slower."""

import dataclasses

import pytest

from tests.sweep.results.test_confirmation import document, with_checkpoint
from tests.sweep.results.test_verdict import row
from versatil.sweep.results.confirmation import (
    candidates,
    confirmed_speedups,
    groups,
    in_contention,
    round_groups,
    round_metrics,
    should_confirm,
)
from versatil.sweep.results.verdict import make_verdict

# A digits classifier's sweep: epochs too short to time (noise=None: no interval), all no
# worse, save fp64 and 16-true, which trained long enough to be measured slower.
ROWS = [
    with_checkpoint(r)
    for r in (
        row("a", "32", "none", 0.200, 100.0, noise=None),
        row("b", "bf16-true", "none", 0.200, 120.0, noise=None),
        row("c", "bf16-mixed", "none", 0.200, 110.0, noise=None),
        row("d", "bf16-mixed", "default", 0.200, 115.0, noise=None),
        row("e", "32", "default", 0.200, 105.0, noise=None),
        row("f", "bf16-true", "default", 0.200, 130.0, noise=None),
        row("g", "64", "none", 0.200, 60.0),
        row("h", "64", "default", 0.200, 62.0),
        row("i", "16-true", "none", 0.200, 2.0),
        row("j", "16-true", "default", 0.200, 2.0),
    )
]
UNMEASURED = {
    "bf16-true + eager",
    "bf16-mixed + eager",
    "bf16-mixed + default",
    "32 + default",
    "bf16-true + default",
}


def reference_measured(rows):
    """``rows`` with the reference timed long enough, so fp64 and 16-true compare with it."""
    timed = with_checkpoint(row("a", "32", "none", 0.200, 100.0))
    return [timed if r.trial_id == "a" else r for r in rows]


def test_every_unmeasured_no_worse_setting_is_re_timed_and_no_slower_one():
    rows = reference_measured(ROWS)
    verdict = make_verdict(rows, "val_loss", "min")
    calls = {s.label: s.speed_call for s in verdict.settings}
    assert {k for k, v in calls.items() if v == "slower"} == {
        "64 + eager",
        "64 + default",
        "16-true + eager",
        "16-true + default",
    }
    # Every trial on the front: the slower settings are still not re-timed.
    found = candidates(verdict, rows, front={r.trial_id for r in rows}, limit=3)
    assert found[0].label == "32 + eager"
    assert {c.label for c in found[1:]} == UNMEASURED
    assert should_confirm(verdict, found, "auto")

    # A cap of 3: three groups, each the reference and up to two others, each setting once.
    grouped = groups(found, 3)
    assert [len(g) for g in grouped] == [3, 3, 2]
    assert all(g[0] == found[0] for g in grouped)
    assert sorted(c.label for g in grouped for c in g[1:]) == sorted(UNMEASURED)


def test_undecided_settings_are_in_contention_worse_ones_are_not():
    verdict = make_verdict(ROWS, "val_loss", "min")
    unmeasured = next(s for s in verdict.settings if s.label == "bf16-true + eager")
    assert in_contention(unmeasured)
    worse = dataclasses.replace(unmeasured, no_worse=False, objective_call="worse")
    undecided = dataclasses.replace(unmeasured, no_worse=False, objective_call="undecided")
    assert not in_contention(worse) and in_contention(undecided)
    assert not in_contention(dataclasses.replace(unmeasured, speed_call="slower"))


def test_the_pareto_set_fills_the_groups_room_and_never_adds_a_group():
    # The reference and two settings in contention; bf16-true settings 30% worse.
    rows = [
        with_checkpoint(r)
        for r in (
            row("a", "32", "none", 0.200, 100.0, noise=None),
            row("b", "bf16-mixed", "none", 0.200, 110.0, noise=None),
            row("c", "32", "default", 0.200, 105.0, noise=None),
            row("d", "bf16-true", "none", 0.260, 400.0),
            row("e", "bf16-true", "default", 0.260, 410.0),
        )
    ]
    verdict = make_verdict(rows, "val_loss", "min")
    front = {"d", "e"}
    # Two in contention fill one group of 3: no room for the front's settings.
    found = candidates(verdict, rows, front, limit=3)
    assert found[0].trial_id == "a" and {c.trial_id for c in found} == {"a", "b", "c"}
    # A group of 4 has room for one of them; a group of 6, for both.
    assert len(candidates(verdict, rows, front, limit=4)) == 4
    labels = [c.label for c in candidates(verdict, rows, front, limit=6)]
    assert labels[:1] == ["32 + eager"] and len(labels) == 5
    assert set(labels[3:]) == {"bf16-true + eager", "bf16-true + default"}


RATES = {
    "32 + eager": [100.0, 90.0, 110.0, 95.0, 105.0, 100.0],
    "bf16-mixed + eager": [151.0, 134.0, 166.0, 143.0, 157.0, 150.0],  # 1.5x each round
    "32 + default": [101.0, 89.0, 112.0, 94.0, 106.0, 99.0],  # 1.0x: a tie
}


def grouped_document():
    """The rounds of two groups of 2, each the reference first, as confirm logs them."""
    one = document(RATES)
    first = {"labels": ["32 + eager", "bf16-mixed + eager"], "orders": one["orders"]}
    second = {"labels": ["32 + eager", "32 + default"], "orders": one["orders"]}
    reference_again = [50.0, 45.0, 55.0, 47.5, 52.5, 50.0]  # a slower device in group 2
    first["samples_per_sec"] = {k: RATES[k] for k in first["labels"]}
    second["samples_per_sec"] = {
        "32 + eager": reference_again,
        "32 + default": [50.5, 44.5, 56.0, 47.0, 53.0, 49.5],  # 1.0x its own reference
    }
    for group in (first, second):
        group.update(steps=50, warmup_steps=2, device="CPU", torch_threads=1)
    return {"contenders": one["contenders"], "groups": [first, second]}


def test_groups_speedups_are_each_against_their_own_reference_and_merged():
    grouped, old = grouped_document(), document(RATES)
    assert len(round_groups(grouped)) == 2 and len(round_groups(old)) == 1
    merged, single = confirmed_speedups(grouped), confirmed_speedups(old)
    assert merged.keys() == single.keys()
    fast, tie = merged[("bf16-mixed", "none", "highest")], merged[("32", "default", "highest")]
    assert fast == single[("bf16-mixed", "none", "highest")]
    assert fast.value == pytest.approx(1.5, rel=0.01) and fast.low > 1.4
    assert tie.value == pytest.approx(1.0, abs=0.02) and tie.low < 1 < tie.high

    verdict = make_verdict(ROWS[:1] + ROWS[2:3] + ROWS[4:5], "val_loss", "min", confirmed=merged)
    by = {s.label: s for s in verdict.settings}
    assert by["bf16-mixed + eager"].speed_call == "faster" and by["32 + default"].rounds == 6
    assert all(s.speedup is not None for s in verdict.settings[1:] if s.no_worse)

    parent, children = round_metrics(grouped)
    reference = parent["confirm/32_eager/samples_per_sec"]
    assert reference == RATES["32 + eager"] + [50.0, 45.0, 55.0, 47.5, 52.5, 50.0]
    assert children["e"]["confirm/speedup"] == [tie.value]
    assert parent["confirm/bf16-mixed_eager/speedup"] == [fast.value]
