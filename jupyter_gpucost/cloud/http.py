"""One small HTTP client for metadata services and cloud APIs: bounded, no proxies.

Metadata services answer on link-local addresses that a proxy must never see, so the
environment's proxy settings are ignored. Bodies are capped, and read within the request's
time; a credential sent (the ``Authorization`` header, an IMDSv2 session token) is
blanked out of what a caller may show of the answer (:meth:`Answer.snippet`), and an
answer that is not HTTP is never quoted (a server may echo what it was sent).
"""

from __future__ import annotations

import base64
import http.client
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

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
    """``text`` with every secret (and, for ``Bearer <token>``, the token) blanked out, in
    every encoding a provider may echo it in (:func:`secret_pattern`, :func:`encoded_forms`)."""
    found: set[str] = set()
    for secret in {s.strip() for s in secrets}:
        if not secret:
            continue
        found.add(secret)
        scheme, _, credential = secret.partition(" ")
        if credential.strip() and scheme.lower() == "bearer":
            found.add(credential.strip())
    # the longest first: a secret that contains another is blanked whole
    for secret in sorted(found, key=len, reverse=True):
        text = secret_pattern(secret).sub(REDACTED, text)
        for form in sorted(encoded_forms(secret), key=len, reverse=True):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


def secret_pattern(secret: str) -> re.Pattern[str]:
    """``secret`` as it is, or with any of its other characters than letters and digits
    written as a provider may write them: URL-encoded once or twice, in either
    case (Alibaba's "SignatureDoesNotMatch" quotes the string it signed, whose values are
    encoded twice: NewFuture/DDNS#57), ``+`` for a space (a form), or JSON-escaped
    (``\\/``, ``\\"``, and ``\\uXXXX`` for any of them, as .NET writes ``+``, Google
    ``=``, Go ``<>&``): each character on its own, so any mix of them matches."""
    parts = []
    for char in secret:
        if char.isascii() and char.isalnum():
            parts.append(re.escape(char))
            continue
        utf8 = char.encode()
        hexes = "".join(f"%{b:02x}" for b in utf8)
        forms = [
            re.escape(char),
            "(?i:" + re.escape(hexes) + ")",
            "(?i:" + re.escape(hexes.replace("%", "%25")) + ")",
            "(?i:" + re.escape(f"\\u{ord(char):04x}") + ")" if ord(char) <= 0xFFFF else "",
            re.escape(JSON_ESCAPES.get(char, "")),
        ]
        parts.append("(?:" + "|".join(f for f in forms if f) + ")")
    return re.compile("".join(parts))


#: how JSON writes a few characters besides ``\\uXXXX``; and a form writes a space ``+``
JSON_ESCAPES = {"/": "\\/", '"': '\\"', "\\": "\\\\", " ": "+"}


def encoded_forms(secret: str) -> frozenset[str]:
    """``secret`` in the encodings that rewrite it whole: base64 (standard and URL-safe,
    alone or inside a longer encoded text such as ``Basic base64(id:secret)``) and hex
    bytes (S3 quotes the bytes it signed: ``<CanonicalRequestBytes>50 55 54 ...``), of it
    and of its URL-encoded forms."""
    raw = secret.encode()
    forms = set(_base64_forms(raw))
    for text in {secret, quote(secret, safe=""), quote(secret, safe="-_.~"), quote(secret)}:
        data = text.encode()
        forms |= {data.hex(), data.hex().upper(), data.hex(" "), data.hex(" ").upper()}
    # a form too short to be told from ordinary text is not blanked
    return frozenset(f for f in forms if len(f) >= min(len(secret), MIN_FORM))


#: the shortest encoded form that is blanked out
MIN_FORM = 8


def _base64_forms(raw: bytes) -> set[str]:
    """The base64 of ``raw`` alone, and the characters that encode it whatever comes
    before it in a longer text (one of three alignments), standard and URL-safe."""
    forms = set()
    for lead in range(3):
        encoded = base64.b64encode(b"\0" * lead + raw).decode()
        # the characters made of ``raw``'s bits only: 6-bit groups past the lead's bytes
        start = -(-8 * lead // 6)
        end = 8 * (lead + len(raw)) // 6
        if lead == 0:
            forms |= {encoded, encoded.rstrip("=")}
        forms.add(encoded[start:end])
    return forms | {f.translate(_URLSAFE) for f in forms}


_URLSAFE = str.maketrans("+/", "-_")


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

    def shown(self, text: str) -> str:
        """``text`` read from the body, as it may be shown: credentials blanked out (before
        it is cut, so that no part of one is left)."""
        return redact(text, self.secrets)


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
    secrets: Iterable[str] = (),
) -> Answer:
    """Send one request; any HTTP status is an :class:`Answer`, no answer raises.

    ``secrets``: the credentials the body carries (a signed form's token), blanked out of
    what may be shown like those of the headers. ``timeout_s`` bounds each wait for the
    server and the reading of the body (twice ``timeout_s`` in all, at most)."""
    sent = dict(headers or {})
    secrets = (
        *(v for k, v in sent.items() if k.lower() in SECRET_HEADERS and v),
        *(s for s in secrets if s),
    )
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
