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
        ("gcs://bucket/sweeps", "gcs"),
        ("s3://bucket/sweeps?endpoint_override=127.0.0.1:9000&scheme=http", "s3"),
    ],
)
def test_directories_and_pyarrow_file_systems_are_storage_paths(value, scheme):
    assert parse_location("storage_path", value).scheme == scheme


def test_a_file_uri_is_its_directory(tmp_path):
    location = parse_location("storage_path", (tmp_path / "x").as_uri())
    assert not location.remote and location.directory() == tmp_path / "x"


@pytest.mark.parametrize(
    "value", ["ftp://host/x", "http://host/x", "s3a://bucket/x", "hdfs://nn:8020/x", "abfs://c/x"]
)
def test_any_other_uri_is_refused_naming_the_field_value_and_choices(value):
    with pytest.raises(ConfigError) as raised:
        parse_location("storage_path", value)
    message = str(raised.value)
    assert message.startswith(f"storage_path: {value!r} is a ")
    assert "s3://, gs://, gcs://" in message


@pytest.mark.parametrize(
    "value",
    [
        "s3://AKIA:hush@bucket/sweeps",
        "s3://bucket/sweeps?access_key=AKIA&secret_key=hush",
        "s3://bucket/sweeps?endpoint_override=h:9000&session_token=hush",
        "gs://user:hush@bucket/sweeps",
    ],
)
def test_credentials_in_the_uri_are_refused_and_never_echoed(value):
    with pytest.raises(ConfigError) as raised:
        parse_location("storage_path", value)
    message = str(raised.value)
    assert "carries credentials in the URI" in message and "AWS_SECRET_ACCESS_KEY" in message
    assert "hush" not in message and "AKIA" not in message


def test_what_is_displayed_keeps_the_options_and_drops_any_secret():
    assert redact("s3://AK:SK@b/p?secret_key=SK&scheme=http") == "s3://b/p?scheme=http"
    assert redact("s3://b/p") == "s3://b/p"
    location = parse_location("storage_path", "s3://b/p?endpoint_override=127.0.0.1:9000")
    storage = Storage(location)
    assert storage.display("exp", "t") == "s3://b/p/exp/t?endpoint_override=127.0.0.1:9000"
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
