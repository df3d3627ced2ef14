"""What the pages and the spawn hook are told of a user's allowances: what is left, for
how long at a profile's rate, and whether the profile may start.

Reads the hub ledger through the service (the usage up to now), never the Hub.
"""

from __future__ import annotations

from datetime import datetime

from ...core.i18n import Messages
from ...core.money import rate as money_rate
from ..allowance.book import standing_json
from ..allowance.words import left_at_rate
from ..model import HubConfigError, Rate, ServerInfo
from ..service import HubService


def profile_rate(service: HubService, user: str, profile: str | None, now: datetime) -> Rate | None:
    """The rate a new server of ``profile`` would be billed at (``None``: it cannot be
    priced)."""
    options: dict[str, object] = {} if profile is None else {"profile": profile}
    try:
        return service.rate_for(ServerInfo(user, "", now, False, profile, options))
    except HubConfigError:
        return None


def allowances(
    service: HubService,
    user: str,
    profile: str | None,
    now: datetime,
    messages: Messages | None = None,
    symbol: str = "$",
    groups: tuple[str, ...] | None = None,
) -> tuple[str | None, list[dict[str, object]]]:
    """(why ``profile`` may not start on ``user``'s allowances or ``None``, each allowance's
    figures and what is left of it at the profile's rate, in ``messages``' language)."""
    book = service.allowances
    if not book.enabled:
        return None, []
    if groups is not None:
        service.learn_groups(user, groups)  # as the Hub named them for this request
    standings = book.of_user(user, service.groups_of, service.ledger, now)
    rate = profile_rate(service, user, profile, now)
    found = book.for_profile(standings, rate, None, messages, symbol)
    refusal = next((p.refusal for p in found if p.refusal is not None), None)
    out = []
    for p in found:
        item = standing_json(p.standing)
        item["seconds_left"] = None if p.seconds == float("inf") else round(p.seconds)
        item["text"] = left_at_rate(p.standing, p.per_hour, messages, symbol)
        out.append(item)
    return refusal, out


def profile_lines(
    service: HubService,
    user: str,
    profiles: list[str],
    now: datetime,
    messages: Messages,
    symbol: str = "$",
) -> list[dict[str, float | str | None]]:
    """Beside each profile on the spawn page: its price and what is left of the user's
    allowances at its rate (the one that runs out first), ``"$0.53/h — 6 h 20 min left
    this week"``."""
    book = service.allowances
    standings = book.of_user(user, service.groups_of, service.ledger, now) if book.enabled else []
    out = []
    for slug in profiles:
        rate = profile_rate(service, user, slug, now)
        price = (
            None
            if rate is None
            else money_rate(rate.usd_per_hour, symbol, messages.gettext("{price}/h"))
        )
        found = book.for_profile(standings, rate, None, messages, symbol)
        first = min(found, key=lambda p: p.seconds, default=None)
        left = (
            None
            if first is None
            else left_at_rate(first.standing, first.per_hour, messages, symbol)
        )
        refusal = next((p.refusal for p in found if p.refusal is not None), None)
        out.append(
            {
                "profile": slug,
                "usd_per_hour": None if rate is None else float(rate.usd_per_hour),
                "price": price,
                "left": left,
                "allowed": refusal is None,
                "reason": refusal,
                "line": " — ".join(t for t in (price, left) if t),
            }
        )
    return out
