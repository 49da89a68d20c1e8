"""One vocabulary for an objective's direction: min or max, its sign, better, best, order."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from versatil.sweep.vocab.direction import Direction

NAN = float("nan")
INF = math.inf
floats = st.floats(allow_nan=True, allow_infinity=True)


def test_equals_the_strings_the_sweep_file_and_tune_use():
    assert Direction.MIN == "min" and Direction.MAX == "max"
    assert Direction("min") is Direction.MIN and Direction("max") is Direction.MAX
    assert Direction(Direction.MAX) is Direction.MAX
    assert str(Direction.MIN) == "min" and f"{Direction.MAX}" == "max"
    assert json.dumps({"mode": Direction.MAX}) == '{"mode": "max"}'
    assert {"min": 1}[Direction.MIN] == 1
    assert [d.value for d in Direction] == ["min", "max"]


@pytest.mark.parametrize("mode", ["MIN", "maximize", "", "minimum"])
def test_a_string_that_is_no_mode_is_refused(mode):
    with pytest.raises(ValueError):
        Direction(mode)


def test_sign_and_worst():
    assert Direction.MIN.sign == 1.0 and Direction.MAX.sign == -1.0
    assert Direction.MIN.worst == INF and Direction.MAX.worst == -INF
    assert Direction.MIN.as_loss(2.5) == 2.5 and Direction.MAX.as_loss(2.5) == -2.5
    assert math.isnan(Direction.MAX.as_loss(NAN))


@pytest.mark.parametrize(
    ("direction", "a", "b", "expected"),
    [
        (Direction.MIN, 1.0, 2.0, True),
        (Direction.MIN, 2.0, 1.0, False),
        (Direction.MIN, 1.0, 1.0, False),
        (Direction.MIN, -INF, 0.0, True),
        (Direction.MIN, 0.0, INF, True),
        (Direction.MAX, 2.0, 1.0, True),
        (Direction.MAX, 1.0, 2.0, False),
        (Direction.MAX, 1.0, 1.0, False),
        (Direction.MAX, INF, 0.0, True),
        (Direction.MAX, 0.0, -INF, True),
        (Direction.MIN, 0.0, -0.0, False),
        # Missing (NaN or None): never better, and worse than any value.
        (Direction.MIN, NAN, 1.0, False),
        (Direction.MIN, 1.0, NAN, True),
        (Direction.MAX, INF, NAN, True),
        (Direction.MIN, INF, None, True),
        (Direction.MAX, None, -INF, False),
        (Direction.MIN, NAN, NAN, False),
        (Direction.MAX, None, NAN, False),
    ],
)
def test_better_is_strict(direction, a, b, expected):
    assert direction.better(a, b) is expected


def test_best():
    values = [3.0, NAN, 1.0, None, 2.0]
    assert Direction.MIN.best(values) == 1.0
    assert Direction.MAX.best(values) == 3.0
    assert Direction.MIN.best([INF, 5.0]) == 5.0
    assert Direction.MAX.best([-INF, NAN]) == -INF
    assert Direction.MIN.best([]) is None
    assert Direction.MAX.best([NAN, None]) is None
    assert Direction.MIN.best(iter([2.0, 1.0])) == 1.0


def test_sort_key_puts_the_best_first_and_missing_values_last():
    values = [2.0, NAN, -INF, None, 1.0, INF, 3.0]
    by_min = sorted(values, key=Direction.MIN.sort_key)
    by_max = sorted(values, key=Direction.MAX.sort_key)
    assert by_min[:5] == [-INF, 1.0, 2.0, 3.0, INF]
    assert by_max[:5] == [INF, 3.0, 2.0, 1.0, -INF]
    for ordered in (by_min, by_max):
        assert math.isnan(ordered[5]) and ordered[6] is None  # kept in their given order


def test_no_worse_than_allows_slack_the_worse_way():
    assert Direction.MIN.no_worse_than(1.05, 1.0, 0.1)
    assert not Direction.MIN.no_worse_than(1.2, 1.0, 0.1)
    assert Direction.MAX.no_worse_than(0.95, 1.0, 0.1)
    assert not Direction.MAX.no_worse_than(0.8, 1.0, 0.1)
    assert Direction.MIN.no_worse_than(1.0, 1.0) and Direction.MAX.no_worse_than(1.0, 1.0)
    assert not Direction.MIN.no_worse_than(NAN, 1.0, 0.1)
    assert not Direction.MAX.no_worse_than(1.0, NAN, 0.1)


# The expressions each site wrote before it used Direction, kept here to pin the refactor.


def _old_sign(mode):
    return 1.0 if mode == "min" else -1.0


def _old_reached(value, target, mode, margin):
    return value <= target + margin if mode == "min" else value >= target - margin


def _same(x, y):
    return (math.isnan(x) and math.isnan(y)) or (
        x == y and math.copysign(1, x) == math.copysign(1, y)
    )


@given(st.sampled_from(["min", "max"]), floats)
def test_as_loss_is_the_sign_times_the_value(mode, value):
    assert _same(Direction(mode).as_loss(value), _old_sign(mode) * value)
    worsening = value if mode == "min" else -value  # the verdict's _no_worse
    assert _same(Direction(mode).as_loss(value), worsening)


@given(st.sampled_from(["min", "max"]), floats, floats, floats)
def test_no_worse_than_is_the_target_test(mode, value, target, margin):
    assert Direction(mode).no_worse_than(value, target, margin) == _old_reached(
        value, target, mode, margin
    )


@given(st.sampled_from(["min", "max"]))
def test_worst_is_the_infeasible_trials_value(mode):
    assert Direction(mode).worst == (math.inf if mode == "min" else -math.inf)


@given(st.sampled_from(list(Direction)), floats, floats)
def test_better_agrees_with_sort_key_and_best(direction, a, b):
    assert direction.better(a, b) == (direction.sort_key(a) < direction.sort_key(b))
    assert not (direction.better(a, b) and direction.better(b, a))
    if direction.better(a, b):
        assert direction.best([a, b]) == a
