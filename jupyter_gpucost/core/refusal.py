"""The one error a request is refused with, and the one JSON body every refusal answers.

Tornado-free code (input checks, cell records, history parameters, export jobs, the budget
routes, the hub's report route and its requests for more allowance) raises
:class:`Refusal` with a sentence the person who sent the request can act on and the HTTP
status that says what kind of refusal it is: 400 (what was sent cannot be taken), 403 (not
this caller's), 404 (what it names does not exist), 409 (not in the current state), 413,
429, 501, 503 (the part it needs is not running). The handlers never catch it: the server's
base handler (:mod:`jupyter_gpucost.server.web`) and the hub's (:mod:`..hub.web.handlers`,
:mod:`..hub.web.report_route`) answer it with that status and :func:`error_body`
(:func:`hub_error_body` on the hub).
"""

from __future__ import annotations

from http import HTTPStatus


class Refusal(ValueError):
    """A request refused; ``status`` is the HTTP answer, the message says why and what to
    send instead (shown to the user as it is)."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = int(status)


def error_body(message: str, reason: str | None = None) -> dict[str, object]:
    """The JSON body every refused request answers, on the server's routes and the hub's:
    jupyter_server's own shape, which JupyterLab's ``ServerConnection.ResponseError`` and
    the front end read — ``message``, the sentence shown, and ``reason`` (``null`` for a
    refusal)."""
    return {"message": message, "reason": reason}


def hub_error_body(message: str, status: int) -> dict[str, object]:
    """:func:`error_body` on the hub service's routes, with the keys its answers carried
    before (deprecated, to be removed in a later major version): ``status``, the HTTP
    status again, and ``error``, the message again (the allowance requests' key)."""
    return {**error_body(message), "status": int(status), "error": message}
