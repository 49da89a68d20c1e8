"""Compile's cost and health in the answer: compile time, break-even, graphs, recompiles."""

import pytest

from versatil.stats import Estimate
from versatil.status import TrialStatus
from versatil.sweep.results.compile_cost import (
    COMPILE_KEYS,
    CompileCost,
    break_even,
    compile_cell,
    compile_cost,
    compile_note,
    compile_notes,
    duration_text,
)
from versatil.sweep.results.rows import TrialRow
from versatil.sweep.results.table import summary_table
from versatil.sweep.results.verdict import make_verdict


def row(trial_id, compile_mode, speed, seed=0, compile_s=None, noise=0.02, **counts):
    """A finished trial at ``speed`` samples/s; compiled ones report their compile health."""
    metrics = {
        "val_loss": 0.2,
        "samples_per_sec": speed,
        "samples_per_sec_median": speed,
        "samples_per_sec_ci_low": speed * (1 - noise),
        "samples_per_sec_ci_high": speed * (1 + noise),
        "throughput_windows": 8.0,
        "throughput_too_short": 0.0,
    }
    if compile_mode != "none":
        metrics["compile_time_s"] = compile_s
        metrics.update({f"compile/{name}": float(value) for name, value in counts.items()})
    return TrialRow(
        trial_id=trial_id,
        axes={"precision": "32", "compile_mode": compile_mode, "seed": seed},
        status=TrialStatus.COMPLETED,
        objective=0.2,
        metrics=metrics,
        epochs=2,
    )


HEALTHY = {"graphs": 2, "graph_breaks": 0, "recompiles": 1}


def test_break_even_is_compile_seconds_over_the_share_of_time_saved():
    # 1.22x: each second of eager training takes 1/1.22 s compiled, saving 0.18 s.
    speedup = Estimate(1.22, 1.20, 1.23, 6)
    assert break_even(10.6, speedup) == pytest.approx(10.6 / (1 - 1 / 1.22))
    assert break_even(10.6, speedup) == pytest.approx(58.78, abs=0.01)
    assert break_even(None, speedup) is None


@pytest.mark.parametrize(
    "speedup",
    [
        Estimate(1.05, 0.98, 1.12, 4),  # above 1, but not beyond noise
        Estimate(0.5, 0.45, 0.55, 4),  # slower
        Estimate(1.3, 1.1, float("inf"), 1),  # no interval
        None,  # unmeasured
    ],
)
def test_no_break_even_unless_the_speedup_is_above_1_beyond_noise(speedup):
    assert break_even(10.0, speedup) is None


def test_a_settings_compile_cost_is_the_median_over_its_trials():
    rows = [
        row("a", "default", 120, compile_s=9.0, graphs=2, graph_breaks=0, recompiles=1),
        row("b", "default", 120, compile_s=11.0, graphs=2, graph_breaks=0, recompiles=1),
        row("c", "default", 120, compile_s=30.0, graphs=4, graph_breaks=1, recompiles=3),
    ]
    cost = compile_cost(rows, Estimate(1.5, 1.4, 1.6, 3))
    assert cost == CompileCost(11.0, 2.0, 0.0, 1.0, break_even_s=pytest.approx(33.0))
    assert compile_cost([row("e", "none", 100)], None) is None  # an eager setting


def test_trials_that_loaded_their_graphs_from_the_cache_do_not_set_the_compile_time():
    cold = row("a", "default", 120, compile_s=12.0, **HEALTHY)
    warm = row("b", "default", 120, compile_s=0.5, **HEALTHY)
    warm.metrics["compile/cache_loaded"] = 1.0
    assert compile_cost([cold, warm, warm], None).compile_s == 12.0
    assert compile_cost([warm], None).compile_s == 0.5  # the only time there is


