"""Where alerts go: a list of URLs, checked at start, masked wherever they are shown.

Two kinds of URL:

* any URL Apprise knows (``mailtos://``, ``slack://``, ``msteams://``, ``lark://``,
  ``dingtalk://``, ``wecombot://``, ``ntfy://``, ``json://`` ...): Apprise delivers it;
* ``webhook://host/path`` (``webhooks://`` for HTTPS): our generic JSON webhook, which
  receives the alert's document (schema ``gpucost.alert/v1``, docs/alerts.md).

A URL holds secrets (tokens, passwords), so it is never logged nor shown: a target is
shown as its scheme and a short fingerprint (``slack://…#3fa1c2``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

WEBHOOK_SCHEMES = {"webhook": "http", "webhooks": "https"}
#: the longest URL taken (Apprise's own URLs are far shorter)
MAX_URL = 2048


class TargetError(ValueError):
    """A target URL that cannot be used; the message names the setting, never the URL."""


@dataclass(frozen=True, repr=False)
class Target:
    url: str
    via: Literal["apprise", "webhook"]

    @property
    def masked(self) -> str:
        return mask(self.url)

    @property
    def id(self) -> str:
        """A stable handle for the API (a fingerprint, not the URL)."""
        return fingerprint(self.url)

    def __repr__(self) -> str:  # never the URL, not even in a traceback
        return f"Target({self.masked})"


def fingerprint(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:6]


def scheme_of(url: str) -> str:
    head, sep, _rest = url.partition("://")
    return head.lower() if sep and head.replace("+", "").isalnum() else "?"


def mask(url: str) -> str:
    """``slack://…#3fa1c2``: the kind of target and which one, without any secret."""
    return f"{scheme_of(url)}://…#{fingerprint(url)}"


def parse_target(raw: object, setting: str) -> Target:
    """One URL, or :class:`TargetError` naming ``setting`` (and the masked URL)."""
    if not isinstance(raw, str) or not raw.strip():
        raise TargetError(f"{setting}: a target must be a non-empty URL string.")
    url = raw.strip()
    if len(url) > MAX_URL or any(ord(ch) < 32 for ch in url):
        raise TargetError(f"{setting}: the target {mask(url)} is not a valid URL.")
    scheme = scheme_of(url)
    if scheme in WEBHOOK_SCHEMES:
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if not parts.hostname or port == -1:
            raise TargetError(f"{setting}: the webhook target {mask(url)} has no valid host.")
        return Target(url, "webhook")
    try:
        import apprise
    except ImportError:
        raise TargetError(
            f"{setting}: the target {mask(url)} needs Apprise: "
            "pip install 'jupyter-gpucost[alerts]'."
        ) from None
    if apprise.Apprise.instantiate(url, suppress_exceptions=True) is None:
        raise TargetError(
            f"{setting}: the target {mask(url)} is not a URL Apprise can send to "
            "(see https://github.com/caronc/apprise/wiki), nor webhook:// or webhooks://."
        )
    return Target(url, "apprise")


def parse_targets(raw: Iterable[object], setting: str) -> tuple[Target, ...]:
    """Every URL of a setting, de-duplicated, or :class:`TargetError` for the first bad one."""
    seen: dict[str, Target] = {}
    for item in raw:
        target = parse_target(item, setting)
        seen.setdefault(target.url, target)
    return tuple(seen.values())
