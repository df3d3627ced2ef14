"""One alert to one target, bounded in time: Apprise for the URLs it knows, an HTTP POST of
the alert's JSON document for ``webhook(s)://``.

Errors are :class:`DeliveryError` with a message that never holds the URL. Apprise's own
log names hosts and parts of tokens, so it is kept quiet (errors only reach the caller, as
the dispatcher's record of a failed delivery).
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from .model import Alert
from .targets import WEBHOOK_SCHEMES, Target

# Apprise's log names hosts and parts of tokens
logging.getLogger("apprise").setLevel(logging.CRITICAL)

#: what sends one alert to one target (a stand-in in unit tests, :func:`deliver` otherwise)
Send = Callable[[Alert, Target, float], None]


class DeliveryError(RuntimeError):
    """A delivery failed; the message says how, never where."""


def _webhook(alert: Alert, url: str, timeout_s: float) -> None:
    parts = urlsplit(url)
    http_url = urlunsplit(
        (WEBHOOK_SCHEMES[parts.scheme.lower()], parts.netloc, parts.path or "/", parts.query, "")
    )
    body = json.dumps(alert.document()).encode("utf-8")
    request = urllib.request.Request(
        http_url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "jupyter-gpucost-alerts"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            answer.read(1024)
    except urllib.error.HTTPError as e:
        raise DeliveryError(f"the webhook answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise DeliveryError(f"the webhook could not be reached ({type(reason).__name__})") from None


def _bounded(url: str, timeout_s: float) -> str:
    """The URL with Apprise's connect and read timeouts (``cto``, ``rto``) set."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}cto={timeout_s:g}&rto={timeout_s:g}"


def _apprise(alert: Alert, url: str, timeout_s: float) -> None:
    import apprise  # an extra (jupyter-gpucost[alerts]); checked at start by .targets

    sender = apprise.Apprise()
    if not sender.add(_bounded(url, timeout_s)):
        raise DeliveryError("Apprise could not load the target")
    try:
        ok = sender.notify(title=alert.title, body=alert.body())
    except Exception as e:  # a plugin's own failure
        raise DeliveryError(f"Apprise failed ({type(e).__name__})") from None
    if not ok:
        raise DeliveryError("Apprise could not deliver the alert")


def deliver(alert: Alert, target: Target, timeout_s: float) -> None:
    """Send ``alert`` to ``target`` or raise :class:`DeliveryError` (within about
    ``timeout_s`` per connection step)."""
    if target.via == "webhook":
        _webhook(alert, target.url, timeout_s)
    else:
        _apprise(alert, target.url, timeout_s)
