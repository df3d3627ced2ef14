"""Refuse a spawn over a day or month budget, in ``jupyterhub_config.py``::

    from jupyter_gpucost.hub.spawn_hook import refuse_over_budget

    c.Spawner.pre_spawn_hook = refuse_over_budget(
        service_url="http://127.0.0.1:10101/services/gpucost/",
        api_token=GPUCOST_SERVICE_TOKEN,  # the service's api_token in c.JupyterHub.services
    )

The hook asks the service (``GET api/users/{name}/allowance``, with the service's own
token) before each spawn. When a day or month budget of the user, or of one of their groups,
is spent, it raises an error whose message the Hub shows on the spawn page (and returns in
``POST /hub/api/users/{name}/server``).

When the service cannot be asked (down, hung, a reset connection, refusing the token, an
answer that is not an allowance), ``fail_open`` decides:
``False`` (the default) refuses the spawn with a message saying the budget service is
unavailable — no spend goes unchecked; ``True`` lets the spawn go ahead and logs a warning —
nobody is locked out while the service restarts (the service still bills the server and
enforces its budgets once it is back: a server that started while the service was down is
billed from its start).

The whole call is bounded by ``timeout_s`` (connecting and answering together), so a
service that accepts and never answers delays a spawn by at most that.

The refusal is in the user's language when the Hub knows it: the ``Accept-Language`` of the
request that asked for the spawn (``spawner.handler``: the spawn page, or the REST call),
passed on to the service, which writes its reason in that language; English otherwise.

Runs inside the Hub process: it imports only the standard library, tornado and the
package's message catalog (:mod:`jupyter_gpucost.core.i18n`, standard library only).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ..core.i18n import N_, SOURCE_LANGUAGE, accept_language, messages_for

log = logging.getLogger("jupyter_gpucost.hub")

PreSpawnHook = Callable[[Any], Awaitable[None]]

#: the refusals the hook writes itself, translated into the user's language
UNAVAILABLE = N_(
    "The GPU budget service is unavailable, so no server can start now. "
    "Try again in a minute, or ask your hub admin."
)
SPENT = N_("Your GPU budget is spent.")


def spawn_language(spawner: Any) -> str:
    """The language of the request that asked for the spawn (its ``Accept-Language``:
    the browser's on the spawn page, the client's on the REST API), English when the
    Hub gives the hook no request."""
    request = getattr(getattr(spawner, "handler", None), "request", None)
    headers = getattr(request, "headers", None)
    header = headers.get("Accept-Language", "") if headers is not None else ""
    return accept_language(header) if isinstance(header, str) else SOURCE_LANGUAGE


class SpawnRefused(web.HTTPError):
    """A spawn the hub's GPU budgets do not allow. JupyterHub shows ``log_message`` on the
    spawn page (and returns it as the API error's message)."""

    def __init__(self, message: str, status_code: int = 403) -> None:
        super().__init__(status_code, message.replace("%", "%%"))
        # the Hub's spawn page shows the message of an HTTPError as given
        self.jupyterhub_message = message


def refuse_over_budget(
    service_url: str,
    api_token: str,
    *,
    fail_open: bool = False,
    timeout_s: float = 5.0,
) -> PreSpawnHook:
    """A ``pre_spawn_hook`` that refuses a spawn when a day or month budget is spent."""
    base = service_url if service_url.endswith("/") else service_url + "/"
    if not api_token:
        raise ValueError("refuse_over_budget: api_token is empty (the service's own token)")

    async def pre_spawn_hook(spawner: Any) -> None:
        user = spawner.user.name
        language = spawn_language(spawner)
        words = messages_for(language)
        groups = [g.name for g in getattr(spawner.user, "groups", ()) or ()]
        url = f"{base}api/users/{quote(user, safe='')}/allowance"
        # the profile chosen on the spawn page: an allowance needs its rate
        profile = (getattr(spawner, "user_options", None) or {}).get("profile")
        query = [("group", g) for g in groups]
        if isinstance(profile, str) and profile:
            query.append(("profile", profile))
        if query:
            url += "?" + urlencode(query)
        request = HTTPRequest(
            url,
            # the service writes its reason in the user's language
            headers={
                "Authorization": f"token {api_token}",
                "Accept-Language": language.replace("_", "-"),  # a language tag: zh-CN
            },
            request_timeout=timeout_s,
            connect_timeout=timeout_s,
        )
        problem: str | None = None
        allowance: dict[str, Any] = {}
        try:
            response = await asyncio.wait_for(
                AsyncHTTPClient().fetch(request, raise_error=False), timeout_s
            )
            if response.code == 200:
                allowance = json.loads(response.body)
                if not isinstance(allowance, dict) or not isinstance(
                    allowance.get("allowed"), bool
                ):
                    allowance = {}
                    problem = "the budget service's answer is not an allowance"
            elif response.code == 599:
                problem = f"the budget service cannot be reached ({response.error})"
            else:
                problem = f"the budget service answered {response.code}"
        except TimeoutError:
            problem = f"the budget service did not answer within {timeout_s:g} s"
        except Exception as e:  # reset, refused, a timeout of tornado's, a body not JSON
            problem = f"the budget service cannot be reached ({e.__class__.__name__}: {e})"
        if problem is not None:
            if fail_open:
                log.warning("gpucost: %s; %s may start unchecked (fail_open)", problem, user)
                return
            log.error("gpucost: %s; refusing %s's spawn (fail closed)", problem, user)
            raise SpawnRefused(words.gettext(UNAVAILABLE), 503)
        if not allowance["allowed"]:
            reason = str(allowance.get("reason") or words.gettext(SPENT))
            log.info("gpucost: refusing %s's spawn: %s", user, reason)
            raise SpawnRefused(reason)

    return pre_spawn_hook
