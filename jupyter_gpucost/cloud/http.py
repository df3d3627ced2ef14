"""One small HTTP client for metadata services and cloud APIs: bounded, no proxies.

Metadata services answer on link-local addresses that a proxy must never see, so the
environment's proxy settings are ignored. Bodies are capped; a token never appears in an
error message.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

#: the largest body read from a metadata service or an API answer
MAX_BODY_BYTES = 1 << 20

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class HttpFailure(Exception):
    """No answer (refused, timed out, unreachable); the message says which."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: Mapping[str, str]

    def snippet(self) -> str:
        """The start of the body, for an error message."""
        return " ".join(self.body[:300].split())


def request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    timeout_s: float,
) -> Answer:
    """Send one request; any HTTP status is an :class:`Answer`, no answer raises."""
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with _OPENER.open(req, timeout=timeout_s) as response:
            data = response.read(MAX_BODY_BYTES)
            return Answer(response.status, data.decode("utf-8", "replace"), dict(response.headers))
    except urllib.error.HTTPError as e:
        data = e.read(MAX_BODY_BYTES) if e.fp is not None else b""
        return Answer(e.code, data.decode("utf-8", "replace"), dict(e.headers or {}))
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise HttpFailure(f"{method} {url} got no answer: {reason}") from None
