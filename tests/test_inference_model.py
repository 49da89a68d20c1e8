"""A checkpoint logged as an MLflow pyfunc model (versatil.inference_model), loaded fresh.

A real ``mlflow server``; the logging process must not import torch, and the loading
process disallows MLflow's pickle deserialization.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TINY = ["n_episodes=16", "horizon=10", "width=16"]


def run_python(code: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **env},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def bf16_checkpoint(tmp_path_factory) -> Path:
    """A one-epoch ``reaching`` checkpoint trained in bf16-true on the CPU."""
    out = tmp_path_factory.mktemp("bf16") / "checkpoint"
    params = [arg for p in TINY for arg in ("--param", p)]
    subprocess.run(
        [sys.executable, "-m", "versatil.training", "--precision", "bf16-true",
         "--max-epochs", "1", "--accelerator", "cpu", *params, "--output", str(out)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return out


LOG = """
    import json, sys
    from pathlib import Path
    from mlflow import MlflowClient
    from mlflow.tracking import is_tracking_uri_set
    from versatil.sweep.tracking.logged_models import find_trial_model, log_trial_model

    client = MlflowClient({uri!r})
    experiment = client.create_experiment({name!r})
    run = client.create_run(experiment, tags={{"versatil.trial_id": "t1"}})
    client.log_param(run.info.run_id, "precision", "bf16-true")
    client.log_metric(run.info.run_id, "val_loss", 0.75, step=0)
    client.log_metric(run.info.run_id, "val_loss", 0.5, step=1)
    run = client.get_run(run.info.run_id)
    first = log_trial_model(client, experiment, run, Path({checkpoint!r}))
    again = log_trial_model(client, experiment, run, Path({checkpoint!r}))
    models = client.search_logged_models(experiment_ids=[experiment])
    history = client.get_metric_history(run.info.run_id, "val_loss")
    print(json.dumps({{
        "model_metrics": [[m.key, m.value, m.step, m.model_id] for m in models[0].metrics or []],
        "history": [[m.step, m.value] for m in history],
        "ids": [first, again, find_trial_model(client, experiment, run.info.run_id).model_id],
        "models": [[m.model_id, m.source_run_id, m.status.name, m.params] for m in models],
        "run": run.info.run_id,
        "outputs": [o.model_id for o in client.get_run(run.info.run_id).outputs.model_outputs],
        "torch": "torch" in sys.modules,
        "uri_left_set": is_tracking_uri_set(),
    }}))
"""

LOAD = """
    import json
    import mlflow, numpy as np, pandas as pd, torch
    from versatil.inference import load_for_inference

    mlflow.set_tracking_uri({uri!r})
    uri = "models:/{model_id}"
    model = mlflow.pyfunc.load_model(uri, model_config={{"device": "cpu"}})
    inner = model.unwrap_python_model().model
    width = inner.module.normalizer.mean.shape[-1]
    obs = np.random.default_rng(0).normal(size=(8, width)).astype(np.float32)
    out = model.predict(obs)
    own = load_for_inference({checkpoint!r})
    with torch.no_grad():
        expected = own.module(torch.from_numpy(obs).to(own.dtype)).float().numpy()
    frame = model.predict(pd.DataFrame(obs))
    # The signature holds predict to the example's form (one array): keyword inputs go
    # to the python model itself.
    keyword = model.unwrap_python_model().predict(None, {{"obs": obs}})
    recorded = json.loads(open({checkpoint!r} + "/input_example.json").read())
    example = model.input_example
    inputs = model.metadata.get_input_schema().inputs
    outputs = model.metadata.get_output_schema().inputs
    example_out = model.predict(example)
    fp32 = mlflow.pyfunc.load_model(uri, model_config={{"precision": "32", "device": "cpu"}})
    fp32_inner = fp32.unwrap_python_model().model
    from_uri = load_for_inference(uri)
    print(json.dumps({{
        "dtype": str(next(inner.module.parameters()).dtype),
        "device": str(inner.device),
        "out_dtype": str(out.dtype),
        "shape": list(out.shape),
        "max_diff": float(np.abs(out - expected).max()),
        "frame_diff": float(np.abs(frame - out).max()),
        "keyword_diff": float(np.abs(keyword - out).max()),
        "fp32_dtype": str(next(fp32_inner.module.parameters()).dtype),
        "fp32_diff": float(np.abs(fp32.predict(obs) - out).max()),
        "from_uri_dtype": str(from_uri.dtype),
        "example_dtype": str(example.dtype),
        "example_shape": list(example.shape),
        "example_diff": float(np.abs(example - np.asarray(recorded["inputs"]["data"])).max()),
        "signature_in": [[str(s.type), list(s.shape)] for s in inputs],
        "signature_out": [[str(s.type), list(s.shape)] for s in outputs],
        "example_out_diff": float(
            np.abs(example_out - np.asarray(recorded["outputs"]["data"])).max()
        ),
        "width": width,
    }}))
"""


def test_logged_checkpoint_loads_fresh_with_its_precision(mlflow_server, bf16_checkpoint):
    logged = json.loads(
        run_python(LOG.format(uri=mlflow_server, name="pyfunc", checkpoint=str(bf16_checkpoint)))
    )
    assert logged["torch"] is False  # the driver's logging imports no torch
    assert logged["uri_left_set"] is False  # nor changes the process's default store
    first, again, found = logged["ids"]
    assert first == again == found  # logged once
    ((model_id, source_run, status, params),) = logged["models"]
    assert (model_id, source_run, status) == (first, logged["run"], "READY")
    assert params["precision"] == "bf16-true"
    assert logged["outputs"] == [first]
    # The run's final metric linked to the model, once, and the run's curve unchanged.
    assert logged["model_metrics"] == [["val_loss", 0.5, 1, first]]
    assert logged["history"] == [[0, 0.75], [1, 0.5]]

    loaded = json.loads(
        run_python(
            LOAD.format(uri=mlflow_server, model_id=first, checkpoint=str(bf16_checkpoint)),
            MLFLOW_ALLOW_PICKLE_DESERIALIZATION="false",
        )
    )
    assert loaded["dtype"] == "torch.bfloat16" and loaded["device"] == "cpu"
    assert loaded["out_dtype"] == "float32" and loaded["shape"][0] == 8
    assert loaded["max_diff"] == 0.0  # the same forward in the same dtype
    assert loaded["frame_diff"] == 0.0 and loaded["keyword_diff"] == 0.0
    assert loaded["fp32_dtype"] == "torch.float32"  # model_config overrides the precision
    assert loaded["fp32_diff"] < 0.1  # bf16 weights read in float32: bf16's rounding
    assert loaded["from_uri_dtype"] == "torch.bfloat16"  # load_for_inference("models:/...")
    # The worker's input example: real rows of a training batch, and the outputs on them.
    width = loaded["width"]
    assert loaded["example_dtype"] == "float32" and loaded["example_shape"] == [4, width]
    assert loaded["example_diff"] == 0.0
    assert loaded["signature_in"] == [["float32", [-1, width]]]
    ((out_type, out_shape),) = loaded["signature_out"]
    assert out_type == "float32" and out_shape[0] == -1
    # The same rows, forward and dtype as the worker's eval forward: the same outputs.
    assert loaded["example_out_diff"] == 0.0
