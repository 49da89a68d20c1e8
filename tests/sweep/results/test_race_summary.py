"""A race in the answer: the settings it did not train and why, and the compute it spent."""

import pytest

from versatil.status import TrialStatus
from versatil.sweep.results.race import (
    NOT_TRAINED_ANSWER,
    compute_summary,
    compute_text,
    race_summary,
    race_text,
    screen_metrics,
)
from versatil.sweep.results.rows import TrialRow

SCREEN = {
    "samples_per_sec": {
        "32 + eager": [10.0] * 9,
        "64 + eager": [5.0] * 9,
        "32 + default": [12.0] * 9,
    },
    "wall_s": 31.5,
    "device": "CPU",
    "threshold": 40.0,
    "groups": [["32 + default"], ["bf16-true + eager"]],
    "settings": [
        {"label": "32 + eager", "setting": ["32", "none", "highest"], "call": "reference"},
        {
            "label": "64 + eager",
            "setting": ["64", "none", "highest"],
            "call": "eliminated",
            "speedup": [0.5, 0.49, 0.51],
            "rounds": 7,
        },
        {
            "label": "32 + default",
            "setting": ["32", "default", "highest"],
            "call": "racing",
            "speedup": [1.2, 1.1, 1.3],
            "rounds": 9,
        },
        {
            "label": "bf16-true + eager",
            "setting": ["bf16-true", "none", "highest"],
            "call": "racing",
            "speedup": [1.05, 1.0, 1.1],
            "rounds": 9,
        },
        {
            "label": "16-mixed + eager",
            "setting": ["16-mixed", "none", "highest"],
            "call": "infeasible",
        },
    ],
}


def _row(trial_id, precision, compile_mode, status=TrialStatus.COMPLETED, seconds=10.0):
    return TrialRow(
        trial_id=trial_id,
        axes={"precision": precision, "compile_mode": compile_mode},
        status=status,
        objective=0.1,
        metrics={"time_total_s": seconds},
        epochs=2,
    )


ROWS = [
    _row("a", "32", "none"),
    _row("b", "32", "default", seconds=8.0),
    _row("c", "16-mixed", "none", status=TrialStatus.INFEASIBLE, seconds=0.5),
]


def test_each_setting_says_whether_it_trained_and_why_not():
    race = race_summary(SCREEN, ROWS, answer="32 + default")
    by_label = {s["label"]: s for s in race["settings"]}
    assert by_label["32 + default"]["trained"] and by_label["32 + default"]["not_trained"] is None
    assert by_label["64 + eager"]["not_trained"] == (
        "out in the screen: slower than 32 + eager (round 7)"
    )
    assert by_label["bf16-true + eager"]["not_trained"] == NOT_TRAINED_ANSWER
    assert not by_label["16-mixed + eager"]["trained"]  # an infeasible trial trained nothing
    assert race["rounds"] == 9 and race["wall_s"] == 31.5
    text = race_text(race)
    assert "race: screened 4 settings in 9 paired rounds (31.5 s on CPU)" in text
    assert "race: 64 + eager: out in the screen: slower than 32 + eager (round 7) (0.50x" in text
    assert f"race: bf16-true + eager: {NOT_TRAINED_ANSWER} (1.05x, 95% CI 1.00-1.10x)" in text
    assert text.endswith("race: trained 32 + eager, 32 + default")


def test_where_the_race_stopped_is_not_the_answer_in_the_end_the_reason_says_so():
    """The re-timing found the setting the race stopped at a tie: the reference answers."""
    race = race_summary(SCREEN, ROWS, answer="32 + eager")
    by_label = {s["label"]: s for s in race["settings"]}
    assert by_label["bf16-true + eager"]["not_trained"] == (
        "not trained: ranked below 32 + default in the screen, where the race stopped"
    )


def test_rounds_that_could_not_be_timed_are_null_not_nan():
    screen = {**SCREEN, "samples_per_sec": {"32 + eager": [10.0, float("nan")]}}
    race = race_summary(screen, ROWS)
    assert race["samples_per_sec"] == {"32 + eager": [10.0, None]}
    assert screen_metrics(race)["race/32_eager/samples_per_sec"] == [10.0]


def test_a_screen_without_rounds_says_so():
    screen = {"infeasible": {}, "labels": ["32 + eager"], "settings": []}
    assert race_text(race_summary(screen, ROWS)) == (
        "race: not screened (fewer than two feasible settings with the reference)"
    )


def test_compute_is_device_seconds_by_phase_and_the_trials_not_trained():
    compute = compute_summary(ROWS, 2.0, 16, SCREEN, {"wall_s": 4.0})
    assert compute["device_s"] == {
        "screen": 31.5,
        "training": pytest.approx(2.0 * 18.5),
        "retiming": 4.0,
        "total": pytest.approx(31.5 + 37.0 + 4.0),
    }
    assert compute["trials_run"] == 3 and compute["trials_not_trained"] == 13
    assert compute_text(compute) == (
        "compute: 72.5 device-s (screen 31.5, training 37.0, retiming 4.0); "
        "13 of 16 trials not trained"
    )
    grid = compute_summary(ROWS, 1.0, 3)
    assert compute_text(grid) == "compute: 18.5 device-s (training 18.5)"


def test_the_screens_speedups_are_parent_metrics():
    metrics = screen_metrics(race_summary(SCREEN, ROWS))
    assert metrics["race/64_eager/speedup"] == [0.5]
    assert metrics["race/32_default/speedup_ci_low"] == [1.1]
    assert "race/32_eager/speedup" not in metrics
    # the rounds themselves, one value per round
    assert metrics["race/32_eager/samples_per_sec"] == [10.0] * 9
    assert metrics["race/64_eager/samples_per_sec"] == [5.0] * 9


def test_a_failed_screen_says_every_setting_trained():
    race = race_summary({"infeasible": {}, "failed": "out of memory", "settings": []}, ROWS)
    assert (
        race_text(race) == "race: not screened (out of memory): every setting trained, as in a grid"
    )


def test_the_race_spells_settings_as_the_verdict_does():
    """The space listed matmul high, the screen took it out: the trials never show matmul."""
    screen = {
        "samples_per_sec": {
            "32 + eager + matmul highest": [10.0],
            "32 + eager + matmul high": [9.0],
        },
        "settings": [
            {
                "label": "32 + eager + matmul highest",
                "setting": ["32", "none", "highest"],
                "call": "reference",
            },
            {
                "label": "32 + eager + matmul high",
                "setting": ["32", "none", "high"],
                "call": "eliminated",
                "rounds": 7,
            },
        ],
    }
    race = race_summary(screen, [_row("a", "32", "none")])
    assert [s["label"] for s in race["settings"]] == ["32 + eager", "32 + eager + matmul high"]
    assert (
        race["settings"][1]["not_trained"] == "out in the screen: slower than 32 + eager (round 7)"
    )
    assert set(race["samples_per_sec"]) == {"32 + eager", "32 + eager + matmul high"}
