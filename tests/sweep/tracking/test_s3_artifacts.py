"""MLflow's artifacts on object storage: the team server's ``--artifacts-destination`` on S3.

A real ``mlflow server`` stores its artifacts in a bucket of moto's standalone S3 server (a
real HTTP S3 API on loopback). The sweep's driver holds no S3 credentials: it uploads the
checkpoints and the report through the server, which writes them to the bucket, and reads
them back the same way.
"""

import io
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.mlflow_server import start_mlflow_server, stop_mlflow_server
from tests.s3_server import start_s3_server, stop_s3_server
from versatil.sweep.engine.runner import run_sweep
from versatil.sweep.tracking import child_runs
from versatil.sweep.vocab import tags

pytestmark = pytest.mark.slow  # a sweep, an mlflow server and an S3 server

BUCKET = "team-mlflow"


def test_checkpoints_and_the_report_land_in_the_servers_bucket(
    ray_cluster, sweep_config, tmp_path, monkeypatch
):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)  # the driver has none: the server uploads
    s3 = start_s3_server(tmp_path / "moto.log")
    server = None
    try:
        s3.client().create_bucket(Bucket=BUCKET)
        env = {
            **s3.environment(),
            "MLFLOW_S3_ENDPOINT_URL": s3.endpoint,
            "MLFLOW_BOTO_CLIENT_ADDRESSING_STYLE": "path",
        }
        (tmp_path / "mlflow").mkdir()
        server, uri = start_mlflow_server(
            tmp_path / "mlflow", artifacts_destination=f"s3://{BUCKET}/artifacts", env=env
        )
        config = sweep_config(
            name="s3-artifacts",
            space={"lr": {"grid": [0.001, 0.01]}},
            mlflow={"log_checkpoints": "all"},
        )
        outcome = run_sweep(config, tracking_uri=uri, stream=io.StringIO())
        assert [r.status for r in outcome.rows] == ["completed"] * 2
        assert outcome.gap is None

        client = MlflowClient(uri)
        keys = set(s3.keys(BUCKET, "artifacts/"))
        experiment = outcome.tracking.experiment_id
        runs = {r.data.tags[tags.TRIAL_ID]: r for r in child_runs(client, outcome.tracking)}
        for row in outcome.rows:
            run_id = runs[row.trial_id].info.run_id
            key = f"artifacts/{experiment}/{run_id}/artifacts/checkpoint/last.ckpt"
            assert key in keys, sorted(keys)[:20]
            # Read back through the server: the bytes the trial saved.
            copy = client.download_artifacts(run_id, "checkpoint/last.ckpt", str(tmp_path))
            assert Path(copy).read_bytes() == (Path(row.checkpoint) / "last.ckpt").read_bytes()
        parent = outcome.tracking.parent_run_id
        assert f"artifacts/{experiment}/{parent}/artifacts/summary.txt" in keys
        # Nothing went to the server's local disk.
        assert not (tmp_path / "mlflow" / "artifacts").exists()
    finally:
        if server is not None:
            stop_mlflow_server(server)
        stop_s3_server(s3)
