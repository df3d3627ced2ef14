"""The spawn page's profiles, each with its price and what is left of the user's allowances
at its rate, in ``jupyterhub_config.py``::

    from jupyter_gpucost.hub.spawn_form import priced_options_form

    c.Spawner.options_form = priced_options_form(
        service_url="http://127.0.0.1:10101/services/gpucost/",
        api_token=GPUCOST_SERVICE_TOKEN,
        profiles=[("t4", "T4"), ("a100", "2 × A100 80 GB")],
    )
    c.Spawner.options_from_form = "simple"  # user_options["profile"] = the slug

The Hub renders the form on its spawn page (its own template, ``spawner_options_form``)
with one choice per profile: ``T4 — $0.53/h — 6 h 20 min left this week``. With
KubeSpawner, :func:`priced_profile_list` puts the same line in each profile's description::

    c.KubeSpawner.profile_list = priced_profile_list(PROFILES, service_url=..., api_token=...)

The lines come from the service (``GET api/users/{name}/profiles``, the service's own
token), within ``timeout_s``, in the language of the browser that opened the spawn page (its
``Accept-Language``, which the Hub hands the form through ``spawner.handler``); when it
cannot answer, the page shows the profiles without
them (the spawn hook still decides whether a spawn may start).

Runs inside the Hub process: the standard library and tornado only.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from .spawn_hook import spawn_language

log = logging.getLogger("jupyter_gpucost.hub")

OptionsForm = Callable[[Any], Awaitable[str]]


async def profile_lines(
    spawner: Any, base: str, api_token: str, slugs: Sequence[str], timeout_s: float
) -> dict[str, str]:
    """slug → ``$0.53/h — 6 h 20 min left this week`` from the service (empty when it
    cannot answer)."""
    user = spawner.user.name
    groups = [g.name for g in getattr(spawner.user, "groups", ()) or ()]
    query = [("profile", s) for s in slugs] + [("group", g) for g in groups]
    url = f"{base}api/users/{quote(user, safe='')}/profiles?{urlencode(query)}"
    request = HTTPRequest(
        url,
        headers={
            "Authorization": f"token {api_token}",
            # the lines in the language of the browser that opened the spawn page
            "Accept-Language": spawn_language(spawner).replace("_", "-"),
        },
        request_timeout=timeout_s,
        connect_timeout=timeout_s,
    )
    try:
        response = await asyncio.wait_for(
            AsyncHTTPClient().fetch(request, raise_error=False), timeout_s
        )
        if response.code != 200:
            raise ValueError(f"the service answered {response.code}")
        found = json.loads(response.body)["profiles"]
        return {str(p["profile"]): str(p["line"]) for p in found if p.get("line")}
    except Exception as e:  # down, slow, an answer that is not the lines
        log.warning("gpucost: no prices for %s's spawn page (%s)", user, e)
        return {}


def _base(service_url: str, api_token: str) -> str:
    if not api_token:
        raise ValueError("api_token is empty (the service's own token)")
    return service_url if service_url.endswith("/") else service_url + "/"


def priced_options_form(
    service_url: str,
    api_token: str,
    profiles: Sequence[tuple[str, str]],
    *,
    timeout_s: float = 3.0,
) -> OptionsForm:
    """A ``Spawner.options_form``: a choice of ``profiles`` (slug, display name), each
    with its price and what is left of the user's allowances at its rate."""
    base = _base(service_url, api_token)
    slugs = [slug for slug, _ in profiles]

    async def options_form(spawner: Any) -> str:
        lines = await profile_lines(spawner, base, api_token, slugs, timeout_s)
        choices = []
        for number, (slug, name) in enumerate(profiles):
            line = lines.get(slug)
            text = escape(name) + ("" if not line else " — " + escape(line))
            choices.append(
                '<div class="radio"><label>'
                f'<input type="radio" name="profile" value="{escape(slug)}"'
                f"{' checked' if number == 0 else ''}> "
                f'<span class="gpucost-profile" data-profile="{escape(slug)}">{text}</span>'
                "</label></div>"
            )
        return '<div class="form-group" id="gpucost-profiles">' + "".join(choices) + "</div>"

    return options_form


def priced_profile_list(
    profile_list: Sequence[Mapping[str, Any]],
    service_url: str,
    api_token: str,
    *,
    timeout_s: float = 3.0,
) -> Callable[[Any], Awaitable[list[dict[str, Any]]]]:
    """A KubeSpawner ``profile_list`` callable: ``profile_list`` with each profile's
    price and what is left put before its description (profiles need a ``slug``)."""
    base = _base(service_url, api_token)
    slugs = [str(p.get("slug", "")) for p in profile_list]

    async def annotated(spawner: Any) -> list[dict[str, object]]:
        lines = await profile_lines(spawner, base, api_token, [s for s in slugs if s], timeout_s)
        out = []
        for profile, slug in zip(profile_list, slugs, strict=True):
            copy = dict(profile)
            line = lines.get(slug)
            if line:
                description = str(copy.get("description") or "")
                copy["description"] = f"{line}. {description}" if description else line
            out.append(copy)
        return out

    return annotated
