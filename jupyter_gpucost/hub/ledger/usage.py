"""The ``hub_usage`` table: each server's allocation split by what the cluster's
dcgm-exporter saw (used, idle, unknown), the energy its GPUs drew, and how often its own
report disagreed, per server and local day.

Each poll adds what it learned (:meth:`UsageLedger.add`, one transaction, ``col + delta``),
so a crash loses at most one poll. Sums are exact: micro-dollars are whole numbers, summed
in two parts that cannot overflow (:func:`.queries._exact_sum`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..accounting import month_start
from .queries import _exact_sum, _joined
from .schema import from_us, to_us, usage_table
from .state import MAX_ROW_MICRO_USD

log = logging.getLogger("jupyter_gpucost.hub")

_u = usage_table.c
#: the most millijoules one row may hold (64 GPUs at 5 kW for a year is 10^16)
MAX_ROW_MJ = 10**17


@dataclass(frozen=True)
class UsageTotals:
    """Figures of one server (or user) over some days: micro-dollars, millijoules."""

    used_micro_usd: int = 0
    idle_micro_usd: int = 0
    unknown_micro_usd: int = 0
    energy_mj: int = 0
    idle_energy_mj: int = 0
    disagreements: int = 0

    def __add__(self, other: UsageTotals) -> UsageTotals:
        return UsageTotals(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(UsageTotals))
        )

    def in_range(self) -> bool:
        money = (self.used_micro_usd, self.idle_micro_usd, self.unknown_micro_usd)
        energy = (self.energy_mj, self.idle_energy_mj)
        return (
            all(0 <= v <= MAX_ROW_MICRO_USD for v in money)
            and all(0 <= v <= MAX_ROW_MJ for v in energy)
            and 0 <= self.disagreements <= 10**9
        )


@dataclass(frozen=True)
class UsageDelta:
    """What one poll adds to one server's day."""

    server_id: int
    user: str
    day: date
    figures: UsageTotals
    #: the server's allocation is split up to here
    until: datetime


_COLUMNS = tuple(f.name for f in fields(UsageTotals))


class UsageLedger:
    """The ``hub_usage`` rows of one hub ledger (its engine; the table is created with
    the ledger's schema)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def add(self, deltas: Sequence[UsageDelta]) -> None:
        """Add each delta to its server's day (created at first). A delta outside what a
        row may hold is left out and logged."""
        good = [d for d in deltas if d.figures.in_range()]
        for bad in set(deltas) - set(good):
            log.error("gpucost hub: usage of server %d left out: %r", bad.server_id, bad.figures)
        if not good:
            return
        with self.engine.begin() as conn:
            keys = {(d.server_id, d.day) for d in good}
            ids = sorted({d.server_id for d in good})
            found = {
                (int(i), day)
                for i, day in conn.execute(
                    sa.select(_u.server_id, _u.day).where(_u.server_id.in_(ids))
                )
                if (int(i), day) in keys
            }
            inserts: dict[tuple[int, date], dict[str, object]] = {}
            updates: list[dict[str, object]] = []
            for d in good:
                values: dict[str, object] = {c: getattr(d.figures, c) for c in _COLUMNS}
                values["until_us"] = to_us(d.until)
                key = (d.server_id, d.day)
                if key in found:
                    updates.append(
                        {"b_id": d.server_id, "b_day": d.day}
                        | {f"d_{k}": v for k, v in values.items()}
                    )
                elif key in inserts:
                    row = inserts[key]
                    for c in _COLUMNS:
                        row[c] = int(str(row[c])) + getattr(d.figures, c)
                    row["until_us"] = max(int(str(row["until_us"])), to_us(d.until))
                else:
                    inserts[key] = {"server_id": d.server_id, "day": d.day, "user_name": d.user}
                    inserts[key].update(values)
            if inserts:
                conn.execute(usage_table.insert(), list(inserts.values()))
            if updates:
                conn.execute(
                    usage_table.update()
                    .where(_u.server_id == sa.bindparam("b_id"), _u.day == sa.bindparam("b_day"))
                    .values(
                        {c: getattr(_u, c) + sa.bindparam(f"d_{c}") for c in _COLUMNS}
                        | {"until_us": sa.bindparam("d_until_us")}
                    ),
                    updates,
                )

    def untils(self, server_ids: Iterable[int]) -> dict[int, datetime]:
        """How far each server's allocation was split (by this process or an earlier one)."""
        ids = sorted(set(server_ids))
        if not ids:
            return {}
        query = (
            sa.select(_u.server_id, sa.func.max(_u.until_us))
            .where(_u.server_id.in_(ids))
            .group_by(_u.server_id)
        )
        with self.engine.connect() as conn:
            return {int(i): from_us(int(u)) for i, u in conn.execute(query) if u is not None}

    def _sums(
        self, key: sa.ColumnElement[object], where: sa.ColumnElement[bool]
    ) -> dict[object, UsageTotals]:
        money = ("used_micro_usd", "idle_micro_usd", "unknown_micro_usd")
        columns: list[sa.ColumnElement[object]] = [key]
        for c in money:
            columns.extend(_exact_sum(getattr(_u, c), c))
        for c in ("energy_mj", "idle_energy_mj", "disagreements"):
            columns.append(sa.func.sum(sa.cast(getattr(_u, c), sa.Numeric)).label(c))
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(*columns).where(where).group_by(key)).all()
        out: dict[object, UsageTotals] = {}
        for row in rows:
            m = row._mapping
            out[row[0]] = UsageTotals(
                *(_joined(m[f"{c}_usd"], m[f"{c}_micro"]) for c in money),
                *(int(m[c] or 0) for c in ("energy_mj", "idle_energy_mj", "disagreements")),
            )
        return out

    def by_user(self, today: date) -> dict[str, UsageTotals]:
        """Every user's figures this month (the calendar month ``today`` falls in)."""
        found = self._sums(_u.user_name, sa.and_(_u.day >= month_start(today), _u.day <= today))
        return {str(k): v for k, v in found.items()}

    def by_server(self, server_ids: Iterable[int]) -> dict[int, UsageTotals]:
        """Each server session's figures, all days."""
        ids = sorted(set(server_ids))
        if not ids:
            return {}
        found = self._sums(_u.server_id, _u.server_id.in_(ids))
        return {int(str(k)): v for k, v in found.items()}
