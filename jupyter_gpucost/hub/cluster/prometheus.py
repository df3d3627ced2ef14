"""An async client of the cluster's Prometheus: instant queries (``POST /api/v1/query``),
bounded in time and in size, with a bearer token read from a file (re-read each time:
Kubernetes rotates projected tokens) or basic auth. Credentials are never logged, shown
or put in a message; the URL is shown without any user or password it holds.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from .promanswer import MAX_ANSWER_BYTES, AnswerRefused, Vector, parse_vector


class PrometheusError(RuntimeError):
    """No usable answer; the message is one line an admin can act on (no credentials)."""


def shown_url(url: str) -> str:
    """The URL without the user and password it may hold."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True)
class PrometheusAuth:
    """How the service authenticates to Prometheus (none by default)."""

    bearer_token_file: str = ""
    username: str = ""
    password_file: str = ""

    def __repr__(self) -> str:  # never the secrets' paths' contents, and not the user either
        return "PrometheusAuth(…)"

    def header(self) -> str | None:
        """The Authorization header (reads the files: call it off the event loop)."""
        if self.bearer_token_file:
            token = _read_secret(self.bearer_token_file, "prometheus_bearer_token_file")
            return f"Bearer {token}"
        if self.username:
            password = (
                _read_secret(self.password_file, "prometheus_password_file")
                if self.password_file
                else ""
            )
            pair = f"{self.username}:{password}".encode()
            return f"Basic {base64.b64encode(pair).decode()}"
        return None


def _read_secret(path: str, setting: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise PrometheusError(
            f"c.GpuCostHub.{setting} cannot be read ({type(e).__name__})"
        ) from None
    if not text or "\n" in text or "\r" in text:
        raise PrometheusError(f"c.GpuCostHub.{setting} does not hold one line")
    return text


class Prometheus:
    """Instant queries to one Prometheus."""

    def __init__(self, url: str, *, timeout_s: float = 5.0, auth: PrometheusAuth | None = None):
        self.url = url.rstrip("/")
        self.shown = shown_url(self.url)
        self.timeout_s = timeout_s
        self.auth = auth or PrometheusAuth()
        parts = urlsplit(self.url)
        if parts.username is not None and not self.auth.username:
            # credentials in the URL: sent as basic auth, never shown
            self.auth = PrometheusAuth(username=parts.username)
            self._url_password = parts.password or ""
        else:
            self._url_password = ""
        self._endpoint = self.shown
        self._http = AsyncHTTPClient(
            force_instance=True, max_body_size=MAX_ANSWER_BYTES, max_buffer_size=MAX_ANSWER_BYTES
        )

    def _header(self) -> str | None:
        if self._url_password:
            pair = f"{self.auth.username}:{self._url_password}".encode()
            return f"Basic {base64.b64encode(pair).decode()}"
        return self.auth.header()

    async def query(self, promql: str, at: datetime) -> Vector:
        """One instant query evaluated at ``at``; :class:`PrometheusError` on any failure
        within ``timeout_s``."""
        try:
            return await asyncio.wait_for(self._query(promql, at), self.timeout_s + 1)
        except TimeoutError:
            raise PrometheusError(f"{self.shown}: no answer in {self.timeout_s:g} s") from None

    async def _query(self, promql: str, at: datetime) -> Vector:
        authorization = await asyncio.to_thread(self._header)
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        if authorization:
            headers["Authorization"] = authorization
        body = urlencode(
            {"query": promql, "time": f"{at.timestamp():.3f}", "timeout": f"{self.timeout_s:g}s"}
        )
        body_read = bytearray()
        declared = [0]

        def on_header(line: str) -> None:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length" and value.strip().isdigit():
                declared[0] = int(value.strip())

        def on_chunk(chunk: bytes) -> None:
            body_read.extend(chunk)

        request = HTTPRequest(
            f"{self._endpoint}/api/v1/query",
            header_callback=on_header,
            streaming_callback=on_chunk,
            method="POST",
            headers=headers,
            body=body,
            request_timeout=self.timeout_s,
            connect_timeout=self.timeout_s,
            follow_redirects=False,
        )

        def failed(error: object) -> PrometheusError:
            if max(declared[0], len(body_read)) > MAX_ANSWER_BYTES - 65_536:
                return PrometheusError(f"{self.shown} answered more than {MAX_ANSWER_BYTES} bytes")
            return PrometheusError(f"{self.shown} is unreachable ({_why(error)})")

        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as e:
            raise failed(e) from None
        if response.code == 599:
            raise failed(response.error)
        if response.code in (401, 403):
            raise PrometheusError(
                f"{self.shown} refused the service's credentials ({response.code}): see "
                "c.GpuCostHub.prometheus_bearer_token_file or prometheus_username"
            )
        raw = bytes(body_read)
        try:
            # parsing a large answer takes a while: off the event loop
            vector = await asyncio.to_thread(parse_vector, raw)
        except AnswerRefused as e:
            raise PrometheusError(f"{self.shown} answered {response.code}: {e}") from None
        if response.code != 200:
            raise PrometheusError(f"{self.shown} answered {response.code}")
        return vector

    def close(self) -> None:
        self._http.close()


def _why(error: object) -> str:
    text = " ".join(str(error).split())
    return text[:200] or type(error).__name__
