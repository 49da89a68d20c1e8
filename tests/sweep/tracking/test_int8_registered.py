"""After ``compress``, the recommended trial's INT8 model is registered as ``recommended-int8``."""

import io
import json
import os
import subprocess
import sys
import textwrap

from mlflow.tracking import MlflowClient

from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.int8.compress import compress_after_sweep

REGISTERED = "reaching-int8"

LOAD = """
    import json
    import mlflow, numpy as np, torch
    from versatil.inference import load_for_inference

    mlflow.set_tracking_uri({uri!r})
    model = mlflow.pyfunc.load_model("models:/{name}@recommended-int8")
    inner = model.unwrap_python_model().model
    width = inner.module.normalizer.mean.shape[-1]
    obs = np.random.default_rng(0).normal(size=(4, width)).astype(np.float32)
    out = model.predict(obs)
    own = load_for_inference({checkpoint!r}, device="cpu")
    with torch.no_grad():
        expected = own.module(torch.from_numpy(obs)).float().numpy()
    print(json.dumps({{
        "precision": str(inner.config.precision.value),
        "device": str(inner.device),
        "max_diff": float(np.abs(out - expected).max()),
    }}))
"""


def test_the_recommended_trials_int8_model_is_registered(ray_cluster, mlflow_server, sweep_config):
    config = sweep_config(
        name="int8-registered",
        space={"lr": {"grid": [0.003, 0.01]}},
        trainer={"max_epochs": 1, "accelerator": "cpu"},
        mlflow={"register": REGISTERED},
        post_training={"int8": "best"},
    )
    outcome = run_sweep(config, stream=io.StringIO(), tracking_uri=mlflow_server)
    compressed = compress_after_sweep(config, outcome, io.StringIO())
    assert compressed is not None and compressed.failed == []
    recommended = outcome.judgement.verdict.recommended
    (int8,) = compressed.int8
    assert int8.trial_id == recommended

    client = MlflowClient(mlflow_server)
    version = client.get_model_version_by_alias(REGISTERED, "recommended-int8")
    assert version.run_id == int8.run_id
    assert version.tags["precision"] == "8"
    assert version.tags["versatil.int8.trial_id"] == recommended
    fp = client.get_model_version_by_alias(REGISTERED, "recommended")
    assert fp.version != version.version
    assert len(client.search_model_versions(f"name='{REGISTERED}'")) == 2

    checkpoint = outcome.experiment_dir / "int8" / f"{recommended}-int8"
    code = LOAD.format(uri=mlflow_server, name=REGISTERED, checkpoint=str(checkpoint))
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, "MLFLOW_ALLOW_PICKLE_DESERIALIZATION": "false"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded == {"precision": "8", "device": "cpu", "max_diff": 0.0}