def test_a_faster_compiled_setting_carries_its_break_even_in_the_answer():
    rows = [row(f"e{s}", "none", 100.0, seed=s) for s in range(3)]
    rows += [row(f"c{s}", "default", 122.0, seed=s, compile_s=10.6, **HEALTHY) for s in range(3)]
    verdict = make_verdict(rows, "val_loss", "min")
    eager, compiled = verdict.settings
    assert compiled.speed_call == "faster"
    answer = compiled.as_dict()
    assert answer["break_even_s"] == pytest.approx(10.6 / (1 - 1 / 1.22))
    assert (answer["compile_s"], answer["compile_graphs"], answer["compile_recompiles"]) == (
        10.6,
        2.0,
        1.0,
    )
    assert compile_note(compiled) == "compiles in 10.6 s, pays off after 58.8 s of training"
    assert compile_cell(compiled.compile) == "2 graphs, 0 breaks, 1 recompile, 10.6 s"
    # An eager setting carries every key, empty.
    assert {k: eager.as_dict()[k] for k in COMPILE_KEYS} == dict.fromkeys(COMPILE_KEYS)
    assert compile_note(eager) == "" and compile_cell(eager.compile) == "-"
    assert compile_notes(verdict.settings) == [f"{compiled.label}: {compile_note(compiled)}"]
    # The recommendation says when compiling pays off.
    assert verdict.recommended_setting == compiled.label
    assert "it compiles in 10.6 s, pays off after 58.8 s of training." in verdict.text


def test_break_even_follows_the_confirmed_speedup():
    rows = [row("e", "none", 100.0), row("c", "default", 122.0, compile_s=10.0, **HEALTHY)]
    setting = ("32", "default", "highest")
    confirmed = make_verdict(rows, "val_loss", "min", confirmed={setting: Estimate(2, 1.9, 2.1, 6)})
    assert confirmed.settings[1].compile.break_even_s == pytest.approx(20.0)
    tie = make_verdict(rows, "val_loss", "min", confirmed={setting: Estimate(1.1, 0.9, 1.3, 6)})
    assert tie.settings[1].compile.break_even_s is None
    assert compile_note(tie.settings[1]) == (
        "compiles in 10 s, no speedup beyond noise to pay it off"
    )


def test_a_slower_compiled_setting_names_its_recompiles_and_graph_breaks():
    rows = [
        row("e", "none", 100.0),
        row("c", "default", 49.0, compile_s=20.0, graphs=5, graph_breaks=2, recompiles=4),
    ]
    verdict = make_verdict(rows, "val_loss", "min")
    slower = verdict.settings[1]
    assert slower.speed_call == "slower" and slower.compile.break_even_s is None
    assert compile_note(slower) == "slower: 4 recompiles, 2 graph breaks"
    assert slower.as_dict()["break_even_s"] is None
    clean = make_verdict(
        [row("e", "none", 100.0), row("c", "default", 49.0, compile_s=3.0, **HEALTHY)],
        "val_loss",
        "min",
    )
    assert compile_note(clean.settings[1]) == "slower: 1 recompile"
    counted = CompileCost(3.0, 1.0, 0.0, 0.0)
    assert "no recompile or graph break (1 graph)" in compile_note(
        type("R", (), {"label": "x", "speed_call": "slower", "compile": counted})()
    )


def test_the_summary_table_shows_each_compiled_trials_graphs_breaks_and_recompiles():
    rows = [
        row("e", "none", 100.0),
        row("c", "default", 49.0, compile_s=20.0, graphs=5, graph_breaks=2, recompiles=4),
    ]
    table = summary_table(rows, "val_loss")
    header, eager, compiled = table.splitlines()
    assert "compile" in header.split()
    assert "5 graphs, 2 breaks, 4 recompiles" in compiled
    assert eager.split()[-3] == "-"  # compile, epochs, status
    assert "compile" not in summary_table(rows[:1], "val_loss").splitlines()[0].split()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.354, "0.354 s"), (10.2, "10.2 s"), (59.0, "59 s"), (150.0, "2.5 min"), (11160, "3.1 h")],
)
def test_durations_read_in_seconds_minutes_or_hours(seconds, text):
    assert duration_text(seconds) == text
