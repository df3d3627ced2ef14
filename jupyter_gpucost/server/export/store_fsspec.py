"""Exports to any other fsspec store (``gs://`` and the like): the store's own buffered
writer, which commits the object on close and is discarded on error.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from pathlib import Path
from urllib.parse import urlsplit

from ...core.i18n import _
from .store_base import (
    S3_MIN_PART_BYTES,
    Cancelled,
    Landed,
    Progress,
    StoreError,
    Tuning,
    check_cancel,
)
from .targets import ExportTarget


class FsspecStore:
    renames = False

    def __init__(self, target: ExportTarget, tuning: Tuning) -> None:
        import fsspec

        parts = urlsplit(target.url)
        self.protocol = parts.scheme
        self.root = f"{parts.netloc}{parts.path}".rstrip("/")
        self.fs = fsspec.filesystem(self.protocol, **target.options)
        self.tuning = tuning

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def url(self, key: str) -> str:
        return f"{self.protocol}://{self._path(key)}"

    def _fail(self, what: str, error: Exception) -> StoreError:
        """``what``: a message with ``{where}`` (the target) and ``{why}`` (the error)."""
        where = self.url("")[:-1]
        return StoreError(what.format(where=where, why=f"{type(error).__name__}: {error}"))

    def exists(self, key: str) -> bool:
        try:
            return bool(self.fs.exists(self._path(key)))
        except Exception as e:
            raise self._fail(_("reaching {where} failed: {why}"), e) from None

    def upload(self, path: Path, key: str, progress: Progress, cancel: threading.Event) -> Landed:
        sha = hashlib.sha256()
        size = 0
        target = self._path(key)
        block = max(self.tuning.part_size_bytes, S3_MIN_PART_BYTES)
        out = None
        try:
            out = self.fs.open(target, "wb", block_size=block)
            with open(path, "rb", buffering=0) as src:
                while data := src.read(block):
                    check_cancel(cancel)
                    sha.update(data)
                    out.write(data)
                    size += len(data)
                    progress(len(data))
            out.close()
        except BaseException as e:
            if out is not None and not out.closed:
                discard = getattr(out, "discard", None)
                if discard is not None:
                    discard()
                    out.closed = True  # nothing left to flush when it is collected
            if isinstance(e, Cancelled | StoreError):
                raise
            if isinstance(e, Exception):
                raise self._fail(_("writing to {where} failed: {why}"), e) from None
            raise
        try:
            landed = self.fs.info(target)["size"]
        except Exception as e:
            raise self._fail(_("checking the copy on {where} failed: {why}"), e) from None
        if landed != size:
            self.delete(key)
            text = _("{url} has {landed} bytes instead of {size}")
            raise StoreError(text.format(url=self.url(key), landed=landed, size=size))
        return Landed(self.url(key), size, sha.hexdigest(), "size")

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            self.fs.pipe_file(self._path(key), data)
        except Exception as e:
            raise self._fail(_("writing to {where} failed: {why}"), e) from None

    def delete(self, key: str) -> None:
        with contextlib.suppress(Exception):  # best-effort clean-up
            self.fs.rm(self._path(key), recursive=True)

    def rename(self, old: str, new: str) -> None:
        raise NotImplementedError("objects are not renamed")
