"""What every store shares: the ``Store`` protocol, what an upload reports (``Landed``),
the tuning of uploads and retries, cancellation and hashing while reading.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

MIB = 1024 * 1024
#: S3's smallest part (all parts but the last)
S3_MIN_PART_BYTES = 5 * MIB
#: S3's largest number of parts in one upload
S3_MAX_PARTS = 10_000
#: small enough that a block read is still in the CPU's cache when it is written and
#: hashed: with 8 MiB blocks every byte made extra trips through main memory
LOCAL_BLOCK_BYTES = 256 * 1024

Progress = Callable[[int], None]


class Cancelled(Exception):
    """The job was cancelled; whatever was written is removed."""


class StoreError(Exception):
    """A permanent error, worded for the person who started the export."""


@dataclass(frozen=True)
class Landed:
    url: str
    size_bytes: int
    sha256: str
    #: how the landed copy was checked against what was read
    verified: str


@dataclass(frozen=True)
class Tuning:
    # boto3's own defaults: on loopback the fastest of the settings measured
    # (benchmarks/bench_export.py), in about 135 MB for a 2 GiB file
    part_size_bytes: int = 8 * MIB
    concurrency: int = 10
    retries: int = 4
    backoff_s: float = 0.5


def part_size_for(size_bytes: int, configured_bytes: int) -> int:
    """The part size for a file: the configured one, at least S3's minimum, and large
    enough (whole MiB) that the file fits in S3's 10,000 parts."""
    needed = -(-size_bytes // S3_MAX_PARTS)
    needed_mib = -(-needed // MIB) * MIB
    return max(configured_bytes, S3_MIN_PART_BYTES, needed_mib)


class Store(Protocol):
    #: a staged folder can be renamed into place (local folders)
    renames: bool

    def url(self, key: str) -> str: ...
    def exists(self, key: str) -> bool: ...
    def upload(
        self, path: Path, key: str, progress: Progress, cancel: threading.Event
    ) -> Landed: ...
    def put_bytes(self, key: str, data: bytes) -> None: ...
    def delete(self, key: str) -> None: ...
    def rename(self, old: str, new: str) -> None: ...


def check_cancel(cancel: threading.Event) -> None:
    """Raise :class:`Cancelled` once the job is cancelled."""
    if cancel.is_set():
        raise Cancelled()


class Hasher:
    """sha256 in its own thread, so hashing overlaps with reading and writing."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self._thread = threading.Thread(target=self._run, name="gpucost-export-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (block := self._queue.get()) is not None:
            self.sha.update(block)

    def update(self, block: bytes) -> None:
        self._queue.put(block)

    def hexdigest(self) -> str:
        self.close()
        return self.sha.hexdigest()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
