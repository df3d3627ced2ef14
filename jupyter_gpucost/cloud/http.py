"""One small HTTP client for metadata services and cloud APIs: bounded, no proxies.

Metadata services answer on link-local addresses that a proxy must never see, so the
environment's proxy settings are ignored. Bodies are capped, and read within the request's
time; a credential sent (the ``Authorization`` header, an IMDSv2 session token) is
blanked out of what a caller may show of the answer (:meth:`Answer.snippet`), and an
answer that is not HTTP is never quoted (a server may echo what it was sent).
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

#: the largest body read from a metadata service or an API answer
MAX_BODY_BYTES = 1 << 20
#: request headers whose values are credentials (compared in lower case)
SECRET_HEADERS = frozenset({"authorization", "x-aws-ec2-metadata-token"})
#: what a credential is replaced with
REDACTED = "[redacted]"

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_CHUNK = 64 * 1024


class HttpFailure(Exception):
    """No answer (refused, timed out, unreachable, not HTTP); the message says which."""


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and, for ``Bearer <token>``, the token) blanked out."""
    for secret in sorted({s.strip() for s in secrets}, key=len, reverse=True):
        if secret:
            text = text.replace(secret, REDACTED)
            scheme, _, credential = secret.partition(" ")
            if credential and scheme.lower() == "bearer":
                text = text.replace(credential, REDACTED)
    return text


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: Mapping[str, str]
    #: the credentials the request carried (never shown)
    secrets: tuple[str, ...] = ()

    def snippet(self) -> str:
        """The start of the body, for an error message: credentials blanked out."""
        return " ".join(redact(self.body, self.secrets)[:300].split())


class _Body(Protocol):
    def read(self, amt: int, /) -> bytes: ...


def _read(response: _Body, deadline: float) -> bytes:
    """At most MAX_BODY_BYTES, and no longer than the request's time."""
    data = bytearray()
    while len(data) < MAX_BODY_BYTES:
        if time.monotonic() > deadline:
            raise TimeoutError("the answer took too long")
        chunk = response.read(min(_CHUNK, MAX_BODY_BYTES - len(data)))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    timeout_s: float,
) -> Answer:
    """Send one request; any HTTP status is an :class:`Answer`, no answer raises.

    ``timeout_s`` bounds each wait for the server and the reading of the body (twice
    ``timeout_s`` in all, at most)."""
    sent = dict(headers or {})
    secrets = tuple(v for k, v in sent.items() if k.lower() in SECRET_HEADERS and v)
    req = urllib.request.Request(url, data=body, method=method, headers=sent)
    deadline = time.monotonic() + 2 * timeout_s
    try:
        with _OPENER.open(req, timeout=timeout_s) as response:
            data = _read(response, deadline)
            return Answer(
                response.status, data.decode("utf-8", "replace"), dict(response.headers), secrets
            )
    except urllib.error.HTTPError as e:
        try:
            data = _read(e, deadline) if e.fp is not None else b""
        except (OSError, http.client.HTTPException):
            data = b""
        return Answer(e.code, data.decode("utf-8", "replace"), dict(e.headers or {}), secrets)
    except http.client.HTTPException as e:
        # e.g. BadStatusLine, whose text is the server's first line: never quoted
        raise HttpFailure(
            f"{method} {url} got an answer that is not HTTP ({type(e).__name__})"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise HttpFailure(redact(f"{method} {url} got no answer: {reason}", secrets)) from None
