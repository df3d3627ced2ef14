"""Matching a bill's rows to the machines the ledger recorded, per machine and UTC day:
estimated (the ledger), billed, effective and list cost (the bill), the cost of the hours
billed while no session was open, whether the day is settled; and the machine's effective
rate: what it was billed ÷ its list cost (an hour a commitment paid up front covers, billed
0, counts at its amortized ``EffectiveCost``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction

from ..core.focus import day_of, settled, uncovered_s
from ..core.i18n import _
from ..core.money import round_micro
from ..server.ledger import LedgerMachine, ReconciledDay
from .read import Bill, BillError


@dataclass
class MachineResult:
    """One machine's days, and its rate over them."""

    machine: LedgerMachine
    days: list[ReconciledDay] = field(default_factory=list)
    #: effective ÷ list over its rows (``None``: no list cost)
    effective_rate: Fraction | None = None


def _micro(amount: Decimal | Fraction) -> int:
    return round_micro(Fraction(amount) * 1_000_000)


def match(
    bill: Bill, machines: list[LedgerMachine], since: date | None = None
) -> list[MachineResult]:
    """The bill's days for each machine it has rows for. Raises :class:`BillError` when a
    machine's rows are in another currency than the ledger's."""
    results: list[MachineResult] = []
    newest = bill.newest_end
    for entry in machines:
        rows = [r for r in bill.rows if entry.machine.names(r.resource_id)]
        if since is not None:
            rows = [r for r in rows if day_of(r.start) >= since]
        if not rows or newest is None:
            continue
        other = sorted({r.currency for r in rows} - {entry.currency})
        if other:
            raise BillError(
                _(
                    "the bill is in {bill} but the ledger's amounts for {machine} are in "
                    "{ledger}: nothing was converted nor kept"
                ).format(bill=", ".join(other), machine=entry.machine.key, ledger=entry.currency)
            )
        sums: dict[date, list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 4)
        for r in rows:
            sums_of_day = sums[day_of(r.start)]
            sums_of_day[0] += Fraction(r.billed)
            sums_of_day[1] += Fraction(r.effective)
            sums_of_day[2] += Fraction(r.list)
            length = (r.end - r.start).total_seconds()
            if length > 0:
                unseen = uncovered_s(r.start.timestamp(), r.end.timestamp(), entry.spans)
                sums_of_day[3] += Fraction(r.billed) * Fraction(unseen) / Fraction(length)
        result = MachineResult(entry)
        for day, (billed, effective, listed, alone) in sorted(sums.items()):
            result.days.append(
                ReconciledDay(
                    resource_id=entry.machine.key,
                    day=day,
                    provider=entry.machine.provider,
                    instance_type=entry.machine.instance_type,
                    currency=entry.currency,
                    estimated=entry.estimated.get(day, 0),
                    billed=_micro(billed),
                    effective=_micro(effective),
                    list=_micro(listed),
                    no_session=_micro(alone),
                    settled=settled(day, newest),
                    bill_to=newest,
                )
            )
        total_list = sum((Fraction(r.list) for r in rows), Fraction(0))
        # what each hour cost: its billed cost, or, for an hour a commitment paid up front
        # covers (billed 0), its amortized share (EffectiveCost)
        paid = sum((Fraction(r.billed or r.effective) for r in rows), Fraction(0))
        result.effective_rate = paid / total_list if total_list > 0 else None
        results.append(result)
    return results


def now() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)
