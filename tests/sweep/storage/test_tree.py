"""The storage path on S3 (moto's standalone server): the mirror, checkpoints, the write check."""

import io
import json

import pytest
import torch

from tests.s3_server import start_s3_server, stop_s3_server
from versatil.errors import ConfigError
from versatil.sweep.config.checks import check_storage
from versatil.sweep.storage import (
    CheckpointMirror,
    Storage,
    checkpoint_ref,
    local_checkpoint,
    parse_location,
)
from versatil.sweep.worker.restore import choose_checkpoint

pytestmark = pytest.mark.slow  # an S3 server

BUCKET = "store"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = start_s3_server(tmp_path_factory.mktemp("moto") / "moto.log")
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    stop_s3_server(server)


@pytest.fixture
def storage(s3, tmp_path, monkeypatch, request):
    for name, value in s3.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return Storage(parse_location("storage_path", f"s3://{BUCKET}/{request.node.name}"))


def put(s3, key, body):
    s3.client().put_object(Bucket=BUCKET, Key=key, Body=body)


def saved(value):
    buffer = io.BytesIO()
    torch.save({"value": value}, buffer)
    return buffer.getvalue()


def test_the_mirror_holds_the_records_and_names_each_checkpoint(s3, storage):
    root = storage.root
    trial = f"{root.removeprefix(BUCKET + '/')}/exp/t1"
    put(s3, f"{trial}/result.json", b'{"epoch": 0}\n')
    for n in (0, 1):
        put(s3, f"{trial}/checkpoint_00000{n}/last.ckpt", saved(n))
    local = storage.pull("exp")
    assert (local / "t1" / "result.json").read_text() == '{"epoch": 0}\n'
    newest = local / "t1" / "checkpoint_000001"
    assert newest.is_dir() and list(newest.iterdir()) == []  # no content until read
    assert checkpoint_ref(newest) == f"s3://{root}/exp/t1/checkpoint_000001"

    # Tune appends a result and drops its older checkpoint: the next pull follows.
    put(s3, f"{trial}/result.json", b'{"epoch": 0}\n{"epoch": 1}\n')
    s3.client().delete_object(Bucket=BUCKET, Key=f"{trial}/checkpoint_000000/last.ckpt")
    storage.pull("exp")
    assert (local / "t1" / "result.json").read_text().count("epoch") == 2
    assert sorted(p.name for p in (local / "t1").iterdir()) == [
        "checkpoint_000001",
        "checkpoint_000001.versatil-remote",
        "result.json",
    ]

    # Reading a checkpoint fetches it: into its place, or by its URI on any node.
    assert torch.load(local_checkpoint(newest) / "last.ckpt")["value"] == 1
    by_uri = local_checkpoint(checkpoint_ref(newest))
    assert torch.load(by_uri / "last.ckpt")["value"] == 1


def test_written_files_reach_the_store_and_directories_list_runs(s3, storage):
    storage.probe()
    storage.write_text(json.dumps({"run_id": "r"}), "exp-2", "mlflow_parent_run.json")
    assert storage.exists("exp-2", "mlflow_parent_run.json")
    key = f"{storage.root.removeprefix(BUCKET + '/')}/exp-2/mlflow_parent_run.json"
    body = s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert json.loads(body) == {"run_id": "r"}
    assert storage.directories() == ["exp-2"]
    report = storage.mirror("exp-2", "report")
    report.mkdir(parents=True)
    (report / "a.png").write_bytes(b"png")
    storage.push("exp-2", "report")
    assert storage.exists("exp-2", "report", "a.png")


def test_a_torn_checkpoint_on_the_store_falls_back_to_the_previous_one(s3, storage):
    trial = f"{storage.root.removeprefix(BUCKET + '/')}/t"
    put(s3, f"{trial}/checkpoint_000000/last.ckpt", saved(0))
    put(s3, f"{trial}/checkpoint_000001/last.ckpt", saved(1)[:100])  # torn
    mirror = CheckpointMirror.of(storage.filesystem, f"{storage.root}/t/checkpoint_000001")
    chosen, skipped = choose_checkpoint(mirror.newest, "previous", fetch=mirror.fetch)
    assert chosen.name == "checkpoint_000000" and len(skipped) == 1
    assert "checkpoint_000001/last.ckpt cannot be read" in skipped[0]
    assert torch.load(chosen / "last.ckpt")["value"] == 0
    assert mirror.remote(chosen) == f"{storage.root}/t/checkpoint_000000"


def test_a_missing_bucket_is_one_clear_error_before_anything_starts(
    storage, sweep_config, monkeypatch
):
    uri = "s3://no-such-bucket/sweeps"
    with pytest.raises(ConfigError) as raised:
        check_storage(sweep_config(storage_path=uri))
    message = str(raised.value)
    assert message.startswith(f"storage_path: {uri!r} cannot be written (")
    assert "The specified bucket does not exist" in message
    assert "check that the bucket exists" in message
