"""The reference always trains: searchers suggest it first, schedulers keep it to the end."""

import io
import json

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, TrialScheduler
from ray.tune.schedulers.pbt import _PBTTrialState

from tests.sweep.engine.test_space import optuna_generator, started_by_tune
from versatil.sweep.config.planning import make_plan
from versatil.sweep.config.trials import expand_trials, reference_point
from versatil.sweep.engine import tune_objects
from versatil.sweep.engine.keep_reference import KeepReferenceASHA, KeepReferencePBT
from versatil.sweep.engine.runner import run_sweep


def make_scheduler(config):
    return tune_objects.make_scheduler(make_plan(config))


SETTINGS = {"precision": ["bf16-mixed", "32"], "compile_mode": ["default", "none"]}
EAGER_FP32 = {"precision": "32", "compile_mode": "none"}


def started_order(experiment_dir):
    """The sweep's trial ids in the order Tune created them (its tags count from 1)."""
    (snapshot,) = experiment_dir.glob("experiment_state-*.json")
    trials = [json.loads(t) for t, _ in json.loads(snapshot.read_text())["trial_data"]]
    counted = {int(t["experiment_tag"].split("_")[0]): t["trial_id"] for t in trials}
    return [counted[n] for n in sorted(counted)]


def trial(trial_id, **config):
    return Trial("trainable", config=config, trial_id=trial_id, stub=True)


def asha(cls, **extra):
    return cls(
        time_attr="training_iteration", max_t=4, grace_period=1, reduction_factor=2,
        metric="val_loss", mode="min", **extra,
    )  # fmt: skip


def test_asha_would_stop_the_reference_and_the_kept_one_continues():
    """The same results: Tune's ASHA stops eager fp32 at the first rung, ours continues it."""
    decisions = {}
    for cls, extra in ((ASHAScheduler, {}), (KeepReferenceASHA, {"reference": EAGER_FP32})):
        scheduler = asha(cls, **extra)
        trials = [
            trial("a", precision="bf16-mixed", compile_mode="none", lr=0.1),
            trial("b", precision="bf16-mixed", compile_mode="default", lr=0.1),
            trial("ref", precision="32", compile_mode="none", lr=0.1),
            trial("c", precision="bf16-mixed", compile_mode="none", lr=0.2),
        ]
        for t in trials:
            scheduler.on_trial_add(None, t)
        losses = {"a": 0.1, "b": 0.2, "ref": 5.0, "c": 6.0}  # eager fp32 nearly the worst
        decisions[cls] = {
            t.trial_id: scheduler.on_trial_result(
                None, t, {"training_iteration": 1, "val_loss": losses[t.trial_id]}
            )
            for t in trials
        }
    assert decisions[ASHAScheduler]["ref"] == TrialScheduler.STOP
    kept = decisions[KeepReferenceASHA]
    assert kept["ref"] == TrialScheduler.CONTINUE
    # Every other decision is ASHA's own: the worst non-reference trial is still stopped.
    others = {k: v for k, v in kept.items() if k != "ref"}
    assert others == {k: v for k, v in decisions[ASHAScheduler].items() if k != "ref"}
    assert others["c"] == TrialScheduler.STOP


def test_only_the_first_reference_configuration_is_kept_once_per_seed():
    scheduler = asha(KeepReferenceASHA, reference=EAGER_FP32)
    first = trial("r0", precision="32", compile_mode="none", lr=0.01, seed=0)
    replicate = trial("r1", precision="32", compile_mode="none", lr=0.01, seed=1)
    other_lr = trial("r2", precision="32", compile_mode="none", lr=0.3, seed=0)
    compiled = trial("c", precision="32", compile_mode="default", lr=0.01, seed=0)
    for t in (compiled, first, replicate, other_lr):
        scheduler.on_trial_add(None, t)
    assert [scheduler.keeps(t) for t in (first, replicate, other_lr, compiled)] == [
        True, True, False, False,
    ]  # fmt: skip
    # A sweep of one setting keeps nothing: every trial is the reference.
    plain = asha(KeepReferenceASHA, reference=None)
    plain.on_trial_add(None, first)
    assert not plain.keeps(first)


def test_pbt_never_exploits_the_reference():
    pbt = KeepReferencePBT(
        time_attr="training_iteration", metric="val_loss", mode="min",
        perturbation_interval=1, quantile_fraction=0.5,
        hyperparam_mutations={"lr": [0.1, 0.2]}, reference=EAGER_FP32,
    )  # fmt: skip
    ref = trial("ref", precision="32", compile_mode="none", lr=0.1)
    others = [trial(f"t{i}", precision="bf16-mixed", compile_mode="none", lr=0.1) for i in "01"]
    good = trial("good", precision="bf16-mixed", compile_mode="default", lr=0.1)
    # PBT's on_trial_add needs a running Tune controller: its trials' states are set here,
    # each with its last score, as PBT records them at a perturbation interval.
    for t, loss in ((ref, 9.0), (others[0], 0.3), (others[1], 0.2), (good, 0.1)):
        pbt._note(t)
        pbt._trial_state[t] = _PBTTrialState(t)
        pbt._trial_state[t].last_score = -loss  # PBT maximizes -val_loss
    lower, upper = pbt._quantiles()
    assert ref not in lower and others[0] in lower  # the worst: left out of the exploited
    assert upper == [others[1], good]


