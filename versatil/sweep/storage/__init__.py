"""Where a sweep keeps its results: a local or shared directory, or object storage."""

from versatil.sweep.storage.location import (
    REMOTE_SCHEMES,
    Location,
    embedded_store_directory,
    parse_location,
    redact,
)
from versatil.sweep.storage.tree import (
    REMOTE_SUFFIX,
    CheckpointMirror,
    Storage,
    cache_root,
    checkpoint_ref,
    local_checkpoint,
)

__all__ = [
    "REMOTE_SCHEMES",
    "REMOTE_SUFFIX",
    "CheckpointMirror",
    "Location",
    "Storage",
    "cache_root",
    "checkpoint_ref",
    "embedded_store_directory",
    "local_checkpoint",
    "parse_location",
    "redact",
]
