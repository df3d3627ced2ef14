"""Where exported bytes land, and how they become visible only when complete.

- ``LocalStore`` (``file://``): each file is written to a hidden temporary name in the
  destination folder, flushed to disk and renamed; a folder export is staged in a hidden
  folder and renamed as a whole.
- ``S3Store`` (``s3://``, S3-compatible stores through ``endpoint_url``): boto3's
  multipart API directly, parts uploaded by a bounded pool while the next part is read;
  an object exists at its key only after ``CompleteMultipartUpload``, and a failed or
  cancelled upload is aborted.
- ``FsspecStore`` (``gs://`` and other fsspec stores): the store's own buffered writer,
  which commits the object on close and is discarded on error.

Every store reads the file once, computing the sha256 as it goes, reports progress in
bytes, checks for cancellation between blocks, retries transient errors with backoff and
turns permanent ones into a message a person can act on.

This module is where the job manager finds a store (:func:`open_store`); each store lives
in its own module (``store_local``, ``store_s3``, ``store_fsspec``) and what they share in
``store_base``.
"""

from __future__ import annotations

from .store_base import (
    LOCAL_BLOCK_BYTES,
    MIB,
    S3_MAX_PARTS,
    S3_MIN_PART_BYTES,
    Cancelled,
    Landed,
    Progress,
    Store,
    StoreError,
    Tuning,
    part_size_for,
)
from .store_fsspec import FsspecStore
from .store_local import LocalStore
from .store_s3 import S3Store
from .targets import ExportTarget

__all__ = [
    "LOCAL_BLOCK_BYTES",
    "MIB",
    "S3_MAX_PARTS",
    "S3_MIN_PART_BYTES",
    "Cancelled",
    "FsspecStore",
    "Landed",
    "LocalStore",
    "Progress",
    "S3Store",
    "Store",
    "StoreError",
    "Tuning",
    "open_store",
    "part_size_for",
]


def open_store(target: ExportTarget, tuning: Tuning) -> Store:
    """The store for a target: a local folder, S3 (multipart), or another fsspec store."""
    if target.scheme == "file":
        return LocalStore(target)
    if target.scheme in ("s3", "s3a"):
        return S3Store(target, tuning)
    return FsspecStore(target, tuning)
