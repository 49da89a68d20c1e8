"""The Pareto ranking: non-dominated sorting, crowding distance, ties, unfinished trials."""

import math

from versatil.status import TrialStatus
from versatil.sweep.results.pareto import (
    crowding_distance,
    dominates,
    non_dominated_sort,
    rank_rows,
)
from versatil.sweep.results.ranking import best_on_front, best_row, pareto_front, ranked
from versatil.sweep.results.rows import TrialRow


def row(trial_id, status=TrialStatus.COMPLETED, **metrics):
    return TrialRow(
        trial_id=trial_id,
        axes={},
        status=status,
        objective=metrics.get("val_loss"),
        metrics=metrics,
        epochs=2,
    )


def test_dominates_needs_no_worse_everywhere_and_better_somewhere():
    assert dominates((1, 1), (1, 2))
    assert not dominates((1, 2), (1, 2))
    assert not dominates((0, 3), (1, 2))


def test_sort_gives_fronts_in_order():
    points = {"a": (1, 4), "b": (2, 2), "c": (4, 1), "d": (3, 3), "e": (5, 5), "f": (2, 2)}
    assert non_dominated_sort(points) == [["a", "b", "c", "f"], ["d"], ["e"]]


def test_crowding_distance_extremes_are_infinite():
    points = {"a": (0, 4), "b": (1, 2), "c": (2, 1), "d": (4, 0)}
    distance = crowding_distance(["a", "b", "c", "d"], points)
    assert distance["a"] == distance["d"] == math.inf
    assert distance["b"] == (2 - 0) / 4 + (4 - 1) / 4
    assert distance["c"] == (4 - 1) / 4 + (2 - 0) / 4


def test_rank_rows_maximizes_max_objectives_and_leaves_out_unfinished():
    rows = [
        row("t1", val_loss=0.1, samples_per_sec=100.0),
        row("t2", val_loss=0.2, samples_per_sec=300.0),
        row("t3", val_loss=0.3, samples_per_sec=200.0),  # dominated by t2
        row("t4", TrialStatus.STOPPED, val_loss=0.05, samples_per_sec=900.0),
        row("t5", TrialStatus.INFEASIBLE, val_loss=math.inf),
        row("t6", val_loss=float("nan"), samples_per_sec=50.0),
    ]
    ranking = rank_rows(rows, [("val_loss", "min"), ("samples_per_sec", "max")])
    assert set(ranking.front) == {"t1", "t2"}
    assert ranking.order[-1] == "t3" and ranking.level["t3"] == 2
    assert ranking.left_out["t4"].startswith("stopped early")
    assert set(ranking.left_out) == {"t4", "t5", "t6"}
    # Both front members are extremes (infinite crowding): throughput breaks the tie.
    assert ranking.order[:2] == ["t2", "t1"] and ranking.rank["t2"] == 1


def test_best_is_never_dominated_ties_go_to_throughput():
    rows = [
        row("slow", val_loss=0.1, samples_per_sec=100.0),
        row("fast", val_loss=0.1, samples_per_sec=400.0),
        row("worse", val_loss=0.2, samples_per_sec=500.0),
    ]
    assert best_row(rows, "min").trial_id == "fast"
    ranking = rank_rows(rows, [("val_loss", "min"), ("samples_per_sec", "max")])
    assert set(ranking.front) == {"fast", "worse"}
    assert best_on_front(rows, ranking).trial_id == "fast"


def test_a_float_rounding_difference_does_not_pick_the_slower_precision():
    # A digits classifier: fp64 and fp32 both classify 350 of 360 validation samples.
    def trial(trial_id, precision, accuracy, speed):
        return TrialRow(
            trial_id=trial_id,
            axes={"precision": precision},
            status=TrialStatus.COMPLETED,
            objective=accuracy,
            metrics={"val_acc": accuracy, "samples_per_sec": speed},
            epochs=3,
        )

    rows = [trial("a", "64", 0.97222222222, 9142.0), trial("b", "32", 0.97222220898, 14411.0)]
    assert best_row(rows, "max").trial_id == "b"
    assert pareto_front(rows, "max") == {"b"}
    assert [r.trial_id for r in ranked(rows, "max")] == ["b", "a"]
    # A real difference still decides.
    rows.append(trial("c", "64", 0.98, 9000.0))
    assert best_row(rows, "max").trial_id == "c"
