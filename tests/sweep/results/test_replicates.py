"""Seeds as replicates, end to end: real Ray Tune trials, a real ``mlflow server``."""

import io
import statistics
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.tracking import child_runs

pytestmark = pytest.mark.slow  # a sweep on the Ray cluster


def test_replicates_seed_group_and_summarise(ray_cluster, mlflow_server, sweep_config):
    config = sweep_config(
        name="replicated",
        space={"precision": ["32", "bf16-mixed"], "lr": 0.01},
        replicates=2,
        trainer={"max_epochs": 2, "accelerator": "cpu", "seed": 3},
    )
    outcome = run_sweep(config, stream=io.StringIO(), tracking_uri=mlflow_server)
    assert len(outcome.rows) == 4 and {r.status for r in outcome.rows} == {"completed"}

    client = MlflowClient(mlflow_server)
    children = child_runs(client, outcome.tracking)
    assert len(children) == 4
    groups = {}
    for run in children:
        seed = run.data.params["seed"]
        assert run.info.run_name.endswith(f"/seed={seed}")
        groups.setdefault(run.data.tags["versatil.configuration"], []).append(run)
    assert set(groups) == {"32/lr=0.01", "bf16-mixed/lr=0.01"}
    for runs in groups.values():
        assert sorted(r.data.params["seed"] for r in runs) == ["3", "4"]
        losses = [r.data.metrics["val_loss"] for r in runs]
        assert losses[0] != losses[1], "the seed did not reach the fit"
        tags = {r.data.tags["versatil.objective_over_seeds"] for r in runs}
        (text,) = tags
        mean, _, rest = text.partition(" ± ")
        assert float(mean) == pytest.approx(statistics.fmean(losses), rel=1e-5)
        assert rest.endswith("(2 seeds)")

    # The summary on the parent run: each configuration over its seeds, and the settings'
    # objectives with their intervals over seeds.
    path = client.download_artifacts(outcome.tracking.parent_run_id, "summary.txt")
    out = Path(path).read_text()
    assert "configuration" in out and "val_loss (mean ± 95% CI)" in out
    for name in groups:
        line = next(x for x in out.splitlines() if x.startswith(name + " "))
        assert line.split()[1] == "2"
    settings = {s.label: s for s in outcome.judgement.verdict.settings}
    assert settings["bf16-mixed + eager"].seeds == 2
    assert settings["bf16-mixed + eager"].change.bounded
    verdict_line = next(x for x in out.splitlines() if x.startswith("bf16-mixed + eager "))
    assert " ± " in verdict_line

    # Time to target: eager fp32's mean final val_loss; its better seed reached it.
    target = float(client.get_run(outcome.tracking.parent_run_id).data.tags["versatil.target"])
    assert target == pytest.approx(statistics.fmean(
        r.data.metrics["val_loss"] for r in groups["32/lr=0.01"]
    ))  # fmt: skip
    for run in children:
        seconds = run.data.metrics.get("time_to_target_s")
        final = run.data.metrics["val_loss"]
        if final <= target * 1.01:  # it ended within the tolerance: it reached the target
            epochs = client.get_metric_history(run.info.run_id, "epoch_time_s")
            assert seconds is not None and 0 < seconds <= sum(m.value for m in epochs) + 1e-9
    assert any("time_to_target_s" in r.data.metrics for r in groups["32/lr=0.01"])
