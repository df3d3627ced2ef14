"""Exports to a local folder (``file://``): each file is written to a hidden temporary name
in the destination folder, flushed to disk and renamed; a folder export is staged in a
hidden folder and renamed as a whole.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from ...core.i18n import _
from .store_base import LOCAL_BLOCK_BYTES, Hasher, Landed, Progress, StoreError, check_cancel
from .targets import ExportTarget


class LocalStore:
    renames = True

    def __init__(self, target: ExportTarget) -> None:
        self.root = Path(urlsplit(target.url).path)

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("/"))

    def url(self, key: str) -> str:
        return self._path(key).as_uri()

    def exists(self, key: str) -> bool:
        return os.path.lexists(self._path(key))

    def _prepare(self, dest: Path) -> None:
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            text = _(
                "cannot create the export folder {folder} ({why}): check that it exists and "
                "is writable, or configure another target"
            )
            raise StoreError(text.format(folder=dest.parent, why=e.strerror or e)) from None

    @contextlib.contextmanager
    def _replacing(self, dest: Path) -> Iterator[Path]:
        """A hidden temporary name beside ``dest``, renamed to it when the block ends
        without an error and removed otherwise."""
        self._prepare(dest)
        tmp = dest.with_name(f".{dest.name}.part-{uuid.uuid4().hex[:8]}")
        try:
            yield tmp
            os.replace(tmp, dest)
        except OSError as e:
            text = _("writing {path} failed: {why}")
            raise StoreError(text.format(path=dest, why=e.strerror or e)) from None
        finally:
            if tmp.exists():
                tmp.unlink()

    def upload(self, path: Path, key: str, progress: Progress, cancel: threading.Event) -> Landed:
        dest = self._path(key)
        hasher = Hasher()
        size = 0
        try:
            with self._replacing(dest) as tmp:
                with open(path, "rb", buffering=0) as src, open(tmp, "wb", buffering=0) as out:
                    while block := src.read(LOCAL_BLOCK_BYTES):
                        check_cancel(cancel)
                        hasher.update(block)
                        view = memoryview(block)
                        while view:
                            view = view[out.write(view) :]
                        size += len(block)
                        progress(len(block))
                    os.fsync(out.fileno())
                    landed_size = os.fstat(out.fileno()).st_size
                digest = hasher.hexdigest()
                if landed_size != size:
                    text = _(
                        "the copy at {path} has {landed} bytes instead of {size}: the disk "
                        "may be full"
                    )
                    raise StoreError(text.format(path=dest, landed=landed_size, size=size))
                check_cancel(cancel)
        finally:
            hasher.close()
        return Landed(dest.as_uri(), size, digest, "size")

    def put_bytes(self, key: str, data: bytes) -> None:
        with self._replacing(self._path(key)) as tmp, open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    def delete(self, key: str) -> None:
        dest = self._path(key)
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest, ignore_errors=True)
        elif os.path.lexists(dest):
            dest.unlink()

    def rename(self, old: str, new: str) -> None:
        os.replace(self._path(old), self._path(new))
