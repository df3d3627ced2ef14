"""The alerts sent, in a ledger's table: one row per event key, until when it is
remembered (:mod:`jupyter_gpucost.alerts.memory`'s ``SentKeys``, on the single server's
ledger and on the hub's alike).

The dispatcher reads the keys once at start and writes the new ones from its worker
threads; expired rows are deleted with each write. A key is never forgotten before its
time however many others are sent, and a restart (or a second process on the same
ledger) does not send it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

#: rows written per statement at most
BATCH = 500
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def sent_keys_table(metadata: sa.MetaData, name: str) -> sa.Table:
    """The table of a ledger's ``metadata`` that keeps the alerts sent."""
    return sa.Table(
        name,
        metadata,
        #: kind|user|subject|threshold (a user name and a subject are short: the key fits)
        sa.Column("alert_key", sa.String(1000), primary_key=True),
        sa.Column("until_us", sa.BigInteger, nullable=False),
        sa.Index(f"ix_{name}_until", "until_us"),
    )


def _us(when: datetime) -> int:
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class TableKeys:
    """The keys sent, in ``table`` (made by :func:`sent_keys_table`) on ``engine``."""

    def __init__(self, engine: Engine, table: sa.Table) -> None:
        self.engine = engine
        self.table = table

    def load(self, now: datetime) -> dict[str, datetime]:
        t = self.table.c
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.alert_key, t.until_us).where(t.until_us > _us(now)))
            return {str(k): _EPOCH + timedelta(microseconds=int(u)) for k, u in rows}

    def keep(self, keys: Mapping[str, datetime], now: datetime) -> None:
        t = self.table.c
        items = [(k, _us(v)) for k, v in keys.items() if v > now]
        with self.engine.begin() as conn:
            conn.execute(self.table.delete().where(t.until_us <= _us(now)))
            for start in range(0, len(items), BATCH):
                batch = dict(items[start : start + BATCH])
                query = sa.select(t.alert_key, t.until_us).where(t.alert_key.in_(batch))
                known = {str(k): int(u) for k, u in conn.execute(query)}
                new = [{"alert_key": k, "until_us": v} for k, v in batch.items() if k not in known]
                if new:
                    conn.execute(self.table.insert(), new)
                for key, until in batch.items():
                    if key in known and until > known[key]:
                        conn.execute(
                            self.table.update().where(t.alert_key == key).values(until_us=until)
                        )
