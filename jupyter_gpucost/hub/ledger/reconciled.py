"""The ``hub_reconciled`` table: the cloud's bill allocated per UTC day to the users (and
the part of each node's bill no session used), beside the hub's own estimate.

One line per day, node (the bill's resource id) and user, and one per day and node for its
unused part. Reading a bill again replaces the (day, node) pairs it covers in one
transaction (:meth:`replace`): the same bill read twice leaves the same rows, a revised
bill's rows replace the old ones, another bill's nodes keep theirs, and a bill that is
refused never reaches the ledger.
"""

from __future__ import annotations

from collections import defaultdict
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
    #: the node's resource id on the bill this line is a part of
    resource_id: str


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
        covered: Iterable[tuple[date, str]],
        lines: Sequence[ReconciledLine],
        bill_to: datetime,
        now: datetime,
    ) -> None:
        """The lines of each (day, node's resource id) ``covered`` become ``lines`` (one
        transaction): another bill's nodes keep theirs."""
        by_day: dict[date, set[str]] = defaultdict(set)
        for day, rid in covered:
            by_day[day].add(rid[:1000])
        for line in lines:
            by_day[line.day].add(line.resource_id[:1000])
        with self.engine.begin() as conn:
            for day, rids in sorted(by_day.items()):
                ordered = sorted(rids)
                for i in range(0, len(ordered), 500):
                    conn.execute(
                        reconciled_table.delete().where(
                            _c.day == day, _c.resource_id.in_(ordered[i : i + 500])
                        )
                    )
            if lines:
                conn.execute(
                    reconciled_table.insert(),
                    [
                        {
                            "day": line.day,
                            "kind": line.kind,
                            "name": line.name[:1000],
                            "resource_id": line.resource_id[:1000],
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
        query = sa.select(reconciled_table).order_by(
            _c.day, _c.kind.desc(), _c.name, _c.resource_id
        )
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
                    r["resource_id"],
                )
                for r in rows
            ],
            max((from_us(r["bill_to_us"]) for r in rows), default=None),
        )
