"""What a storage path names, and what of it may be printed."""

import pytest

from versatil.errors import ConfigError
from versatil.sweep.storage import Storage, embedded_store_directory, parse_location, redact


@pytest.mark.parametrize(
    ("value", "scheme"),
    [
        ("runs/sweeps", None),
        ("/mnt/sweeps", None),
        ("s3://bucket/sweeps", "s3"),
        ("S3://bucket/sweeps", "s3"),
        ("gs://bucket/sweeps", "gs"),
        ("abfs://container@account/sweeps", "abfs"),
        ("hdfs://namenode:8020/sweeps", "hdfs"),
    ],
)
def test_directories_and_pyarrow_file_systems_are_storage_paths(value, scheme):
    assert parse_location("storage_path", value).scheme == scheme


def test_a_file_uri_is_its_directory(tmp_path):
    location = parse_location("storage_path", (tmp_path / "x").as_uri())
    assert not location.remote and location.directory() == tmp_path / "x"


@pytest.mark.parametrize("value", ["ftp://host/x", "http://host/x", "s3a://bucket/x"])
def test_any_other_uri_is_refused_naming_the_field_value_and_choices(value):
    with pytest.raises(ConfigError) as raised:
        parse_location("storage_path", value)
    message = str(raised.value)
    assert message.startswith(f"storage_path: {value!r} is a ")
    assert "s3://, gs://, gcs://, abfs://, abfss://, hdfs://" in message


def test_secrets_in_the_query_are_never_displayed():
    uri = "s3://b/p?endpoint_override=127.0.0.1:9000&access_key=AK&secret_key=SK&session_token=T"
    assert redact(uri) == "s3://b/p?endpoint_override=127.0.0.1%3A9000"
    location = parse_location("storage_path", uri)
    assert location.display() == redact(uri)
    storage = Storage(location)
    assert storage.display("exp", "trial").startswith("s3://")
    with pytest.raises(ValueError, match="is not a local directory"):
        location.directory()


def test_object_storage_cannot_hold_the_embedded_store(tmp_path):
    assert embedded_store_directory("--storage-path", str(tmp_path)) == tmp_path
    with pytest.raises(ConfigError, match=r"'gs://b/p' is on object storage.*--tracking-uri"):
        embedded_store_directory("--storage-path", "gs://b/p")


def test_a_local_storage_path_is_its_own_mirror(tmp_path):
    storage = Storage(parse_location("storage_path", str(tmp_path / "runs")))
    storage.probe()
    storage.write_text("name: x\n", "exp-1", "sweep.yaml")
    assert (tmp_path / "runs" / "exp-1" / "sweep.yaml").read_text() == "name: x\n"
    assert storage.exists("exp-1", "sweep.yaml") and not storage.exists("exp-1", "nope")
    assert storage.directories() == ["exp-1"]
    assert storage.pull("exp-1") == tmp_path / "runs" / "exp-1"
    assert storage.tune_arguments() == {"storage_path": str(tmp_path / "runs")}
    assert storage.display("exp-1") == str(tmp_path / "runs" / "exp-1")
