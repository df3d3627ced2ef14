"""Requests for more allowance in the hub ledger (``hub_allowance_requests``): who asked for
how much of which allowance and why, and who approved or declined it, when.

A decision is one ``UPDATE ... WHERE id = ? AND state = 'open'``: of two owners deciding
at once (two service threads, or two services on one database), exactly one changes the
row; the other is told it was decided already. Nothing is granted twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .schema import from_us, requests_table, to_us

_q = requests_table.c

OPEN, APPROVED, DECLINED = "open", "approved", "declined"


@dataclass(frozen=True)
class AllowanceRequest:
    id: int
    user: str
    #: "user" or "group:<name>"
    source: str
    unit: str
    amount_micro: int
    reason: str
    asked: datetime
    state: str
    decided_by: str | None = None
    decided: datetime | None = None
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "user": self.user,
            "source": self.source,
            "unit": self.unit,
            "amount": self.amount_micro / 10**6,
            "reason": self.reason,
            "asked": self.asked.isoformat(),
            "state": self.state,
            "decided_by": self.decided_by,
            "decided": None if self.decided is None else self.decided.isoformat(),
            "note": self.note,
        }


def _row(r: sa.RowMapping) -> AllowanceRequest:
    return AllowanceRequest(
        int(r["id"]),
        str(r["user_name"]),
        str(r["source"]),
        str(r["unit"]),
        int(r["amount_micro"]),
        str(r["reason"]),
        from_us(int(r["asked_us"])),
        str(r["state"]),
        r["decided_by"],
        None if r["decided_us"] is None else from_us(int(r["decided_us"])),
        r["note"],
    )


class RequestStore:
    """The ``hub_allowance_requests`` rows of one hub ledger (its engine)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(
        self, user: str, source: str, unit: str, amount_micro: int, reason: str, now: datetime
    ) -> AllowanceRequest:
        values = {
            "user_name": user,
            "source": source,
            "unit": unit,
            "amount_micro": amount_micro,
            "reason": reason,
            "asked_us": to_us(now),
            "state": OPEN,
        }
        with self.engine.begin() as conn:
            key = conn.execute(requests_table.insert().values(values)).inserted_primary_key
        assert key is not None
        return AllowanceRequest(int(key[0]), user, source, unit, amount_micro, reason, now, OPEN)

    def get(self, request_id: int) -> AllowanceRequest | None:
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(requests_table).where(_q.id == request_id)).mappings()
            row = found.first()
        return None if row is None else _row(row)

    def of_users(self, users: Iterable[str] | None, since: datetime) -> list[AllowanceRequest]:
        """The requests of ``users`` (``None``: everyone's) asked since ``since``, or still
        open, oldest first."""
        query = (
            sa.select(requests_table)
            .where(sa.or_(_q.asked_us >= to_us(since), _q.state == OPEN))
            .order_by(_q.id)
        )
        if users is not None:
            query = query.where(_q.user_name.in_(sorted(set(users))))
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(query).mappings()]

    def open_for(self, sources: Iterable[str]) -> list[AllowanceRequest]:
        """Every open request on one of ``sources`` ("user" is each user's own)."""
        wanted = sorted(set(sources))
        if not wanted:
            return []
        query = (
            sa.select(requests_table).where(_q.state == OPEN, _q.source.in_(wanted)).order_by(_q.id)
        )
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(query).mappings()]

    def decide(
        self, request_id: int, approve: bool, who: str, note: str, now: datetime
    ) -> AllowanceRequest | None:
        """Approve or decline an open request: the request as decided, or ``None`` when it
        was not open any more (decided meanwhile: nothing changes)."""
        change = (
            requests_table.update()
            .where(_q.id == request_id, _q.state == OPEN)
            .values(
                state=APPROVED if approve else DECLINED,
                decided_by=who,
                decided_us=to_us(now),
                note=note,
            )
        )
        with self.engine.begin() as conn:
            if conn.execute(change).rowcount != 1:
                return None
        return self.get(request_id)

    def granted(self, users: Iterable[str], source: str, since: datetime, until: datetime) -> int:
        """Micro-units approved on ``source`` for ``users`` with the decision in
        [``since``, ``until``)."""
        names = sorted(set(users))
        if not names:
            return 0
        query = sa.select(sa.func.coalesce(sa.func.sum(_q.amount_micro), 0)).where(
            _q.user_name.in_(names),
            _q.source == source,
            _q.state == APPROVED,
            _q.decided_us >= to_us(since),
            _q.decided_us < to_us(until),
        )
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)
