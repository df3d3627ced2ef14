"""How kernels reach the server: its URL and a token of their own, in their environment.

The server puts ``JUPYTER_GPUCOST_URL`` (a loopback URL with the base URL) and
``JUPYTER_GPUCOST_TOKEN`` (random, made at start-up) in the environment every kernel it
starts inherits. The token opens a few routes only — reading the status, recording a
cell's cost, setting the user's own budget — never the rest of Jupyter Server, and never
the administrator's budget. A request with it needs no XSRF cookie (a kernel has no
browser); a browser never sees it.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from tornado import web

ENV_URL = "JUPYTER_GPUCOST_URL"
ENV_TOKEN = "JUPYTER_GPUCOST_TOKEN"
SETTINGS_KEY = "gpucost_kernel_token"

F = TypeVar("F", bound=Callable[..., Any])


def new_token() -> str:
    return secrets.token_urlsafe(32)


def loopback_url(serverapp: Any) -> str | None:
    """The URL a kernel on this machine reaches the server at (None on a Unix socket)."""
    if getattr(serverapp, "sock", ""):
        return None
    port = int(getattr(serverapp, "port", 0) or 0)
    if not port:
        return None
    ip = str(getattr(serverapp, "ip", "") or "")
    host = "[::1]" if ":" in ip else "127.0.0.1"
    scheme = "https" if getattr(serverapp, "certfile", "") else "http"
    base = str(getattr(serverapp, "base_url", "/") or "/")
    if not base.endswith("/"):
        base += "/"
    return f"{scheme}://{host}:{port}{base}"


def publish(environ: MutableMapping[str, str], url: str | None, token: str) -> None:
    """Where kernels started from now on find the server."""
    environ[ENV_TOKEN] = token
    if url:
        environ[ENV_URL] = url
    else:
        environ.pop(ENV_URL, None)


def is_kernel_request(handler: web.RequestHandler) -> bool:
    """Whether the request carries the kernels' token (compared in constant time)."""
    expected = handler.settings.get(SETTINGS_KEY)
    header = handler.request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if not expected or scheme.lower() != "token" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), str(expected).encode())


class KernelUser:
    """The identity of a request made with the kernels' token."""

    username = "kernel"
    name = "kernel"
    display_name = "a kernel of this server"


def user_or_kernel(method: F) -> F:
    """Authenticated and authorised as usual, or made with the kernels' token."""
    checked = web.authenticated(authorized(method))

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "kernel_authenticated", False):
            return method(self, *args, **kwargs)
        return checked(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
