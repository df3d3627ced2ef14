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
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from .targets import Target

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


def _check(cancel: threading.Event) -> None:
    if cancel.is_set():
        raise Cancelled()


class _Hasher:
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


# -- local folders ---------------------------------------------------------------------


class LocalStore:
    renames = True

    def __init__(self, target: Target) -> None:
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
            raise StoreError(
                f"cannot create the export folder {dest.parent} ({e.strerror or e}): check "
                "that it exists and is writable, or configure another target"
            ) from None

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
            raise StoreError(f"writing {dest} failed: {e.strerror or e}") from None
        finally:
            if tmp.exists():
                tmp.unlink()

    def upload(self, path: Path, key: str, progress: Progress, cancel: threading.Event) -> Landed:
        dest = self._path(key)
        hasher = _Hasher()
        size = 0
        try:
            with self._replacing(dest) as tmp:
                with open(path, "rb", buffering=0) as src, open(tmp, "wb", buffering=0) as out:
                    while block := src.read(LOCAL_BLOCK_BYTES):
                        _check(cancel)
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
                    raise StoreError(
                        f"the copy at {dest} has {landed_size} bytes instead of {size}: the "
                        "disk may be full"
                    )
                _check(cancel)
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
            import shutil

            shutil.rmtree(dest, ignore_errors=True)
        elif os.path.lexists(dest):
            dest.unlink()

    def rename(self, old: str, new: str) -> None:
        os.replace(self._path(old), self._path(new))


# -- S3 and S3-compatible stores -------------------------------------------------------

#: S3 error codes worth another try
_TRANSIENT_CODES = {
    "SlowDown",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "InternalError",
    "ServiceUnavailable",
    "Throttling",
    "ThrottlingException",
}


