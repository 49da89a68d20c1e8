"""A sweep's checkpoints as MLflow 3 logged models, and its answer registered, on a real server."""

import io
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from versatil.cli_common import run_main
from versatil.sweep.cli.main import main
from versatil.sweep.config.sections import MlflowSection
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.tracking import child_runs
from versatil.sweep.tracking.logged_models import MODEL_NAME

REGISTERED = "reaching-bf16"

LOAD = """
    import json
    import mlflow, numpy as np, torch
    from versatil.inference import load_for_inference

    mlflow.set_tracking_uri({uri!r})
    uri = "models:/{name}@recommended"
    model = mlflow.pyfunc.load_model(uri, model_config={{"device": "cpu"}})
    inner = model.unwrap_python_model().model
    width = inner.module.normalizer.mean.shape[-1]
    obs = np.random.default_rng(0).normal(size=(4, width)).astype(np.float32)
    out = model.predict(obs)
    own = load_for_inference({checkpoint!r})
    with torch.no_grad():
        expected = own.module(torch.from_numpy(obs).to(own.dtype)).float().numpy()
    print(json.dumps({{
        "dtype": str(next(inner.module.parameters()).dtype),
        "max_diff": float(np.abs(out - expected).max()),
        "shape": list(out.shape),
    }}))
"""


def test_register_best_is_a_deprecated_register():
    with pytest.warns(FutureWarning, match="mlflow.register_best is deprecated"):
        section = MlflowSection(register_best="old-name")
    assert section.register == "old-name"
    assert MlflowSection(register="new", register_best=None).register == "new"


def test_completed_trials_are_logged_models_and_the_answer_is_registered(
    ray_cluster, mlflow_server, sweep_config, tmp_path, capsys
):
    config = sweep_config(
        name="logged-models",
        space={"precision": ["bf16-true"], "lr": {"grid": [0.003, 0.01]}},
        trainer={"max_epochs": 1, "accelerator": "cpu"},
        mlflow={"log_checkpoints": "all", "register": REGISTERED},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = run_sweep(config, stream=io.StringIO(), tracking_uri=mlflow_server)
    # MLflow's advice on predict's type hints says nothing to act on: the signature comes
    # from the input example. It stays off the sweep's console.
    assert not [w for w in caught if "Add type hints" in str(w.message)]
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("logged-models")
    runs = {r.data.tags["versatil.trial_id"]: r for r in child_runs(client, outcome.tracking)}
    completed = [row for row in outcome.rows if row.status == "completed"]
    assert len(completed) == 2

    def models():
        return client.search_logged_models(experiment_ids=[experiment.experiment_id])

    found = models()
    assert sorted(m.source_run_id for m in found) == sorted(
        runs[row.trial_id].info.run_id for row in completed
    )
    for model in found:
        assert model.name == MODEL_NAME and model.status.name == "READY"
        assert model.params["precision"] == "bf16-true"
        run = client.get_run(model.source_run_id)
        assert [o.model_id for o in run.outputs.model_outputs] == [model.model_id]

    version = client.get_model_version_by_alias(REGISTERED, "recommended")
    recommended = outcome.judgement.verdict.recommended
    assert version.run_id == runs[recommended].info.run_id
    (answer,) = [m for m in found if m.source_run_id == version.run_id]
    assert version.source == f"models:/{answer.model_id}"
    assert version.tags["versatil.model_id"] == answer.model_id
    assert version.tags["versatil.setting"] == "bf16-true + eager"
    assert version.tags["versatil.objective"] == "val_loss"
    assert float(version.tags["versatil.objective_value"]) > 0
    assert version.tags["versatil.speedup"] == "reference"

    # fastest: the no-worse setting with the highest measured speedup (none unmeasured);
    # most-accurate: the setting with the best objective. Each the verdict's best trial.
    verdict = outcome.judgement.verdict
    timed = [s for s in verdict.settings if s.no_worse and s.speedup is not None]
    expected = {
        "most-accurate": min(verdict.settings, key=lambda s: s.objective.value).best_trial,
        "fastest": max(timed, key=lambda s: s.speedup.value).best_trial if timed else None,
    }
    for alias, trial in expected.items():
        if trial is None:
            with pytest.raises(MlflowException):
                client.get_model_version_by_alias(REGISTERED, alias)
            continue
        aliased = client.get_model_version_by_alias(REGISTERED, alias)
        assert aliased.run_id == runs[trial].info.run_id
    # One setting: every alias is its best trial's one version.
    assert expected["most-accurate"] == recommended

    # A sync (and a resumed sweep's end) logs no model and registers no version twice.
    storage = tmp_path / "runs"
    assert run_main(main, ["sync", "logged-models", "--storage-path", str(storage)]) == 0
    capsys.readouterr()
    assert sorted(m.model_id for m in models()) == sorted(m.model_id for m in found)
    (again,) = client.search_model_versions(f"name='{REGISTERED}'")
    assert again.version == version.version
    assert client.get_model_version_by_alias(REGISTERED, "recommended").version == version.version
    for alias, trial in expected.items():
        if trial is not None:
            assert client.get_model_version_by_alias(REGISTERED, alias).version == version.version

    # A fresh process that may not unpickle loads it, in bf16, and predicts.
    checkpoint = next(r.checkpoint for r in outcome.rows if r.trial_id == recommended)
    code = LOAD.format(uri=mlflow_server, name=REGISTERED, checkpoint=checkpoint)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, "MLFLOW_ALLOW_PICKLE_DESERIALIZATION": "false"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["dtype"] == "torch.bfloat16"
    assert loaded["max_diff"] == 0.0 and loaded["shape"][0] == 4
