"""The plan: the sweep file read once into what every phase after prepare needs."""

import io
import json
import pickle

import pytest

from versatil.sweep.config.load import load_sweep
from versatil.sweep.config.planning import make_plan
from versatil.sweep.config.shipped import shipped_sweeps
from versatil.sweep.config.trials import expand_trials
from versatil.sweep.engine.prepare import plan_json, say_changes
from versatil.sweep.plan import Plan, Sampled

SWEEPS = sorted(shipped_sweeps().values())


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_a_shipped_sweeps_plan_holds_its_trials_and_pickles(path):
    config = load_sweep(path, notes=io.StringIO())
    plan = make_plan(config)
    assert [dict(t) for t in plan.trials] == expand_trials(config)
    assert plan.planned_trials >= 1
    assert plan.axis_names == tuple(config.axis_names)
    # What Ray hands every worker: the trial's part, pickled and read back the same.
    assert pickle.loads(pickle.dumps(plan.trial)) == plan.trial
    # plan.json: plain JSON, and a plan compared with itself has no changes.
    document = json.loads(plan_json(plan))
    assert document["name"] == config.name
    assert plan.changes(document) == []


def test_the_plan_says_how_its_reference_was_chosen(sweep_config):
    listed = make_plan(sweep_config(space={"precision": ["bf16-mixed", "bf16-true"]}))
    assert dict(listed.reference.settings) == {"precision": "bf16-mixed"}
    assert "has no eager fp32 baseline" in listed.reference.chosen
    eager = make_plan(sweep_config(space={"precision": ["32", "bf16-mixed"]}))
    assert dict(eager.reference.settings) == {"precision": "32"}
    assert eager.reference.chosen == "eager fp32" and eager.reference.compares


def test_the_plan_resolves_resources_for_the_trials_and_the_re_timing(sweep_config):
    plan = make_plan(sweep_config(resources={"gpu": 0.5, "cpu": 2}, trainer={"accelerator": "gpu"}))
    assert plan.resources.gpus == 0.5 and plan.resources.shares_gpu
    assert plan.resources.retime == {"num_cpus": 2, "num_gpus": 1}
    assert plan.trial.resources is plan.resources
    cpu = make_plan(sweep_config())
    assert cpu.resources.gpus == 0 and cpu.resources.devices_per_trial == 1.0


def test_the_plan_types_its_axes_and_counts_its_budget(sweep_config):
    config = sweep_config(
        space={"precision": ["32", "bf16-mixed"], "lr": {"loguniform": [1e-4, 1e-2]}},
        search={"algorithm": "random", "num_samples": 3},
        scheduler={"type": "asha", "grace_period": 1},
        replicates=2,
    )
    plan = make_plan(config)
    assert plan.space["lr"] == Sampled("loguniform", (1e-4, 1e-2))
    assert plan.space["precision"] == ("32", "bf16-mixed")
    assert plan.search.seeds == (0, 1) and plan.axis_names[-1] == "seed"
    assert plan.budget.max_epochs == 2 and plan.budget.unit == "epochs"
    assert (plan.scheduler.type, plan.scheduler.max_t) == ("asha", 2)
    assert plan.tune_samples == len(plan.points) == 6  # 3 samples, each of 2 seeds


def test_a_resume_says_what_changed_in_its_plan(sweep_config, tmp_path):
    first = make_plan(sweep_config(space={"precision": ["32", "bf16-mixed"]}))
    earlier = tmp_path / "t-20261207-010000" / "plan.json"
    earlier.parent.mkdir()
    earlier.write_text(plan_json(first))
    out = io.StringIO()
    assert say_changes(first, earlier, out) == [] and out.getvalue() == ""

    changed = make_plan(
        sweep_config(space={"precision": ["32", "bf16-mixed", "bf16-true"]}, max_failures=3)
    )
    lines = say_changes(changed, earlier, out)
    assert "resources.max_failures: 1 -> 3" in lines
    assert "trials: 2 -> 3 entries" in lines
    said = out.getvalue()
    assert said.startswith("resume: the plan differs from the one t-20261207-010000 started")
    assert "resources.max_failures: 1 -> 3" in said


def test_a_resume_of_a_run_without_a_plan_says_nothing(sweep_config, tmp_path):
    out = io.StringIO()
    plan = make_plan(sweep_config())
    assert say_changes(plan, tmp_path / "plan.json", out) == [] and out.getvalue() == ""


def test_the_plan_is_a_frozen_record(sweep_config):
    plan = make_plan(sweep_config())
    assert isinstance(plan, Plan)
    with pytest.raises(AttributeError):
        plan.name = "other"  # type: ignore[misc]
