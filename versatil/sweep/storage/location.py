"""What a storage path names: a local directory, or a prefix on object storage.

A storage path is a directory (``runs/sweeps``, a shared mount such as ``/mnt/sweeps``) or
a bucket of a pyarrow file system: ``s3://bucket/prefix`` (AWS S3, or an S3-compatible store
such as MinIO or Ceph) or ``gs://bucket/prefix`` (Google Cloud Storage). Any other URI is
refused at load: it would otherwise become a local directory named after it
(``./ftp:/host/x``).

Credentials come from the store's standard variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``; ``GOOGLE_APPLICATION_CREDENTIALS``), never
from the URI: a URI is printed, tagged and stored with the results, and every node reads the
variables. Its query may set pyarrow's options (``?endpoint_override=host:port&scheme=http``).
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from pathlib import Path

from versatil.errors import ConfigError

__all__ = ["REMOTE_SCHEMES", "Location", "embedded_store_directory", "parse_location", "redact"]

REMOTE_SCHEMES = ("s3", "gs", "gcs")
"""The URI schemes a storage path may use: pyarrow's object stores."""

_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_SECRET = re.compile(r"key|secret|token|password|credential", re.IGNORECASE)


def redact(uri: str) -> str:
    """``uri`` without a ``user:password@`` part or a query parameter that could hold a secret."""
    parts = urllib.parse.urlsplit(uri)
    pairs = urllib.parse.parse_qsl(parts.query)
    kept = [(k, v) for k, v in pairs if not _SECRET.search(k)]
    if "@" not in parts.netloc and len(kept) == len(pairs):
        return uri
    host = parts.netloc.rpartition("@")[2]
    query = urllib.parse.urlencode(kept)
    return urllib.parse.urlunsplit(parts._replace(netloc=host, query=query))


@dataclasses.dataclass(frozen=True)
class Location:
    """A parsed storage path.

    Attributes:
        value: The storage path as given.
        scheme: The URI's scheme (``s3``, ``gs``, ...), or ``None`` for a local directory.
    """

    value: str
    scheme: str | None = None

    @property
    def remote(self) -> bool:
        """Whether the path is on object storage (or another remote file system)."""
        return self.scheme is not None

    def display(self) -> str:
        """The path as printed and logged: the absolute directory, or the URI sans secrets."""
        return redact(self.value) if self.remote else str(self.directory())

    def directory(self) -> Path:
        """The absolute local directory (Ray needs one).

        Raises:
            ValueError: for a remote location, which is no local directory.
        """
        if self.remote:
            raise ValueError(f"{self.display()} is not a local directory")
        return Path(self.value).expanduser().resolve()


def parse_location(field: str, value: str) -> Location:
    """The :class:`Location` ``value`` names.

    Raises:
        ConfigError: naming ``field``, the value and the valid choices, for a URI whose
            scheme no pyarrow file system serves, or one with no bucket.
    """
    found = _URI.match(value)
    if not found:
        return Location(value)
    scheme = found.group(1).lower()
    if scheme == "file":
        return Location(urllib.parse.urlsplit(value).path)
    if scheme not in REMOTE_SCHEMES:
        raise ConfigError(
            f"{field}: {redact(value)!r} is a {found.group(1)}:// URI, which versatil cannot "
            f"store results on. Give a directory every node reaches (runs/sweeps on one "
            f"machine, a shared mount such as /mnt/sweeps on a cluster) or object storage: "
            f"{', '.join(f'{s}://' for s in REMOTE_SCHEMES)} (e.g. s3://bucket/sweeps)"
        )
    parts = urllib.parse.urlsplit(value)
    if not parts.netloc:
        raise ConfigError(
            f"{field}: {redact(value)!r} names no bucket; give {scheme}://BUCKET/PREFIX, "
            f"e.g. {scheme}://my-bucket/sweeps"
        )
    secrets = "@" in parts.netloc or any(
        _SECRET.search(k) for k, _ in urllib.parse.parse_qsl(parts.query)
    )
    if secrets:
        raise ConfigError(
            f"{field}: {redact(value)!r} carries credentials in the URI, which would be printed "
            "and stored with the results; remove them and set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (GOOGLE_APPLICATION_CREDENTIALS for gs://) where the sweep "
            "and its Ray nodes run"
        )
    return Location(value, scheme)


def embedded_store_directory(field: str, value: str) -> Path:
    """The local directory that holds the embedded MLflow store (a SQLite file).

    Raises:
        ConfigError: for a bad storage path, or one on object storage, which cannot hold
            a SQLite database: the message asks for an MLflow server.
    """
    location = parse_location(field, value)
    if location.remote:
        raise ConfigError(
            f"{field}: {location.display()!r} is on object storage, which cannot hold the "
            "embedded MLflow store (a SQLite file); give an MLflow server with --tracking-uri "
            "http://HOST:PORT (or mlflow.tracking_uri in the sweep file, or MLFLOW_TRACKING_URI), "
            "or a local store such as --tracking-uri sqlite:///mlflow.db"
        )
    return location.directory()
