"""The service's HTTP server: ``POST api/report`` handed straight to its route, every other
request through the tornado application.

Each running server reports every few seconds (100 requests a second at 1,000 users).
tornado's ``HTTPServer(xheaders=True)`` reads the proxy's forwarded headers for every
request (``X-Forwarded-For``, ``X-Real-Ip``: one ``getaddrinfo`` to check the address,
``X-Scheme``), and the application's router tries its rules' patterns one after the
other. The report route reads neither the client's address nor the scheme (a report is
known by its token; the rate limit is per user), so :class:`ServiceServer` picks it by its
path before either: the same :class:`~.report_route.ReportRoute` the application routes
to, with the same answers. Every other request is served as ``HTTPServer`` serves it,
forwarded headers included.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

from tornado import httputil, web
from tornado.httpserver import HTTPServer

from .report_route import ReportRoute, report_path


class ServiceServer(HTTPServer):
    """An ``HTTPServer`` that sends requests for ``report_path`` to ``report_route``."""

    def initialize(  # type: ignore[override]
        self,
        request_callback: Any,
        *,
        report_path: str,
        report_route: ReportRoute,
        **kwargs: Any,
    ) -> None:
        super().initialize(request_callback, **kwargs)
        self.report_path = report_path
        self.report_route = report_route

    def start_request(
        self, server_conn: object, request_conn: httputil.HTTPConnection
    ) -> httputil.HTTPMessageDelegate:
        return _PickedByPath(self, server_conn, request_conn)


class _PickedByPath(httputil.HTTPMessageDelegate):
    """One request: to the report route when its path (the query left out) is the report
    path, as the application's rule would match it; otherwise to ``HTTPServer``'s own
    delegate (the forwarded headers, the application's router)."""

    def __init__(
        self, server: ServiceServer, server_conn: object, request_conn: httputil.HTTPConnection
    ) -> None:
        self.server = server
        self.server_conn = server_conn
        self.request_conn = request_conn
        self.delegate: httputil.HTTPMessageDelegate | None = None

    def headers_received(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
    ) -> Awaitable[None] | None:
        path = cast(httputil.RequestStartLine, start_line).path.partition("?")[0]
        server = self.server
        if path == server.report_path:
            self.delegate = server.report_route.start_request(self.server_conn, self.request_conn)
        else:
            self.delegate = HTTPServer.start_request(server, self.server_conn, self.request_conn)
        return self.delegate.headers_received(start_line, headers)

    def data_received(self, chunk: bytes) -> Awaitable[None] | None:
        assert self.delegate is not None
        return self.delegate.data_received(chunk)

    def finish(self) -> None:
        assert self.delegate is not None
        self.delegate.finish()

    def on_connection_close(self) -> None:
        if self.delegate is not None:
            self.delegate.on_connection_close()


def listen(
    app: web.Application, base_url: str, port: int, address: str, **kwargs: Any
) -> HTTPServer:
    """Serve ``app`` (:func:`.handlers.make_app`) on ``address:port``; ``kwargs`` are
    ``HTTPServer``'s (``xheaders``, ``max_body_size``)."""
    route: ReportRoute = app.settings["gpucost_report"]
    server = ServiceServer(app, report_path=report_path(base_url), report_route=route, **kwargs)
    server.listen(port, address)
    return server
