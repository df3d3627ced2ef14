"""The ledger's side of a bill: the machine each session ran on, what the ledger estimated
per machine and day, and the reconciliation kept beside it (``reconciled``), a later read
of the same bill replacing its rows so that nothing is counted twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...core.focus import BilledMachine
from ...core.i18n import _
from ...core.machine import Machine
from ...core.money import json_amount, status_bar, to_units
from .opening import LedgerUnavailable
from .schema import (
    cells_table,
    machines_table,
    quarters_table,
    reconciled_table,
    sessions_table,
    spend_table,
)


@dataclass
class LedgerMachine:
    """A machine the ledger knows: its sessions' open spans and its estimate per day."""

    machine: BilledMachine
    currency: str
    #: (start, end) in unix seconds of every session on it
    spans: list[tuple[float, float]] = field(default_factory=list)
    #: UTC day -> what the ledger estimated that day (micro-units)
    estimated: dict[date, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReconciledDay:
    """One machine's day as a bill says it, beside the estimate (micro-units)."""

    resource_id: str
    day: date
    provider: str
    instance_type: str
    currency: str
    estimated: int
    billed: int
    effective: int
    list: int
    no_session: int
    settled: bool
    bill_to: datetime


def record_machine(conn: Connection, session_id: str, machine: Machine, currency: str) -> None:
    """Keep the machine a session runs on (once; a restart of the same session keeps it)."""
    c = machines_table.c
    if conn.execute(sa.select(c.session_id).where(c.session_id == session_id)).first():
        return
    conn.execute(
        machines_table.insert().values(
            session_id=session_id,
            provider=machine.provider,
            instance_id=machine.instance_id,
            instance_type=machine.instance_type,
            region=machine.region,
            name=machine.name,
            project=machine.project,
            resource_group=machine.resource_group,
            subscription_id=machine.subscription_id,
            currency=currency,
        )
    )


def _billed(row: object) -> BilledMachine:
    """A ``machines`` row as its bill names it."""
    values = {name: str(getattr(row, name)) for name in _MACHINE_FIELDS}
    return BilledMachine(
        provider=values["provider"],
        instance_id=values["instance_id"],
        instance_type=values["instance_type"],
        region=values["region"],
        name=values["name"],
        project=values["project"],
        resource_group=values["resource_group"],
        subscription_id=values["subscription_id"],
    )


#: the ``machines`` columns a bill is matched by
_MACHINE_FIELDS = (
    "provider",
    "instance_id",
    "instance_type",
    "region",
    "name",
    "project",
    "resource_group",
    "subscription_id",
)


def ledger_machines(conn: Connection) -> list[LedgerMachine]:
    """Every machine the ledger recorded a session on, with its spans and daily estimate."""
    m, s = machines_table.c, sessions_table.c
    rows = conn.execute(
        sa.select(
            m.session_id,
            *(m[name] for name in _MACHINE_FIELDS),
            m.currency,
            s.started_unix_s,
            s.last_unix_s,
            s.ended_unix_s,
        ).join(sessions_table, s.id == m.session_id)
    ).all()
    found: dict[tuple[BilledMachine, str], LedgerMachine] = {}
    by_session: dict[str, LedgerMachine] = {}
    for row in rows:
        machine = _billed(row)
        entry = found.setdefault(
            (machine, row.currency), LedgerMachine(machine, currency=row.currency)
        )
        end = row.ended_unix_s if row.ended_unix_s is not None else row.last_unix_s
        entry.spans.append((float(row.started_unix_s), float(end)))
        by_session[row.session_id] = entry
    if by_session:
        q = quarters_table.c
        daily: dict[int, dict[date, int]] = defaultdict(lambda: defaultdict(int))
        quarters = conn.execute(
            sa.select(q.session_id, q.quarter_unix_s, q.cost_micro_usd).where(
                q.session_id.in_(list(by_session))
            )
        )
        for session_id, quarter, cost in quarters:
            entry = by_session[session_id]
            day = datetime.fromtimestamp(quarter, UTC).date()
            daily[id(entry)][day] += int(cost)
        for entry in found.values():
            entry.estimated = dict(daily.get(id(entry), {}))
    return list(found.values())


def replace_reconciled(
    conn: Connection, source: str, days: list[ReconciledDay], at: datetime
) -> None:
    """Keep a bill's days, replacing what the same bill said before for those days."""
    r = reconciled_table.c
    for d in days:
        conn.execute(
            reconciled_table.delete().where(
                sa.and_(
                    r.resource_id == d.resource_id, r.day == d.day.isoformat(), r.source == source
                )
            )
        )
        conn.execute(
            reconciled_table.insert().values(
                resource_id=d.resource_id,
                day=d.day.isoformat(),
                source=source,
                provider=d.provider,
                instance_type=d.instance_type,
                currency=d.currency,
                estimated_micro=d.estimated,
                billed_micro=d.billed,
                effective_micro=d.effective,
                list_micro=d.list,
                no_session_micro=d.no_session,
                settled=d.settled,
                bill_to=d.bill_to.isoformat(),
                reconciled_at=at.isoformat(),
            )
        )


def reconciled_days(conn: Connection) -> list[ReconciledDay]:
    """Every day kept, the newest read of each machine's day when several bills said it."""
    r = reconciled_table.c
    rows = conn.execute(sa.select(reconciled_table).order_by(r.reconciled_at)).all()
    newest: dict[tuple[str, str], ReconciledDay] = {}
    for row in rows:
        newest[(row.resource_id, row.day)] = ReconciledDay(
            resource_id=row.resource_id,
            day=date.fromisoformat(row.day),
            provider=row.provider,
            instance_type=row.instance_type,
            currency=row.currency,
            estimated=int(row.estimated_micro),
            billed=int(row.billed_micro),
            effective=int(row.effective_micro),
            list=int(row.list_micro),
            no_session=int(row.no_session_micro),
            settled=bool(row.settled),
            bill_to=datetime.fromisoformat(row.bill_to),
        )
    return sorted(newest.values(), key=lambda d: (d.resource_id, d.day))


@dataclass(frozen=True)
class BillFigure:
    """This machine's reconciled days, summed: the status's ``bill`` object."""

    estimated: int
    billed: int
    #: the last day the bill covers
    to: date
    currency: str


def bill_figure(days: list[ReconciledDay], resource_id: str) -> BillFigure | None:
    """The sums of a machine's reconciled days (``None``: none were)."""
    mine = [d for d in days if d.resource_id == resource_id]
    if not mine:
        return None
    newest = max(d.bill_to for d in mine)
    return BillFigure(
        estimated=sum(d.estimated for d in mine),
        billed=sum(d.billed for d in mine),
        to=(newest - timedelta(microseconds=1)).date(),
        currency=mine[0].currency,
    )


def bill_json(figure: BillFigure | None, symbol: str) -> dict[str, object] | None:
    """The status's ``bill`` object: the estimate beside the bill, and its sentence."""
    if figure is None:
        return None
    return {
        "estimated": json_amount(figure.estimated),
        "billed": json_amount(figure.billed),
        # deprecated twins (docs/api.md, "Money keys")
        "estimated_usd": json_amount(figure.estimated),
        "billed_usd": json_amount(figure.billed),
        "to": figure.to.isoformat(),
        "text": _("estimated {estimated} · billed {billed} (your bill to {to})").format(
            estimated=status_bar(to_units(figure.estimated), symbol),
            billed=status_bar(to_units(figure.billed), symbol),
            to=figure.to.isoformat(),
        ),
    }


#: how often the status reads the reconciled bill from the ledger, in seconds
BILL_READ_EVERY_S = 60.0


class BillCache:
    """The status's bill figure. The ledger is read in a thread of its own, at most every
    :data:`BILL_READ_EVERY_S` and one read at a time, never on the caller's thread (the
    status is built on the server's event loop, and a remote ledger may take seconds to
    answer); until a read ends the figure read before is given (at first: none), and a
    ledger that cannot be read keeps it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._reading = False
        self._days: list[ReconciledDay] = []

    def figure(
        self, read: Callable[[], list[ReconciledDay]], resource_id: str
    ) -> BillFigure | None:
        now = time.monotonic()
        with self._lock:
            due = not self._reading and (
                self._read_at is None or now - self._read_at >= BILL_READ_EVERY_S
            )
            if due:
                self._reading = True
                self._read_at = now
            days = self._days
        if due:
            threading.Thread(
                target=self._refresh, args=(read,), name="gpucost-bill", daemon=True
            ).start()
        return bill_figure(days, resource_id)

    def _refresh(self, read: Callable[[], list[ReconciledDay]]) -> None:
        days: list[ReconciledDay] | None = None
        with contextlib.suppress(LedgerUnavailable, sa.exc.SQLAlchemyError):
            days = read()
        with self._lock:
            if days is not None:
                self._days = days
            self._reading = False


def billed_rate(
    days: list[ReconciledDay], provider: str, instance_type: str
) -> tuple[Fraction, date] | None:
    """What machines of this provider and type were billed ÷ their list cost, over their
    reconciled days (a day a commitment paid up front covered, billed 0, at its effective
    cost), and the last day of the newest bill (``None``: no such day with a list cost)."""
    mine = [
        d
        for d in days
        if d.provider == provider and d.instance_type == instance_type and d.list > 0
    ]
    if not mine or not instance_type:
        return None
    paid = sum(d.billed or d.effective for d in mine)
    listed = sum(d.list for d in mine)
    newest = max(d.bill_to for d in mine)
    return Fraction(paid, listed), (newest - timedelta(microseconds=1)).date()


@dataclass(frozen=True)
class SessionHour:
    """What a session cost in one hour (micro-units), with its user and machine."""

    session_id: str
    hour_unix_s: int
    cost: int
    minutes: int
    user: str | None
    currency: str
    machine: BilledMachine | None
    #: what the cells that ended in the hour cost, per (notebook, kernel id); ``""`` where
    #: the kernel did not say
    cells: tuple[tuple[str, str, int], ...] = ()


def _cell_costs(
    conn: Connection, since_unix_s: int | None
) -> dict[tuple[str, int], dict[tuple[str, str], int]]:
    """Per (session, hour): what its cells cost per (notebook, kernel), by when they ended."""
    c = cells_table.c
    out: dict[tuple[str, int], dict[tuple[str, str], int]] = defaultdict(dict)
    rows = conn.execute(sa.select(c.session_id, c.notebook_path, c.kernel_id, c.ended, c.record))
    for row in rows:
        try:
            ended = datetime.fromisoformat(row.ended).timestamp()
            cost = round(float(row.record.get("cost_usd", 0)) * 1_000_000)
        except (ValueError, TypeError, AttributeError):
            continue  # a record that does not say when it ended or what it cost
        if cost <= 0 or (since_unix_s is not None and ended < since_unix_s):
            continue
        hour = int(ended // 3600) * 3600
        key = (str(row.notebook_path or ""), str(row.kernel_id or ""))
        spent = out[(row.session_id, hour)]
        spent[key] = spent.get(key, 0) + cost
    return out


def session_hours(conn: Connection, since_unix_s: int | None = None) -> list[SessionHour]:
    """Every session's cost per hour (``spend`` folded by hour), oldest first."""
    s, sp = sessions_table.c, spend_table.c
    hour = (sp.minute_unix_s // 3600) * 3600
    query = (
        sa.select(
            sp.session_id,
            hour.label("hour"),
            sa.func.sum(sp.cost_micro_usd).label("cost"),
            sa.func.count().label("minutes"),
        )
        .group_by(sp.session_id, hour)
        .order_by(hour, sp.session_id)
    )
    if since_unix_s is not None:
        query = query.where(sp.minute_unix_s >= since_unix_s)
    users = dict(conn.execute(sa.select(s.id, s.user)).all())
    machines = {row.session_id: row for row in conn.execute(sa.select(machines_table)).all()}
    cells = _cell_costs(conn, since_unix_s)
    out = []
    for row in conn.execute(query):
        known = machines.get(row.session_id)
        out.append(
            SessionHour(
                session_id=row.session_id,
                hour_unix_s=int(row.hour),
                cost=int(row.cost),
                minutes=int(row.minutes),
                user=users.get(row.session_id),
                currency=known.currency if known is not None else "",
                machine=None if known is None else _billed(known),
                cells=tuple(
                    (notebook, kernel, cost)
                    for (notebook, kernel), cost in sorted(
                        cells.get((row.session_id, int(row.hour)), {}).items()
                    )
                ),
            )
        )
    return out
