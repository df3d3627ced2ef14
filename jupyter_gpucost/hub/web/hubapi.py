"""An async client of the JupyterHub REST API: the servers that run, who owns a token, and
stopping a server.

The service's own token needs ``list:users``, ``read:users:groups`` and ``read:servers``
(to list the running servers with their ``user_options`` and groups) and
``delete:servers`` (to stop a server over its budget). Whoever owns a token that comes with
a report or a page is asked of the Hub with *that* token (``GET /user``), which any token
may do. Tokens are never logged: a cache keys them by their SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..model import ServerInfo

log = logging.getLogger("jupyter_gpucost.hub")

PAGINATION = "application/jupyterhub-pagination+json"
PAGE_LIMIT = 200


class HubApiError(RuntimeError):
    """The Hub could not be reached or refused the service; the message says which call."""


@dataclass(frozen=True)
class Identity:
    """Who owns a token, as the Hub says (``GET /user`` with that token)."""

    kind: str  # "user" or "service"
    name: str
    admin: bool = False
    groups: tuple[str, ...] = ()
    scopes: frozenset[str] = frozenset()


def token_key(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return _parse_time(value)


@lru_cache(maxsize=4096)
def _parse_time(value: str) -> datetime:
    # each running server's ``started`` comes again with every poll: parsed once
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def servers_of(user: dict[str, Any]) -> list[ServerInfo]:
    """The running servers in one user model of ``GET /users?state=active``."""
    found = []
    groups = tuple(map(str, user.get("groups") or ()))
    for name, server in (user.get("servers") or {}).items():
        started = parse_time(server.get("started"))
        if started is None or server.get("stopped"):
            continue
        options = server.get("user_options") or {}
        if not isinstance(options, dict):
            options = {}
        profile = options.get("profile")
        found.append(
            ServerInfo(
                user=str(user["name"]),
                server_name=str(name),
                started=started,
                ready=bool(server.get("ready")),
                profile=profile if isinstance(profile, str) else None,
                user_options=options,
                groups=groups,
            )
        )
    return found


class HubApi:
    """The calls the service makes to the Hub, with its own token."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        timeout_s: float = 10.0,
        identity_cache_s: float = 60.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._token = token
        self.timeout_s = timeout_s
        self.identity_cache_s = identity_cache_s
        self._identities: dict[str, tuple[float, Identity | None]] = {}
        self._http = AsyncHTTPClient()

    async def _call(
        self, method: str, path: str, *, token: str | None = None, accept: str | None = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"token {token or self._token}"}
        if accept:
            headers["Accept"] = accept
        request = HTTPRequest(
            f"{self.api_url}{path}",
            method=method,
            headers=headers,
            request_timeout=self.timeout_s,
            connect_timeout=self.timeout_s,
        )
        try:
            response = await self._http.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as e:
            # refused, reset, or no answer in time (a timeout is raised, not returned)
            raise HubApiError(
                f"{method} {self.api_url}{path}: the Hub is unreachable ({e})"
            ) from None
        if response.code == 599:
            raise HubApiError(
                f"{method} {self.api_url}{path}: no answer from the Hub ({response.error})"
            )
        body = response.body
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = body.decode("utf-8", "replace")[:300]
        return response.code, doc

    async def _users(self, query: str = "") -> list[dict[str, Any]]:
        """Every user model ``GET /users[?query]`` lists, page after page."""
        users: list[dict[str, Any]] = []
        listing = f"/users?{query}" if query else "/users"
        offset = 0
        while True:
            path = f"{listing}{'&' if query else '?'}offset={offset}&limit={PAGE_LIMIT}"
            code, doc = await self._call("GET", path, accept=PAGINATION)
            if code != 200:
                raise HubApiError(f"GET {self.api_url}{listing}: {code} {_why(doc)}")
            users.extend(doc["items"] if isinstance(doc, dict) else doc)
            following = doc.get("_pagination", {}).get("next") if isinstance(doc, dict) else None
            if not following:
                return users
            offset = int(following["offset"])

    async def active_servers(self) -> list[ServerInfo]:
        """Every server the Hub has started and not yet stopped (pending ones included)."""
        return [server for user in await self._users("state=active") for server in servers_of(user)]

    async def groups_of_users(self) -> dict[str, tuple[str, ...]]:
        """Every user's groups (``GET /users``, all of them: a group budget pools the spend
        of members who are not running a server too)."""
        return {
            str(user["name"]): tuple(str(g) for g in user.get("groups") or ())
            for user in await self._users()
        }

    def known(self, token: str) -> tuple[bool, Identity | None]:
        """``(True, who)`` when the cache still knows who owns ``token`` (``who`` is None
        for a token the Hub did not know); ``(False, None)`` when the Hub must be asked."""
        cached = self._identities.get(token_key(token))
        if cached is not None and cached[0] > time.monotonic():
            return True, cached[1]
        return False, None

    async def identify(self, token: str) -> Identity | None:
        """Who owns ``token`` (None: the Hub knows no such token); cached a minute."""
        found, who = self.known(token)
        if found:
            return who
        key = token_key(token)
        now = time.monotonic()
        code, doc = await self._call("GET", "/user", token=token)
        if code in (401, 403, 404):
            identity = None
            # remember an unknown token briefly only: it may be a fresh one
            expires = now + min(5.0, self.identity_cache_s)
        elif code == 200 and isinstance(doc, dict):
            identity = Identity(
                kind=str(doc.get("kind", "user")),
                name=str(doc["name"]),
                admin=bool(doc.get("admin")),
                groups=tuple(str(g) for g in doc.get("groups") or ()),
                scopes=frozenset(str(s) for s in doc.get("scopes") or ()),
            )
            expires = now + self.identity_cache_s
        else:
            raise HubApiError(f"GET {self.api_url}/user: {code} {_why(doc)}")
        if len(self._identities) > 50_000:
            self._identities.clear()
        self._identities[key] = (expires, identity)
        return identity

    async def stopped_at(self, user: str, server_name: str) -> datetime | None:
        """When the Hub says this server stopped (``None``: it does not say, or it runs).

        JupyterHub sets a server's ``last_activity`` to the time it stopped it and lists
        stopped servers with ``include_stopped_servers``."""
        path = f"/users/{quote(user, safe='')}?include_stopped_servers=1"
        code, doc = await self._call("GET", path)
        if code != 200 or not isinstance(doc, dict):
            raise HubApiError(f"GET {self.api_url}{path}: {code} {_why(doc)}")
        server = (doc.get("servers") or {}).get(server_name)
        if not isinstance(server, dict) or not server.get("stopped"):
            return None
        return parse_time(server.get("last_activity"))

    async def stop_server(self, user: str, server_name: str) -> str:
        """Ask the Hub to stop a server: "stopping", or "gone" when it is not running."""
        path = f"/users/{quote(user, safe='')}/server"
        if server_name:
            path = f"/users/{quote(user, safe='')}/servers/{quote(server_name, safe='')}"
        code, doc = await self._call("DELETE", path)
        if code in (202, 204):
            return "stopping"
        if code in (400, 404):
            # not running (any more): nothing to stop
            return "gone"
        raise HubApiError(f"DELETE {self.api_url}{path}: {code} {_why(doc)}")


def _why(doc: object) -> str:
    if isinstance(doc, dict):
        return str(doc.get("message") or doc.get("error") or "")[:300]
    return str(doc or "")[:300]