class S3Store:
    renames = False

    def __init__(self, target: Target, tuning: Tuning) -> None:
        import boto3
        from botocore.config import Config

        parts = urlsplit(target.url)
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        self.tuning = tuning
        options = dict(target.options)
        client_kwargs = dict(options.pop("client_kwargs", {}) or {})
        self.endpoint = options.pop("endpoint_url", None) or client_kwargs.pop("endpoint_url", None)
        session = boto3.session.Session(
            aws_access_key_id=options.pop("key", None) or options.pop("aws_access_key_id", None),
            aws_secret_access_key=options.pop("secret", None)
            or options.pop("aws_secret_access_key", None),
            aws_session_token=options.pop("token", None) or options.pop("aws_session_token", None),
            profile_name=options.pop("profile", None),
            region_name=options.pop("region_name", None) or client_kwargs.pop("region_name", None),
        )
        self.client = session.client(
            "s3",
            endpoint_url=self.endpoint,
            config=Config(
                # retries are ours (with the backoff and the messages below)
                retries={"max_attempts": 1, "mode": "standard"},
                max_pool_connections=tuning.concurrency + 2,
                connect_timeout=10,
                read_timeout=120,
            ),
            **client_kwargs,
        )
        # botocore sends a CRC32 with each part the store checks, unless turned off
        self.checksums = (
            getattr(self.client.meta.config, "request_checksum_calculation", None)
            == "when_supported"
        )
        self.where = f"s3://{self.bucket}" + (f" at {self.endpoint}" if self.endpoint else "")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    # errors

    def _explain(self, error: Exception) -> str:
        from botocore.exceptions import ClientError, NoCredentialsError

        if isinstance(error, NoCredentialsError):
            return (
                f"no credentials for {self.where}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, an AWS profile or an instance role, or the target's "
                "key/secret options"
            )
        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                return f"the bucket {self.bucket!r} does not exist ({self.where})"
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
                return (
                    f"{self.where} refused the credentials ({code}): check the key and "
                    "that it may write to the bucket"
                )
            message = error.response.get("Error", {}).get("Message", "")
            return f"{self.where} answered {code or 'an error'}: {message}".rstrip(": ")
        return (
            f"{self.where} could not be reached ({error}): check that it is running and "
            "that the endpoint is right"
        )

    def _transient(self, error: Exception) -> bool:
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        )

        lost = (
            EndpointConnectionError,
            ConnectionClosedError,
            ReadTimeoutError,
            ConnectTimeoutError,
        )
        if isinstance(error, lost):
            return True
        if isinstance(error, ClientError):
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            code = error.response.get("Error", {}).get("Code", "")
            return status >= 500 or code in _TRANSIENT_CODES
        return False

    def _call(self, cancel: threading.Event | None, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """One S3 call with retries and backoff; a permanent error becomes a StoreError."""
        from botocore.exceptions import BotoCoreError, ClientError

        delay = self.tuning.backoff_s
        for attempt in range(self.tuning.retries + 1):
            if cancel is not None:
                _check(cancel)
            try:
                return fn(**kwargs)
            except (BotoCoreError, ClientError) as e:
                if attempt >= self.tuning.retries or not self._transient(e):
                    tries = f" after {attempt + 1} tries" if attempt else ""
                    raise StoreError(self._explain(e) + tries) from None
            if cancel is not None and cancel.wait(delay):
                raise Cancelled()
            if cancel is None:
                time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as e:
            if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                # a "folder" export is a prefix
                listed = self._call(
                    None,
                    self.client.list_objects_v2,
                    Bucket=self.bucket,
                    Prefix=self._key(key) + "/",
                    MaxKeys=1,
                )
                return bool(listed.get("KeyCount"))
            raise StoreError(self._explain(e)) from None
        except Exception as e:
            raise StoreError(self._explain(e)) from None

    def upload(self, path: Path, key: str, progress: Progress, cancel: threading.Event) -> Landed:
        size = path.stat().st_size
        if size <= self.tuning.part_size_bytes:
            return self._upload_single(path, key, size, progress, cancel)
        return self._upload_multipart(path, key, size, progress, cancel)

    def _verify(self, key: str, size: int, cancel: threading.Event) -> str:
        head = self._call(cancel, self.client.head_object, Bucket=self.bucket, Key=self._key(key))
        if head["ContentLength"] != size:
            raise StoreError(f"{self.url(key)} has {head['ContentLength']} bytes instead of {size}")
        if self.checksums:
            return "size, and the CRC32 of every part checked by the store"
        return "size"

    def _upload_single(
        self, path: Path, key: str, size: int, progress: Progress, cancel: threading.Event
    ) -> Landed:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        _check(cancel)
        self._call(
            cancel,
            self.client.put_object,
            Bucket=self.bucket,
            Key=self._key(key),
            Body=data,
            Metadata={"sha256": digest},
        )
        progress(len(data))
        try:
            verified = self._verify(key, len(data), cancel)
        except BaseException:
            self.delete(key)
            raise
        return Landed(self.url(key), len(data), digest, verified)

    def _upload_multipart(
        self, path: Path, key: str, size: int, progress: Progress, cancel: threading.Event
    ) -> Landed:
        part_size = part_size_for(size, self.tuning.part_size_bytes)
        # with the parts' CRC32s named at the start and listed at the end (as boto3's
        # upload_file does), the store checks them again when it assembles the object and
        # keeps a checksum of the whole; without, it may compute a full-object checksum
        # over all the bytes again (moto holds a second copy of the object to do it)
        checksum = {"ChecksumAlgorithm": "CRC32"} if self.checksums else {}
        started = self._call(
            cancel,
            self.client.create_multipart_upload,
            Bucket=self.bucket,
            Key=self._key(key),
            **checksum,
        )
        upload_id = started["UploadId"]
        sha = hashlib.sha256()
        # parts in flight: bounded, so memory stays near (concurrency + 1) × part size
        slots = threading.BoundedSemaphore(self.tuning.concurrency)
        futures: list[Future[dict[str, Any]]] = []
        failed = threading.Event()

        def send(number: int, data: bytes) -> dict[str, Any]:
            try:
                answer = self._call(
                    cancel,
                    self.client.upload_part,
                    Bucket=self.bucket,
                    Key=self._key(key),
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=data,
                )
                progress(len(data))
                part = {"PartNumber": number, "ETag": answer["ETag"]}
                if checksum and answer.get("ChecksumCRC32"):
                    part["ChecksumCRC32"] = answer["ChecksumCRC32"]
                return part
            except BaseException:
                failed.set()
                raise
            finally:
                slots.release()

        def take_slot() -> bool:
            """Wait for room for one more part; False once a part has failed."""
            while not slots.acquire(timeout=0.2):
                _check(cancel)
                if failed.is_set():
                    return False
            return True

        pool = ThreadPoolExecutor(self.tuning.concurrency, thread_name_prefix="gpucost-s3")
        try:
            with open(path, "rb", buffering=0) as src:
                number = 0
                while take_slot():
                    if cancel.is_set() or failed.is_set():
                        slots.release()
                        _check(cancel)
                        break
                    data = src.read(part_size)
                    if not data:
                        slots.release()
                        break
                    sha.update(data)
                    number += 1
                    futures.append(pool.submit(send, number, data))
                    del data
            wait(futures, return_when=FIRST_EXCEPTION)
            _check(cancel)
            for future in futures:
                if future.done() and future.exception() is not None:
                    raise future.exception()  # type: ignore[misc]
            parts = [f.result() for f in futures]
            self._call(
                cancel,
                self.client.complete_multipart_upload,
                Bucket=self.bucket,
                Key=self._key(key),
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            cancel_pending = [f.cancel() for f in futures]
            del cancel_pending
            pool.shutdown(wait=True)
            self._abort(key, upload_id)
            raise
        pool.shutdown(wait=True)
        digest = sha.hexdigest()
        try:
            verified = self._verify(key, size, cancel)
        except BaseException:
            self.delete(key)
            raise
        return Landed(self.url(key), size, digest, verified)

    def _abort(self, key: str, upload_id: str) -> None:
        # the store may be gone: nothing is at the key either way
        with contextlib.suppress(Exception):
            self.client.abort_multipart_upload(
                Bucket=self.bucket, Key=self._key(key), UploadId=upload_id
            )

    def put_bytes(self, key: str, data: bytes) -> None:
        self._call(
            None,
            self.client.put_object,
            Bucket=self.bucket,
            Key=self._key(key),
            Body=data,
            ContentType="application/json",
        )

    def delete(self, key: str) -> None:
        with contextlib.suppress(Exception):  # best-effort clean-up
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def rename(self, old: str, new: str) -> None:
        raise NotImplementedError("objects are not renamed")


# -- any other fsspec store (gs://) ----------------------------------------------------


class FsspecStore:
    renames = False

    def __init__(self, target: Target, tuning: Tuning) -> None:
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
        return StoreError(f"{what} {self.url('')[:-1]} failed: {type(error).__name__}: {error}")

    def exists(self, key: str) -> bool:
        try:
            return bool(self.fs.exists(self._path(key)))
        except Exception as e:
            raise self._fail("reaching", e) from None

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
                    _check(cancel)
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
                raise self._fail("writing to", e) from None
            raise
        try:
            landed = self.fs.info(target)["size"]
        except Exception as e:
            raise self._fail("checking the copy on", e) from None
        if landed != size:
            self.delete(key)
            raise StoreError(f"{self.url(key)} has {landed} bytes instead of {size}")
        return Landed(self.url(key), size, sha.hexdigest(), "size")

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            self.fs.pipe_file(self._path(key), data)
        except Exception as e:
            raise self._fail("writing to", e) from None

    def delete(self, key: str) -> None:
        with contextlib.suppress(Exception):  # best-effort clean-up
            self.fs.rm(self._path(key), recursive=True)

    def rename(self, old: str, new: str) -> None:
        raise NotImplementedError("objects are not renamed")


def open_store(target: Target, tuning: Tuning) -> Store:
    if target.scheme == "file":
        return LocalStore(target)
    if target.scheme in ("s3", "s3a"):
        return S3Store(target, tuning)
    return FsspecStore(target, tuning)
