"""Writing to the ledger: what the meter counted since the last flush, added in one
transaction (so nothing is counted twice), and bulk rows for benchmarks and imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .schema import (
    gpu_minutes_table,
    quarter_of,
    quarters_table,
    sessions_table,
    spend_table,
)


@dataclass
class GpuMinuteSums:
    """One GPU's samples in one minute, folded: sums for the means, the memory peak."""

    utilization_pct_sum: float = 0.0
    power_w_sum: float = 0.0
    samples: int = 0
    memory_used_bytes_max: int | None = None

    def add(
        self,
        utilization_pct: float | None,
        power_w: float | None,
        memory_used_bytes: int | None,
        samples: int = 1,
    ) -> None:
        """Fold in one reading (or ``samples`` readings already summed)."""
        self.utilization_pct_sum += utilization_pct or 0.0
        self.power_w_sum += power_w or 0.0
        self.samples += samples
        if memory_used_bytes is not None:
            self.memory_used_bytes_max = max(self.memory_used_bytes_max or 0, memory_used_bytes)

    def merge(self, other: GpuMinuteSums) -> None:
        self.add(
            other.utilization_pct_sum,
            other.power_w_sum,
            other.memory_used_bytes_max,
            samples=other.samples,
        )


@dataclass
class Pending:
    """What the meter counted since the last flush, by minute (micro-units of the session's
    currency)."""

    spend: dict[int, list[int]] = field(default_factory=dict)  # minute -> [cost, idle, rate]
    #: (GPU index, minute) -> that GPU's samples in that minute
    gpus: dict[tuple[int, int], GpuMinuteSums] = field(default_factory=dict)
    cost_micro: int = 0
    idle_micro: int = 0
    energy_j: float | None = None
    peak_memory_bytes: int | None = None
    last_unix_s: float = 0.0

    def empty(self) -> bool:
        return not self.spend and not self.gpus

    def absorb(self, newer: Pending) -> None:
        """Fold in what was counted after this part (a part not written yet)."""
        for minute, (cost, idle, rate) in newer.spend.items():
            row = self.spend.setdefault(minute, [0, 0, rate])
            row[0] += cost
            row[1] += idle
            row[2] = rate
        for key, sums in newer.gpus.items():
            self.gpus.setdefault(key, GpuMinuteSums()).merge(sums)
        self.cost_micro += newer.cost_micro
        self.idle_micro += newer.idle_micro
        if newer.energy_j is not None:
            self.energy_j = newer.energy_j
        if newer.peak_memory_bytes is not None:
            self.peak_memory_bytes = max(self.peak_memory_bytes or 0, newer.peak_memory_bytes)
        self.last_unix_s = max(self.last_unix_s, newer.last_unix_s)


def merged(parts: Sequence[Pending]) -> Pending:
    """One part holding ``parts`` (oldest first)."""
    out = Pending()
    for part in parts:
        out.absorb(part)
    return out


def _add_row(
    conn: Connection,
    table: sa.Table,
    key: dict[str, object],
    added: dict[str, object],
    first: dict[str, object],
) -> None:
    """Add to the row at ``key`` (``added``: column → new value, in SQL), or insert it
    (``first``: its columns' first values) when there is none yet."""
    where = sa.and_(*(table.c[name] == value for name, value in key.items()))
    if not conn.execute(table.update().where(where).values(**added)).rowcount:
        conn.execute(table.insert().values(**key, **first))


def add_pending(conn: Connection, session_id: str, pending: Pending) -> None:
    """Add ``pending`` to the session's rows, inside the caller's transaction."""
    s = spend_table.c
    for minute, (cost, idle, rate) in sorted(pending.spend.items()):
        _add_row(
            conn,
            spend_table,
            {"session_id": session_id, "minute_unix_s": minute},
            {
                "cost_micro_usd": s.cost_micro_usd + cost,
                "idle_micro_usd": s.idle_micro_usd + idle,
                "rate_micro_usd_per_hour": rate,
            },
            {"cost_micro_usd": cost, "idle_micro_usd": idle, "rate_micro_usd_per_hour": rate},
        )
    quarters: dict[int, int] = {}
    for minute, (cost, _idle, _rate) in pending.spend.items():
        quarters[quarter_of(minute)] = quarters.get(quarter_of(minute), 0) + cost
    q = quarters_table.c
    for quarter, cost in sorted(quarters.items()):
        _add_row(
            conn,
            quarters_table,
            {"session_id": session_id, "quarter_unix_s": quarter},
            {"cost_micro_usd": q.cost_micro_usd + cost},
            {"cost_micro_usd": cost},
        )
    c = gpu_minutes_table.c
    for (gpu, minute), sums in sorted(pending.gpus.items()):
        util, power = sums.utilization_pct_sum, sums.power_w_sum
        n, memory = sums.samples, sums.memory_used_bytes_max
        _add_row(
            conn,
            gpu_minutes_table,
            {"session_id": session_id, "gpu_index": gpu, "minute_unix_s": minute},
            {
                "utilization_pct_sum": c.utilization_pct_sum + util,
                "power_w_sum": c.power_w_sum + power,
                "samples": c.samples + n,
                "memory_used_bytes_max": sa.case(
                    (
                        sa.func.coalesce(c.memory_used_bytes_max, -1) >= (memory or 0),
                        c.memory_used_bytes_max,
                    ),
                    else_=memory,
                ),
            },
            {
                "utilization_pct_sum": util,
                "power_w_sum": power,
                "samples": n,
                "memory_used_bytes_max": memory,
            },
        )
    conn.execute(
        sessions_table.update()
        .where(sessions_table.c.id == session_id)
        .values(
            cost_micro_usd=sessions_table.c.cost_micro_usd + pending.cost_micro,
            idle_micro_usd=sessions_table.c.idle_micro_usd + pending.idle_micro,
            energy_j=pending.energy_j,
            peak_memory_bytes=pending.peak_memory_bytes,
            last_unix_s=pending.last_unix_s,
        )
    )


def add_bulk_spend(conn: Connection, session_id: str, rows: Sequence[Sequence[int]]) -> None:
    """Insert (minute, cost, idle, rate) rows directly, inside the caller's transaction."""
    quarters: dict[int, int] = {}
    for m, c, _i, _r in rows:
        quarters[quarter_of(m)] = quarters.get(quarter_of(m), 0) + c
    conn.execute(
        quarters_table.insert(),
        [
            {"session_id": session_id, "quarter_unix_s": q, "cost_micro_usd": c}
            for q, c in quarters.items()
        ],
    )
    conn.execute(
        sessions_table.update()
        .where(sessions_table.c.id == session_id)
        .values(cost_micro_usd=sessions_table.c.cost_micro_usd + sum(quarters.values()))
    )
    conn.execute(
        spend_table.insert(),
        [
            {
                "session_id": session_id,
                "minute_unix_s": m,
                "cost_micro_usd": c,
                "idle_micro_usd": i,
                "rate_micro_usd_per_hour": r,
            }
            for m, c, i, r in rows
        ],
    )
