"""Asking for more allowance, and deciding: the rules, each refusal a sentence.

* A user asks for more of one of their own allowances (``"user"`` or ``"group:<name>"``),
  an amount in its unit (more than 0, at most :data:`MAX_FACTOR` times the allowance, six
  decimals at most) with a reason (1 to 500 characters, no control characters); one open
  request at a time, and at most ``per_week`` asked in an ISO week.
* A request on a group's allowance is decided by an owner of that group (a Hub role with
  the scope ``custom:gpucost:approve!group=<name>``) or an admin of the service; a
  request on a user's own allowance by an admin. Nobody decides their own request, and a
  decided request is never decided again (:meth:`~..ledger.requests.RequestStore.decide`).

Pure: no I/O, no tornado.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, tzinfo

from ...core.i18n import Messages, messages_for
from ...core.refusal import Refusal
from ..accounting import day_of, midnight
from ..model import HubConfigError
from .config import to_micro
from .usage import AllowanceStanding

#: a request asks for at most this many times the allowance's amount
MAX_FACTOR = 10
MAX_REASON = 500
#: "keep running N hours" asks for 1 to this many hours
MAX_KEEP_H = 24
APPROVE_SCOPE = "custom:gpucost:approve"


def _tr(messages: Messages | None) -> Messages:
    return messages if messages is not None else messages_for("en")


def reason_text(raw: object, messages: Messages | None = None) -> str:
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    text = raw.strip() if isinstance(raw, str) else ""
    if not text or len(text) > MAX_REASON:
        raise Refusal(_("Give a reason of 1 to 500 characters."))
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in text):
        raise Refusal(_("The reason may not hold control characters."))
    return text


def keep_hours(raw: object, messages: Messages | None = None) -> int:
    """The whole hours of a "keep running N hours" request, 1 to :data:`MAX_KEEP_H`."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    text = raw.strip() if isinstance(raw, str) else raw
    if isinstance(text, bool) or not isinstance(text, int | str):
        text = ""
    digits = str(text)
    whole = digits.isascii() and digits.isdecimal() and len(digits.lstrip("0")) <= 3
    hours = int(digits) if whole else 0
    if not 1 <= hours <= MAX_KEEP_H:
        raise Refusal(_("Ask to keep running for 1 to {most} whole hours.").format(most=MAX_KEEP_H))
    return hours


def check_ask(
    standings: Sequence[AllowanceStanding],
    source: object,
    amount: object,
    reason: object,
    asked: Iterable[tuple[str, datetime]],
    now: datetime,
    tz: tzinfo,
    per_week: int,
    messages: Messages | None = None,
) -> tuple[AllowanceStanding, int, str]:
    """(the allowance, the amount in its micro-units, the reason) of a request the rules
    allow; ``asked``: the user's requests as (state, when asked)."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    found = next((s for s in standings if s.source == source), None)
    if found is None:
        raise Refusal(_("You have no such allowance to ask more of."), 404)
    try:
        micro = to_micro(amount, found.unit, setting="amount")
    except HubConfigError:
        micro = -1
    most = MAX_FACTOR * max(found.amount_micro, 10**6)
    if not 0 < micro <= most:
        raise Refusal(
            _("Ask for more than 0 and at most {most} (ten times the allowance).").format(
                most=f"{most / 10**6:g}"
            )
        )
    text = reason_text(reason, messages)
    asked = list(asked)
    if any(state == "open" for state, _when in asked):
        raise Refusal(_("You already have an open request; wait for its decision."), 409)
    week = midnight(day_of(now, tz) - timedelta(days=day_of(now, tz).weekday()), tz)
    if sum(1 for _state, when in asked if when >= week) >= per_week:
        raise Refusal(
            _("You have asked {count} times this week, the most the hub allows.").format(
                count=per_week
            ),
            429,
        )
    return found, micro, text


def may_decide(
    who: str,
    admin: bool,
    scopes: Iterable[str],
    requester: str,
    source: str,
    messages: Messages | None = None,
) -> None:
    """Raise :class:`Refusal` unless ``who`` may decide ``requester``'s request on
    ``source``."""
    _ = _tr(messages).gettext  # by this name, the catalog's tool finds the sentences
    if who == requester:
        raise Refusal(_("Nobody may decide their own request."), 403)
    if admin:
        return
    group = source.partition(":")[2]
    if source.startswith("group:") and f"{APPROVE_SCOPE}!group={group}" in set(scopes):
        return
    if source.startswith("group:"):
        raise Refusal(
            _("Only an owner of group {group} or an admin may decide this request.").format(
                group=group
            ),
            403,
        )
    raise Refusal(_("Only an admin may decide a request on a user's own allowance."), 403)
