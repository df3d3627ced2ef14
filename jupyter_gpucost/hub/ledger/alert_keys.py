"""The alerts sent, in the hub ledger (``hub_alerts_sent``): one row per event key, until
when it is remembered (:mod:`jupyter_gpucost.alerts.memory`).

The dispatcher reads them once at start and writes the new ones from its worker threads;
expired rows are deleted with each write. A key is never forgotten before its time however
many others are sent, and a restart of the service (or a second one on the same ledger)
does not send it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .schema import alerts_sent_table, from_us, to_us

_t = alerts_sent_table.c
#: rows written per statement at most
BATCH = 500


class AlertKeyStore:
    """:class:`jupyter_gpucost.alerts.memory.SentKeys` on the hub ledger."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def load(self, now: datetime) -> dict[str, datetime]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_t.alert_key, _t.until_us).where(_t.until_us > to_us(now))
            ).all()
        return {str(key): from_us(int(until)) for key, until in rows}

    def keep(self, keys: Mapping[str, datetime], now: datetime) -> None:
        items = [(k, to_us(v)) for k, v in keys.items() if v > now]
        with self.engine.begin() as conn:
            conn.execute(alerts_sent_table.delete().where(_t.until_us <= to_us(now)))
            for start in range(0, len(items), BATCH):
                batch = dict(items[start : start + BATCH])
                known = dict(
                    conn.execute(
                        sa.select(_t.alert_key, _t.until_us).where(_t.alert_key.in_(batch))
                    ).all()
                )
                new = [{"alert_key": k, "until_us": v} for k, v in batch.items() if k not in known]
                if new:
                    conn.execute(alerts_sent_table.insert(), new)
                for key, until in batch.items():
                    if key in known and until > known[key]:
                        conn.execute(
                            alerts_sent_table.update()
                            .where(_t.alert_key == key)
                            .values(until_us=until)
                        )
