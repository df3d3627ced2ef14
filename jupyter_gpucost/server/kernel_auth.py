"""The server's side of the kernel link: its URL and a token of the kernels' own.

The server puts ``JUPYTER_GPUCOST_URL`` (a loopback URL with the base URL) and
``JUPYTER_GPUCOST_TOKEN`` (random, made at start-up) in the environment every kernel it
starts inherits (the names, and the prices payload, are the contract in
:mod:`jupyter_gpucost.core.protocol`; the kernel's side is
:mod:`jupyter_gpucost.kernel.link`). The token opens a few routes only — reading the
status, recording a cell's cost, setting the user's own budget — never the rest of Jupyter
Server, and never the administrator's budget. A request with it needs no XSRF cookie (a
kernel has no browser); a browser never sees it.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar, cast

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..core.protocol import ENV_TOKEN, ENV_URL, TOKEN_SCHEME

SETTINGS_KEY = "gpucost_kernel_token"

#: a handler's method (tornado's handlers return None, or an awaitable for async ones)
Method = TypeVar("Method", bound=Callable[..., Awaitable[None] | None])


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
    if not expected or scheme.lower() != TOKEN_SCHEME or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), str(expected).encode())


class KernelUser:
    """The identity of a request made with the kernels' token."""

    username = "kernel"
    name = "kernel"
    display_name = "a kernel of this server"


def user_or_kernel(method: Method) -> Method:
    """Authenticated and authorised as usual, or made with the kernels' token."""
    checked = web.authenticated(authorized(method))

    @functools.wraps(method)
    def wrapper(self: web.RequestHandler, *args: Any, **kwargs: Any) -> Awaitable[None] | None:
        # set by the base handler's prepare() for a request with the kernels' token
        if getattr(self, "kernel_authenticated", False):
            return method(self, *args, **kwargs)
        return checked(self, *args, **kwargs)

    return cast(Method, wrapper)
