"""Multi-objective sweeps end to end: real Ray Tune, Lightning trials and MLflow server.

The front, the tags and the verdict are checked against numbers computed here, from the
MLflow runs' own metrics, without calling versatil's ranking.
"""

import contextlib
import io
import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from versatil.cli_common import run_main
from versatil.sweep.cli.main import main
from versatil.sweep.tracking import child_runs

pytestmark = pytest.mark.slow  # every test runs a sweep on the Ray cluster

OBJECTIVES = {"val_loss": "min", "samples_per_sec": "max"}


def non_dominated(points):
    """Trial ids of ``points`` (id -> (val_loss, samples_per_sec)) no other point dominates."""
    front = set()
    for trial, (loss, speed) in points.items():
        beaten = any(
            other_loss <= loss
            and other_speed >= speed
            and (other_loss, other_speed) != (loss, speed)
            for other, (other_loss, other_speed) in points.items()
            if other != trial
        )
        if not beaten:
            front.add(trial)
    return front


def test_front_tags_and_verdict_match_the_runs(ray_cluster, mlflow_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = {
        "name": "multi",
        "task": {"name": "reaching", "params": {"n_episodes": 16, "horizon": 10, "width": 16}},
        "objective": {"metrics": OBJECTIVES, "tolerance": 0.05},
        "space": {"precision": ["32", "bf16-mixed", "bf16-true", "64"], "lr": 0.01},
        "search": {"algorithm": "grid"},
        "trainer": {"max_epochs": 2, "accelerator": "cpu"},
        "storage_path": str(tmp_path / "runs"),
        "max_concurrent_trials": 2,
        # The trials' own timing decides here; the re-timing has tests/sweep/engine/test_confirm.py.
        "confirm": {"enabled": "off"},
    }
    (tmp_path / "multi.yaml").write_text(yaml.safe_dump(sweep, sort_keys=False))
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = run_main(main, ["--config", "multi.yaml", "--tracking-uri", mlflow_server])
    out = stdout.getvalue()
    assert code == 0, stderr.getvalue()[-3000:]

    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("multi")
    (parent,) = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`versatil.objective` != ''"
    )
    assert json.loads(parent.data.tags["versatil.objectives"]) == [
        list(o) for o in OBJECTIVES.items()
    ]
    children = child_runs(client, type("C", (), {
        "experiment_id": experiment.experiment_id, "parent_run_id": parent.info.run_id
    }))  # fmt: skip
    assert len(children) == 4
    finished = {
        run.data.tags["versatil.trial_id"]: run
        for run in children
        if run.data.tags["versatil.status"] == "completed"
    }
    assert len(finished) >= 3
    points = {
        t: (run.data.metrics["val_loss"], run.data.metrics["samples_per_sec"])
        for t, run in finished.items()
    }
    front = non_dominated(points)

    # Tags: versatil.pareto on every run, a rank 1..n on every finished one, front first.
    tagged = {r.data.tags["versatil.trial_id"]: r.data.tags for r in children}
    assert {t for t, tags in tagged.items() if tags["versatil.pareto"] == "true"} == front
    ranks = {t: int(tagged[t]["versatil.pareto_rank"]) for t in finished}
    assert sorted(ranks.values()) == list(range(1, len(finished) + 1))
    assert {t for t, r in ranks.items() if r <= len(front)} == front

    # The summary marks exactly the front; the best is on it and best in val_loss there.
    table = out[: out.index("\n\n", out.index(" trial "))]
    marked = {line.split()[2] for line in table.splitlines() if line[:1] in "*P" and line.strip()}
    assert marked == front
    best = min(front, key=lambda t: (points[t][0], -points[t][1]))
    assert parent.data.tags["versatil.best_trial_id"] == best
    assert f"Pareto set of val_loss (min), samples_per_sec (max): {len(front)} of" in out

    # The verdict, from the runs' numbers: a setting beats eager fp32 only when its speed's
    # interval over eager fp32's (low over high) lies above 1 and its val_loss is at most 5%
    # worse; the fastest such one is recommended, or eager fp32 itself when none is.
    precision = {t: finished[t].data.params["precision"] for t in finished}
    (baseline,) = [t for t in finished if precision[t] == "32"]
    metrics = {t: run.data.metrics for t, run in finished.items()}

    def interval(t):
        m = metrics[t]
        if m.get("throughput_too_short") or "samples_per_sec_ci_low" not in m:
            return None
        return (
            m["samples_per_sec_ci_low"],
            m["samples_per_sec_median"],
            m["samples_per_sec_ci_high"],
        )

    base = interval(baseline)
    winners = {}
    for t in finished:
        if t == baseline or base is None or interval(t) is None:
            continue
        low, median, _ = interval(t)
        change = (points[t][0] - points[baseline][0]) / abs(points[baseline][0])
        if low / base[2] > 1 and change <= 0.05:
            winners[t] = median / base[1]
    verdict = parent.data.tags["versatil.verdict"]
    # The summary leads with it, before the trials' table.
    assert f"\n\n{verdict}\n\n" in out[: out.index(" trials in ")]
    if not winners:
        assert verdict.endswith(
            f"Recommended: 32 + eager, the eager fp32 baseline (trial {baseline})."
        )
    else:
        assert any(
            verdict.startswith(
                f"Recommended: {precision[t]} + eager: {ratio:.2f}x eager fp32 (95% CI "
            )
            for t, ratio in winners.items()
        ), verdict

    # The front plot is written next to the sweep and logged to the parent run.
    plot = Path(
        next(line for line in out.splitlines() if line.startswith("plots: ")).split(", ")[-1]
    )
    assert plot.name == "pareto_front.png" and plot.stat().st_size > 10_000
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert "report/pareto_front.png" in logged

    # compress --pareto (its default) takes exactly the sweep's own Pareto set.
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = run_main(
            main, ["compress", "multi", "--tracking-uri", mlflow_server, "--backend", "torch.ao"]
        )
    assert code == 0
    line = next(x for x in stdout.getvalue().splitlines() if x.startswith("compress: sweep"))
    assert "the Pareto set of val_loss (min), samples_per_sec (max)" in line
    assert set(line.rpartition("trials: ")[2].split(", ")) == front


