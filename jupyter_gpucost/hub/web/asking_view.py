"""Asking for more allowance through the service's API, and deciding: the rules of
:mod:`..allowance.asking` over the user's allowances now and the ledger's requests.

Every decision, and every request, is a row of the hub ledger (:mod:`..ledger.requests`)
with who and when; an approval counts at once (the next poll and the next spawn read it).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from ...core.i18n import Messages
from ...core.refusal import Refusal
from ..alerting import HubAlerts
from ..allowance.asking import (
    APPROVE_SCOPE,
    check_ask,
    keep_hours,
    may_decide,
    reason_text,
)
from ..allowance.usage import AllowanceStanding
from ..allowance.words import amount as amount_text
from ..ledger.requests import AllowanceRequest, RequestStore
from ..service import HubService
from .hubapi import Identity
from .views import _cell as cell

#: how far back a user's own requests are listed (and counted per week)
LISTED_DAYS = 31


def body(authorization: str, raw: bytes | None) -> dict[str, object]:
    """A POST's JSON object, taken only with a Hub token in ``Authorization``: a browser's
    cookie alone is refused, so no other site can ask or decide on a user's behalf."""
    if not authorization.startswith(("token ", "Bearer ")):
        raise Refusal("Send a Hub token in Authorization to ask or decide.", 403)
    try:
        doc = json.loads(raw or b"{}")
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise Refusal("The body must be a JSON object.", 400)
    return doc


def ask(
    service: HubService,
    store: RequestStore,
    who: Identity,
    body: dict[str, Any],
    now: datetime,
    per_week: int,
    messages: Messages,
    alerts: HubAlerts | None = None,
) -> AllowanceRequest:
    """Keep ``who``'s request for more, or raise :class:`Refusal` saying why; the
    group's owners and the admins are alerted (``c.GpuCostHub.notify``)."""
    book = service.allowances
    standings = book.of_user(who.name, service.groups_of, service.ledger, now)
    mine = store.of_users([who.name], now - timedelta(days=LISTED_DAYS))
    amount = body.get("amount")
    if "keep_hours" in body:  # "keep running N hours": N hours of the running servers
        amount = keep_amount(service, who.name, body, standings, messages)
    allowance, micro, reason = check_ask(
        standings,
        body.get("source"),
        amount,
        body.get("reason"),
        [(r.state, r.asked) for r in mine],
        now,
        book.tz,
        per_week,
        messages,
    )
    made = store.add(who.name, allowance.source, allowance.unit, micro, reason, now)
    if alerts is not None:
        text = amount_text(micro, allowance.unit, None, alerts.symbol)
        alerts.allowance_requested(who.name, made.source, made.id, text, reason, now)
    return made


def keep_amount(
    service: HubService,
    user: str,
    body: dict[str, Any],
    standings: Sequence[AllowanceStanding],
    messages: Messages,
) -> str:
    """What ``user``'s running servers use of the allowance in ``body["source"]`` in
    ``body["keep_hours"]`` hours, at their rates now (an approval grants it: the countdown
    moves that many hours later, as any grant moves it)."""
    _ = messages.gettext  # by this name, the catalog's tool finds the sentences
    hours = keep_hours(body.get("keep_hours"), messages)
    found = next((s for s in standings if s.source == body.get("source")), None)
    rate_of = service.allowances.policy.rate_of
    per_hour = sum(
        (
            rate_of(found.unit, row.rate)
            for row in service.rows.values()
            if found is not None and row.user == user and row.stopped is None
        ),
        Decimal(0),
    )
    if found is not None and per_hour <= 0:
        raise Refusal(_("No running server of yours uses this allowance."), 409)
    return f"{(per_hour * hours).quantize(Decimal('0.000001')):f}"


def decide(
    store: RequestStore,
    who: Identity,
    admin: bool,
    request_id: int,
    body: dict[str, Any],
    now: datetime,
    messages: Messages,
) -> AllowanceRequest:
    """Approve or decline a request, or raise :class:`Refusal` saying why."""
    _ = messages.gettext  # by this name, the catalog's tool finds the sentences
    approve = body.get("approve")
    if not isinstance(approve, bool):
        raise Refusal(_("Say approve: true or false."))
    note = body.get("note", "")
    note = "" if note in ("", None) else reason_text(note, messages)
    found = store.get(request_id)
    if found is None:
        raise Refusal(_("There is no such request."), 404)
    may_decide(who.name, admin, who.scopes, found.user, found.source, messages)
    decided = store.decide(request_id, approve, who.name, note, now)
    if decided is None:
        again = store.get(request_id)
        by = again.decided_by if again is not None else None
        raise Refusal(_("This request was already decided by {who}.").format(who=by or "?"), 409)
    return decided


def listing(
    store: RequestStore, who: Identity, admin: bool, groups: set[str], now: datetime
) -> dict[str, list[dict[str, object]]]:
    """``who``'s own requests, and the open ones they may decide."""
    mine = store.of_users([who.name], now - timedelta(days=LISTED_DAYS))
    owned = {
        f"group:{s.partition('!group=')[2]}"
        for s in who.scopes
        if s.startswith(f"{APPROVE_SCOPE}!group=")
    }
    sources = {f"group:{g}" for g in groups} | {"user"} if admin else owned
    return {
        "mine": [r.to_json() for r in reversed(mine)],
        "to_decide": [r.to_json() for r in store.open_for(sources) if r.user != who.name],
    }


#: the requests CSV's columns (``GET api/admin/allowance-requests.csv``)
CSV_COLUMNS = (
    "id",
    "user",
    "source",
    "unit",
    "amount",
    "reason",
    "asked",
    "state",
    "decided_by",
    "decided",
    "note",
)


def requests_csv(store: RequestStore, since: datetime) -> str:
    """Every request asked since ``since`` (or still open), with its decision: who asked
    for what and why, who decided, when."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for r in store.of_users(None, since):
        row = r.to_json()
        writer.writerow([cell("" if row[c] is None else str(row[c])) for c in CSV_COLUMNS])
    return out.getvalue()


def form_body(fields: dict[str, str]) -> dict[str, object]:
    """The user page's forms as the API's body: ``approve`` is the button pressed
    (``approve`` or ``decline``); anything else is refused by the rules, with a sentence."""
    keys = ("source", "amount", "keep_hours", "reason")
    doc: dict[str, Any] = {k: fields[k] for k in keys if k in fields}
    if "approve" in fields:
        doc["approve"] = {"approve": True, "decline": False}.get(fields["approve"])
    return doc


def page(
    service: HubService,
    store: RequestStore,
    who: Identity,
    admin: bool,
    now: datetime,
    messages: Messages,
    symbol: str,
) -> dict[str, object]:
    """The user page's "ask for more": the allowances one may ask more of, the user's
    latest request and its state, and the open requests ``who`` may decide, each amount
    in words."""
    groups = {g for gs in service.groups_of.values() for g in gs}
    found = listing(store, who, admin, groups, now)
    standings = service.allowances.of_user(who.name, service.groups_of, service.ledger, now)

    def worded(r: dict[str, Any]) -> dict[str, object]:
        micro = round(float(r["amount"]) * 10**6)
        return {**r, "amount_text": amount_text(micro, str(r["unit"]), messages, symbol)}

    return {
        "sources": [(s.source, s.unit) for s in standings],
        "latest": worded(found["mine"][0]) if found["mine"] else None,
        "to_decide": [worded(r) for r in found["to_decide"]],
    }
