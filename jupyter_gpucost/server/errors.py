"""The one error a request can end with, raised by tornado-free code.

The core (input checks, cell records, history parameters, export jobs, the budget routes)
raises :class:`RequestError` with a message a person can act on and the HTTP status that
says what kind of refusal it is; the handlers never catch it. The base handler
(:mod:`jupyter_gpucost.server.web`) is the one place that turns it into the API's JSON
error, ``{"message": ..., "reason": null}`` with that status.
"""

from __future__ import annotations


class RequestError(ValueError):
    """A request the server refuses; ``status`` is the HTTP answer, the message says why
    and what to send instead."""

    #: the HTTP status when none is given
    default_status = 400

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = self.default_status if status is None else status


class Forbidden(RequestError):
    """The request is understood and refused: not this user's, or not this server's (403)."""

    default_status = 403


class NotFound(RequestError):
    """What the request names does not exist (404)."""

    default_status = 404


class Conflict(RequestError):
    """The request does not fit the current state, e.g. nothing to end or already ended
    (409)."""

    default_status = 409


class Unavailable(RequestError):
    """The part of the server the request needs is not running (503)."""

    default_status = 503