def test_optuna_samples_several_objectives_and_asha_stops_on_one(ray_cluster, sweep_config):
    from ray.tune.search.optuna import OptunaSearch

    from versatil.sweep.config.planning import make_plan
    from versatil.sweep.engine.runner import run_sweep
    from versatil.sweep.engine.tune_objects import make_scheduler, make_searcher

    config = sweep_config(
        name="multi-optuna",
        objective={"metrics": OBJECTIVES},
        space={"precision": ["32", "bf16-mixed"], "lr": {"loguniform": [1e-5, 1e-2]}},
        search={"algorithm": "optuna", "num_samples": 4, "seed": 0},
        scheduler={"type": "asha", "metric": "val_loss", "grace_period": 1},
        trainer={"max_epochs": 3, "accelerator": "cpu"},
    )
    searcher = make_searcher(make_plan(config))
    assert isinstance(searcher, OptunaSearch)
    assert (searcher.metric, searcher.mode) == (["val_loss", "samples_per_sec"], ["min", "max"])
    scheduler = make_scheduler(make_plan(config))
    assert (scheduler.metric, scheduler._mode) == ("val_loss", "min")

    outcome = run_sweep(config, stream=io.StringIO())
    assert len(outcome.rows) == 4 and len({r.axes["lr"] for r in outcome.rows}) == 4
    completed = {r.trial_id for r in outcome.rows if r.status == "completed"}
    stopped = {r.trial_id for r in outcome.rows if r.status == "stopped"}
    assert completed | stopped == {r.trial_id for r in outcome.rows}
    ranking = outcome.judgement.ranking
    # Only finished trials are ranked; a trial ASHA stopped is left out, and says why.
    assert set(ranking.order) == completed
    assert {t for t, why in ranking.left_out.items() if why.startswith("stopped early")} == stopped
    assert outcome.best is None or outcome.best.trial_id in ranking.front
    client = MlflowClient(outcome.tracking.tracking_uri)
    tags = {
        r.data.tags["versatil.trial_id"]: r.data.tags for r in child_runs(client, outcome.tracking)
    }
    assert {t for t, tag in tags.items() if tag["versatil.pareto"] == "true"} == set(ranking.front)
    assert all("versatil.pareto_rank" not in tags[t] for t in stopped)
