"""Exports to S3 and S3-compatible stores (``s3://``, others through ``endpoint_url``):
boto3's multipart API directly, parts uploaded by a bounded pool while the next part is
read; an object exists at its key only after ``CompleteMultipartUpload``, and a failed or
cancelled upload is aborted. Transient errors are retried with backoff; permanent ones
become a message a person can act on.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...core.i18n import _
from .store_base import (
    Cancelled,
    Landed,
    Progress,
    StoreError,
    Tuning,
    check_cancel,
    part_size_for,
)
from .targets import ExportTarget

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

    def __init__(self, target: ExportTarget, tuning: Tuning) -> None:
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
            text = _(
                "no credentials for {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "an AWS profile or an instance role, or the target's key/secret options"
            )
            return text.format(where=self.where)
        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                text = _("the bucket {bucket} does not exist ({where})")
                return text.format(bucket=repr(self.bucket), where=self.where)
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
                text = _(
                    "{where} refused the credentials ({code}): check the key and that it may "
                    "write to the bucket"
                )
                return text.format(where=self.where, code=code)
            message = error.response.get("Error", {}).get("Message", "")
            if not code:
                code = _("an error")
            text = (
                _("{where} answered {code}: {message}") if message else _("{where} answered {code}")
            )
            return text.format(where=self.where, code=code, message=message)
        text = _(
            "{where} could not be reached ({why}): check that it is running and that the "
            "endpoint is right"
        )
        return text.format(where=self.where, why=error)

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
                check_cancel(cancel)
            try:
                return fn(**kwargs)
            except (BotoCoreError, ClientError) as e:
                if attempt >= self.tuning.retries or not self._transient(e):
                    explained = self._explain(e)
                    if attempt:
                        text = _("{error} after {n} tries")
                        explained = text.format(error=explained, n=attempt + 1)
                    raise StoreError(explained) from None
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
            text = _("{url} has {landed} bytes instead of {size}")
            landed = head["ContentLength"]
            raise StoreError(text.format(url=self.url(key), landed=landed, size=size))
        if self.checksums:
            return "size, and the CRC32 of every part checked by the store"
        return "size"

    def _upload_single(
        self, path: Path, key: str, size: int, progress: Progress, cancel: threading.Event
    ) -> Landed:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        check_cancel(cancel)
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

        def send(number: int, data: bytes) -> dict[str, object]:
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
                check_cancel(cancel)
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
                        check_cancel(cancel)
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
            check_cancel(cancel)
            for future in futures:
                error = future.exception() if future.done() else None
                if error is not None:
                    raise error
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
