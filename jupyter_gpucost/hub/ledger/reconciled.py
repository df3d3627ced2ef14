"""The ``hub_reconciled`` table: the cloud's bill allocated per UTC day to the users (and
the part of each node's bill no session used), beside the hub's own estimate.

Reading a bill again replaces the days it covers in one transaction (:meth:`replace`): the
same bill read twice leaves the same rows, a revised bill's days replace the old ones, and
a bill that is refused never reaches the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .schema import from_us, reconciled_table, to_us

_c = reconciled_table.c


@dataclass(frozen=True)
class ReconciledLine:
    """One day's billed (and estimated) micro-dollars of a user, or of a node's unused part."""

    day: date
    #: "user" or "unallocated"
    kind: str
    #: the user's name, or the node's resource id
    name: str
    billed_micro_usd: int
    estimated_micro_usd: int
    settled: bool


@dataclass(frozen=True)
class Reconciliation:
    """What the ledger keeps of the bill: its lines, and the end of its newest charge."""

    lines: list[ReconciledLine]
    bill_to: datetime | None


class ReconciledLedger:
    """Reads and writes ``hub_reconciled``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def replace(
        self,
        days: Iterable[date],
        lines: Sequence[ReconciledLine],
        bill_to: datetime,
        now: datetime,
    ) -> None:
        """The lines of ``days`` become ``lines`` (one transaction)."""
        covered = sorted(set(days) | {line.day for line in lines})
        with self.engine.begin() as conn:
            for i in range(0, len(covered), 500):
                conn.execute(reconciled_table.delete().where(_c.day.in_(covered[i : i + 500])))
            if lines:
                conn.execute(
                    reconciled_table.insert(),
                    [
                        {
                            "day": line.day,
                            "kind": line.kind,
                            "name": line.name[:1000],
                            "billed_micro_usd": line.billed_micro_usd,
                            "estimated_micro_usd": line.estimated_micro_usd,
                            "settled": line.settled,
                            "bill_to_us": to_us(bill_to),
                            "read_us": to_us(now),
                        }
                        for line in lines
                    ],
                )

    def read(self, since: date | None = None) -> Reconciliation:
        query = sa.select(reconciled_table).order_by(_c.day, _c.kind.desc(), _c.name)
        if since is not None:
            query = query.where(_c.day >= since)
        with self.engine.connect() as conn:
            rows = list(conn.execute(query).mappings())
        return Reconciliation(
            [
                ReconciledLine(
                    r["day"],
                    r["kind"],
                    r["name"],
                    int(r["billed_micro_usd"]),
                    int(r["estimated_micro_usd"]),
                    bool(r["settled"]),
                )
                for r in rows
            ],
            max((from_us(r["bill_to_us"]) for r in rows), default=None),
        )
