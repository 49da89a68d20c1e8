"""A run that never reached the target says so: its child run's tags, at the sweep's end."""

from tests.sweep.results.test_target import Record
from tests.sweep.results.test_verdict import row
from versatil.sweep.config.planning import make_plan
from versatil.sweep.engine.conclude import conclude
from versatil.sweep.engine.tracker import sweep_end
from versatil.sweep.results.target import target_tags


def test_each_trial_run_says_whether_it_reached_the_target(sweep_config):
    config = sweep_config(space={"precision": ["32", "bf16-mixed"]})
    rows = [row("a", "32", "none", 0.2, 100.0), row("b", "bf16-mixed", "none", 0.25, 190.0)]
    records = [
        Record("a", [(1.0, 0.4), (1.0, 0.2)]),  # eager fp32 reaches its own final 0.2
        Record("b", [(0.5, 0.4), (0.5, 0.25)]),  # never within 1% of 0.2
    ]
    timed, judgement = conclude(make_plan(config), rows, records)
    assert "time_to_target_s" in timed[0].metrics and "time_to_target_s" not in timed[1].metrics
    end = sweep_end(timed, judgement)
    assert end.child_tags["a"]["versatil.target_reached"] == "true"
    assert end.child_tags["b"]["versatil.target_reached"] == "false"
    assert end.child_tags["b"]["versatil.target"] == repr(judgement.verdict.target) == "0.2"
    assert end.parent_tags["versatil.target"] == "0.2"


def test_no_target_no_tags():
    rows = [row("a", "32", "none", 0.2, 100.0)]
    assert target_tags(rows, None) == {}
    assert target_tags(rows, 0.1) == {
        "a": {"versatil.target_reached": "false", "versatil.target": "0.1"}
    }