def test_random_search_suggests_the_reference_first(sweep_config):
    config = sweep_config(
        space={**SETTINGS, "lr": {"loguniform": [1e-4, 1e-2]}, "width": {"randint": [8, 16]}},
        search={"algorithm": "random", "num_samples": 3, "seed": 5},
    )
    names = config.axis_names
    started = [dict(zip(names, t, strict=True)) for t in started_by_tune(config)]
    # Eager fp32, at the middle of each range: the geometric middle of the loguniform.
    assert started[0] == {**EAGER_FP32, "lr": pytest.approx(1e-3), "width": 12}
    assert len(started) == 3
    assert expand_trials(config)[0] == started[0]  # the dry run lists it first too


def test_a_space_without_eager_fp32_suggests_its_first_listed_setting_first(sweep_config):
    config = sweep_config(
        space={"precision": ["bf16-mixed", "bf16-true"], "compile_mode": ["default", "none"]},
        search={"algorithm": "random", "num_samples": 2},
    )
    assert reference_point(config) == {"precision": "bf16-mixed", "compile_mode": "none"}
    assert started_by_tune(config)[0] == ("bf16-mixed", "none")


def test_optuna_suggests_the_reference_first_once_per_seed(sweep_config):
    config = sweep_config(
        space={**SETTINGS, "lr": {"uniform": [0.01, 0.03]}},
        search={"algorithm": "optuna", "num_samples": 2, "seed": 1},
        replicates=2,
    )
    generator = optuna_generator(config, num_samples=4)
    first, second = generator.next_trial().config, generator.next_trial().config
    assert first == {**EAGER_FP32, "lr": pytest.approx(0.02), "seed": 0}
    assert second == {**first, "seed": 1}


def test_grid_sweeps_and_sweeps_of_one_setting_are_unchanged(sweep_config):
    grid = sweep_config(space=SETTINGS)
    assert reference_point(grid) is None
    assert started_by_tune(grid)[0] == ("bf16-mixed", "default")  # the grid's own order
    one = sweep_config(
        space={"precision": ["bf16-mixed"], "lr": {"loguniform": [1e-4, 1e-2]}},
        search={"algorithm": "random", "num_samples": 2},
        scheduler={"type": "asha"},
    )
    assert reference_point(one) is None
    assert make_scheduler(one)._reference is None


@pytest.mark.slow
def test_optuna_with_asha_trains_eager_fp32_first_and_to_the_full_budget(ray_cluster, sweep_config):
    """A real sweep: the first trial started is eager fp32, and it trains every epoch.

    Its runs also say whether each trial reached the target (eager fp32's best objective).
    """
    from mlflow.tracking import MlflowClient

    from versatil.sweep.tracking import child_runs

    config = sweep_config(
        space={"precision": ["bf16-true", "32"], "lr": {"loguniform": [1e-4, 1e-1]}},
        search={"algorithm": "optuna", "num_samples": 3, "seed": 0},
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
        max_concurrent_trials=1,  # trials start one after another, in the searcher's order
    )
    outcome = run_sweep(config, stream=io.StringIO())
    rows = outcome.rows
    assert len(rows) == 3
    order = started_order(outcome.experiment_dir)
    first = next(r for r in rows if r.trial_id == order[0])
    assert first.axes["precision"] == "32"
    assert first.axes["lr"] == pytest.approx(10**-2.5)
    assert first.status == "completed" and first.epochs == 3
    # A run that never reached the target says so; one that reached it has its time.
    client = MlflowClient(outcome.tracking.tracking_uri)
    parent = client.get_run(outcome.tracking.parent_run_id)
    target = parent.data.tags["versatil.target"]
    runs = {r.data.tags["versatil.trial_id"]: r for r in child_runs(client, outcome.tracking)}
    assert set(runs) == {r.trial_id for r in rows}
    for run in runs.values():
        reached = "time_to_target_s" in run.data.metrics
        assert run.data.tags["versatil.target_reached"] == str(reached).lower()
        assert run.data.tags["versatil.target"] == target
    # The target is eager fp32's best objective: its best trial reached it.
    eager = [r for r in rows if r.axes["precision"] == "32" and r.status == "completed"]
    best = min(eager, key=lambda r: r.objective)
    assert runs[best.trial_id].data.tags["versatil.target_reached"] == "true"
