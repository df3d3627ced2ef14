"""The ledger: what every session cost, kept on disk so totals survive a restart.

SQLAlchemy Core over SQLite (WAL) in the user's Jupyter data dir by default, or any
SQLAlchemy URL (PostgreSQL for a hub-wide ledger). What is stored:

* ``sessions``: one row per run of the server (under JupyterHub, one spawn), with its
  running totals in micro-dollars, updated at every flush;
* ``spend``: per session and minute, what was spent in that minute (micro-dollars) and
  the price rate in force: the rollup that today / this month / all time and the history
  of older sessions are read from (30 days of one session is 43,200 small rows);
* ``gpu_minutes``: per session, GPU and minute, utilisation, memory and power, for the
  history chart of past windows;
* ``cells``: cell records sent by the kernel extension;
* ``meta``: the schema version.

Money is integer micro-dollars. The writer only ever adds what the meter counted since
its last flush, so nothing is counted twice; a server killed hard loses at most what it
counted since the last flush.

A ledger that cannot be read (not a database, a newer schema) is moved aside and a fresh
one started, with a warning; a ledger that cannot be written at all (no permission) turns
the ledger off, with a warning. The server never fails because of its ledger.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

SCHEMA_VERSION = 1

metadata = sa.MetaData()

meta_table = sa.Table(
    "meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

sessions_table = sa.Table(
    "sessions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("started_unix_s", sa.Float, nullable=False),
    sa.Column("last_unix_s", sa.Float, nullable=False),
    sa.Column("ended_unix_s", sa.Float, nullable=True),
    sa.Column("user", sa.String(256), nullable=True),
    sa.Column("cost_micro_usd", sa.BigInteger, nullable=False, default=0),
    sa.Column("idle_micro_usd", sa.BigInteger, nullable=False, default=0),
    sa.Column("energy_j", sa.Float, nullable=True),
    sa.Column("peak_memory_bytes", sa.BigInteger, nullable=True),
)

spend_table = sa.Table(
    "spend",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("minute_unix_s", sa.BigInteger, primary_key=True),
    sa.Column("cost_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("idle_micro_usd", sa.BigInteger, nullable=False),
    sa.Column("rate_micro_usd_per_hour", sa.BigInteger, nullable=False),
    sa.Index("ix_spend_minute", "minute_unix_s"),
)

#: spend per session and quarter hour: every time zone's midnight falls on a quarter hour,
#: so today / this month are read from at most 96 rows per session and day
quarters_table = sa.Table(
    "spend_quarters",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("quarter_unix_s", sa.BigInteger, primary_key=True),
    sa.Column("cost_micro_usd", sa.BigInteger, nullable=False),
    sa.Index("ix_spend_quarters_quarter", "quarter_unix_s"),
)

gpu_minutes_table = sa.Table(
    "gpu_minutes",
    metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("gpu_index", sa.Integer, primary_key=True),
    sa.Column("minute_unix_s", sa.BigInteger, primary_key=True),
    sa.Column("utilization_pct_sum", sa.Float, nullable=False),
    sa.Column("power_w_sum", sa.Float, nullable=False),
    sa.Column("samples", sa.Integer, nullable=False),
    sa.Column("memory_used_bytes_max", sa.BigInteger, nullable=True),
    sa.Index("ix_gpu_minutes_minute", "minute_unix_s"),
)

#: what the budget did (warnings are not kept here: actions only), newest last
actions_table = sa.Table(
    "budget_actions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("record", sa.JSON, nullable=False),
    sa.Index("ix_budget_actions_at", "at"),
)

cells_table = sa.Table(
    "cells",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session_id", sa.String(64), nullable=False),
    sa.Column("cell_id", sa.String(256), nullable=False),
    sa.Column("notebook_path", sa.String(1024), nullable=True),
    sa.Column("kernel_id", sa.String(64), nullable=True),
    sa.Column("started", sa.String(40), nullable=False),
    sa.Column("ended", sa.String(40), nullable=False),
    sa.Column("record", sa.JSON, nullable=False),
    sa.Index("ix_cells_ended", "ended"),
)


class LedgerUnavailable(Exception):
    """The ledger cannot be used at all; the message says why."""


@dataclass(frozen=True)
class GpuMinute:
    """What one sample says about one GPU, folded into its minute."""

    gpu_index: int
    utilization_pct: float | None
    power_w: float | None
    memory_used_bytes: int | None


@dataclass
class Pending:
    """What the meter counted since the last flush, by minute (micro-dollars)."""

    spend: dict[int, list[int]] = field(default_factory=dict)  # minute -> [cost, idle, rate]
    gpus: dict[tuple[int, int], list[Any]] = field(default_factory=dict)
    cost_micro_usd: int = 0
    idle_micro_usd: int = 0
    energy_j: float | None = None
    peak_memory_bytes: int | None = None
    last_unix_s: float = 0.0

    def empty(self) -> bool:
        return not self.spend and not self.gpus


@dataclass(frozen=True)
class Totals:
    """Totals over every session of the ledger, in micro-dollars."""

    today_micro_usd: int
    month_micro_usd: int
    all_time_micro_usd: int


def default_url(data_dir: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(data_dir) / 'gpucost' / 'ledger.sqlite'}"


def minute_of(unix_s: float) -> int:
    return int(unix_s // 60) * 60


def quarter_of(unix_s: float) -> int:
    return int(unix_s // 900) * 900


def new_session_id(started: datetime) -> str:
    return f"{started.strftime('%Y-%m-%dT%H:%M:%SZ')}-{secrets.token_hex(3)}"


class Ledger:
    """One ledger database. Thread-safe: every write holds one lock."""

    def __init__(
        self,
        url: str,
        *,
        tz: tzinfo | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.url = url
        self.tz = tz
        self.log = log or logging.getLogger("jupyter_gpucost")
        #: set when a broken ledger was moved aside: where it went
        self.reset_from: str | None = None
        self._lock = threading.Lock()
        self.engine = self._open()

    # -- opening ---------------------------------------------------------------

    def _sqlite_path(self) -> Path | None:
        url = sa.engine.make_url(self.url)
        if url.get_backend_name() != "sqlite" or not url.database:
            return None
        if url.database == ":memory:":
            return None
        return Path(url.database)

    def _create_engine(self) -> Engine:
        path = self._sqlite_path()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise LedgerUnavailable(f"cannot create {path.parent}: {e.strerror}") from None
            engine = sa.create_engine(self.url, connect_args={"timeout": 10})

            @sa.event.listens_for(engine, "connect")
            def _pragmas(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.close()

            return engine
        return sa.create_engine(self.url, pool_pre_ping=True)

    def _check(self, engine: Engine) -> None:
        """Create the schema, or check the one there; raises on a broken database."""
        with engine.begin() as conn:
            if self._sqlite_path() is not None:
                result = conn.exec_driver_sql("PRAGMA quick_check").scalar()
                if result != "ok":
                    raise sa.exc.DatabaseError("PRAGMA quick_check", None, Exception(result))
            metadata.create_all(conn)
            version = conn.execute(
                sa.select(meta_table.c.value).where(meta_table.c.key == "schema_version")
            ).scalar()
            if version is None:
                conn.execute(
                    meta_table.insert().values(key="schema_version", value=str(SCHEMA_VERSION))
                )
            elif int(version) > SCHEMA_VERSION:
                raise sa.exc.DatabaseError(
                    "schema_version",
                    None,
                    Exception(f"written by a newer jupyter-gpucost (schema {version})"),
                )

    def _open(self) -> Engine:
        engine = self._create_engine()
        try:
            self._check(engine)
            return engine
        except sa.exc.OperationalError as e:
            if self._is_permission_error(e):
                engine.dispose()
                raise LedgerUnavailable(f"cannot write the ledger: {e.orig}") from None
            broken: BaseException = e
        except (sa.exc.DatabaseError, ValueError) as e:
            broken = e
        engine.dispose()
        path = self._sqlite_path()
        if path is None:
            raise LedgerUnavailable(f"the ledger database cannot be used: {broken}") from None
        aside = path.with_name(f"{path.name}.broken-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")
        try:
            path.rename(aside)
            for suffix in ("-wal", "-shm"):
                extra = path.with_name(path.name + suffix)
                if extra.exists():
                    extra.rename(aside.with_name(aside.name + suffix))
        except OSError as e:
            raise LedgerUnavailable(
                f"the ledger {path} is unreadable ({broken}) and cannot "
                f"be moved aside: {e.strerror}"
            ) from None
        self.reset_from = str(aside)
        self.log.warning(
            "jupyter-gpucost: the ledger %s could not be read (%s); it was moved to %s and a "
            "fresh ledger started. Totals of earlier sessions are in the old file.",
            path,
            broken,
            aside,
        )
        engine = self._create_engine()
        self._check(engine)
        return engine

    @staticmethod
    def _is_permission_error(e: BaseException) -> bool:
        text = str(getattr(e, "orig", e)).lower()
        return "readonly" in text or "permission" in text or "unable to open" in text

    def close(self) -> None:
        self.engine.dispose()

    # -- sessions --------------------------------------------------------------

    def start_session(self, session_id: str, started: datetime, user: str | None) -> None:
        with self._lock, self.engine.begin() as conn:
            conn.execute(
                sessions_table.insert().values(
                    id=session_id,
                    started_unix_s=started.timestamp(),
                    last_unix_s=started.timestamp(),
                    user=user,
                    cost_micro_usd=0,
                    idle_micro_usd=0,
                )
            )

    def end_session(self, session_id: str, ended: datetime) -> None:
        with self._lock, self.engine.begin() as conn:
            conn.execute(
                sessions_table.update()
                .where(sessions_table.c.id == session_id)
                .values(ended_unix_s=ended.timestamp())
            )

    # -- writing ---------------------------------------------------------------

    def flush(self, session_id: str, pending: Pending) -> None:
        """Add what was counted since the last flush (one transaction)."""
        if pending.empty():
            return
        with self._lock, self.engine.begin() as conn:
            for minute, (cost, idle, rate) in sorted(pending.spend.items()):
                updated = conn.execute(
                    spend_table.update()
                    .where(
                        (spend_table.c.session_id == session_id)
                        & (spend_table.c.minute_unix_s == minute)
                    )
                    .values(
                        cost_micro_usd=spend_table.c.cost_micro_usd + cost,
                        idle_micro_usd=spend_table.c.idle_micro_usd + idle,
                        rate_micro_usd_per_hour=rate,
                    )
                ).rowcount
                if not updated:
                    conn.execute(
                        spend_table.insert().values(
                            session_id=session_id,
                            minute_unix_s=minute,
                            cost_micro_usd=cost,
                            idle_micro_usd=idle,
                            rate_micro_usd_per_hour=rate,
                        )
                    )
            quarters: dict[int, int] = {}
            for minute, (cost, _idle, _rate) in pending.spend.items():
                quarters[quarter_of(minute)] = quarters.get(quarter_of(minute), 0) + cost
            for quarter, cost in sorted(quarters.items()):
                q = quarters_table.c
                updated = conn.execute(
                    quarters_table.update()
                    .where((q.session_id == session_id) & (q.quarter_unix_s == quarter))
                    .values(cost_micro_usd=q.cost_micro_usd + cost)
                ).rowcount
                if not updated:
                    conn.execute(
                        quarters_table.insert().values(
                            session_id=session_id, quarter_unix_s=quarter, cost_micro_usd=cost
                        )
                    )
            for (gpu, minute), (util, power, n, memory) in sorted(pending.gpus.items()):
                c = gpu_minutes_table.c
                updated = conn.execute(
                    gpu_minutes_table.update()
                    .where(
                        (c.session_id == session_id)
                        & (c.gpu_index == gpu)
                        & (c.minute_unix_s == minute)
                    )
                    .values(
                        utilization_pct_sum=c.utilization_pct_sum + util,
                        power_w_sum=c.power_w_sum + power,
                        samples=c.samples + n,
                        memory_used_bytes_max=sa.case(
                            (
                                sa.func.coalesce(c.memory_used_bytes_max, -1) >= (memory or 0),
                                c.memory_used_bytes_max,
                            ),
                            else_=memory,
                        ),
                    )
                ).rowcount
                if not updated:
                    conn.execute(
                        gpu_minutes_table.insert().values(
                            session_id=session_id,
                            gpu_index=gpu,
                            minute_unix_s=minute,
                            utilization_pct_sum=util,
                            power_w_sum=power,
                            samples=n,
                            memory_used_bytes_max=memory,
                        )
                    )
            conn.execute(
                sessions_table.update()
                .where(sessions_table.c.id == session_id)
                .values(
                    cost_micro_usd=sessions_table.c.cost_micro_usd + pending.cost_micro_usd,
                    idle_micro_usd=sessions_table.c.idle_micro_usd + pending.idle_micro_usd,
                    energy_j=pending.energy_j,
                    peak_memory_bytes=pending.peak_memory_bytes,
                    last_unix_s=pending.last_unix_s,
                )
            )

    # -- reading ---------------------------------------------------------------

    def _local(self, when: datetime) -> datetime:
        return when.astimezone(self.tz) if self.tz is not None else when.astimezone()

    def day_start(self, now: datetime) -> datetime:
        local = self._local(now)
        return local.replace(hour=0, minute=0, second=0, microsecond=0)

    def month_start(self, now: datetime) -> datetime:
        return self.day_start(now).replace(day=1)

    def totals(self, now: datetime, *, exclude_session: str | None = None) -> Totals:
        """Spend of every session (but ``exclude_session``) today, this month, all time."""
        day = quarter_of(self.day_start(now).timestamp())
        month = quarter_of(self.month_start(now).timestamp())
        q = quarters_table.c
        where = q.session_id != exclude_session if exclude_session else sa.true()
        recent = sa.select(
            sa.func.coalesce(
                sa.func.sum(sa.case((q.quarter_unix_s >= day, q.cost_micro_usd), else_=0)), 0
            ),
            sa.func.coalesce(sa.func.sum(q.cost_micro_usd), 0),
        ).where(where & (q.quarter_unix_s >= month))
        c = sessions_table.c
        everything = sa.select(sa.func.coalesce(sa.func.sum(c.cost_micro_usd), 0)).where(
            c.id != exclude_session if exclude_session else sa.true()
        )
        with self.engine.connect() as conn:
            today, month_total = conn.execute(recent).one()
            all_time = conn.execute(everything).scalar()
        return Totals(int(today), int(month_total), int(all_time))

    def sessions_spend_before(self, session_ids: Iterable[str], unix_s: float) -> dict[str, int]:
        """What each of these sessions spent in the minutes before ``unix_s`` (one query)."""
        ids = sorted(set(session_ids))
        if not ids:
            return {}
        s = spend_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(s.session_id, sa.func.sum(s.cost_micro_usd))
                .where(s.session_id.in_(ids) & (s.minute_unix_s < minute_of(unix_s)))
                .group_by(s.session_id)
            ).all()
        spent = {sid: 0 for sid in ids}
        spent.update({str(sid): int(total or 0) for sid, total in rows})
        return spent

    def spend_between(self, start_s: float, end_s: float) -> list[tuple[int, int, int]]:
        """(minute, cost, rate) summed over sessions, for minutes in [start, end)."""
        s = spend_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    s.minute_unix_s,
                    sa.func.sum(s.cost_micro_usd),
                    sa.func.sum(s.rate_micro_usd_per_hour),
                )
                .where((s.minute_unix_s >= minute_of(start_s)) & (s.minute_unix_s < end_s))
                .group_by(s.minute_unix_s)
                .order_by(s.minute_unix_s)
            ).all()
        return [(int(m), int(c), int(r)) for m, c, r in rows]

    def session_spend_between(
        self, start_s: float, end_s: float
    ) -> list[tuple[int, str, int, int]]:
        """(minute, session, cost, rate) per session, for minutes in [start, end)."""
        s = spend_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    s.minute_unix_s, s.session_id, s.cost_micro_usd, s.rate_micro_usd_per_hour
                )
                .where((s.minute_unix_s >= minute_of(start_s)) & (s.minute_unix_s < end_s))
                .order_by(s.minute_unix_s, s.session_id)
            ).all()
        return [(int(m), str(i), int(c), int(r)) for m, i, c, r in rows]

    def gpu_minutes_between(
        self, start_s: float, end_s: float
    ) -> list[tuple[int, int, float, float, int, int | None]]:
        """(minute, gpu, utilisation sum, power sum, samples, memory max)."""
        g = gpu_minutes_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    g.minute_unix_s,
                    g.gpu_index,
                    sa.func.sum(g.utilization_pct_sum),
                    sa.func.sum(g.power_w_sum),
                    sa.func.sum(g.samples),
                    sa.func.max(g.memory_used_bytes_max),
                )
                .where((g.minute_unix_s >= minute_of(start_s)) & (g.minute_unix_s < end_s))
                .group_by(g.minute_unix_s, g.gpu_index)
                .order_by(g.minute_unix_s, g.gpu_index)
            ).all()
        return [(int(m), int(i), float(u), float(p), int(n), x) for m, i, u, p, n, x in rows]

    def sessions(self, limit: int = 20) -> list[dict[str, Any]]:
        c = sessions_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.id, c.started_unix_s, c.ended_unix_s, c.last_unix_s, c.cost_micro_usd)
                .order_by(c.started_unix_s.desc())
                .limit(limit)
            ).all()
        return [
            {
                "id": r.id,
                "started_unix_s": r.started_unix_s,
                "ended_unix_s": r.ended_unix_s,
                "last_unix_s": r.last_unix_s,
                "cost_micro_usd": int(r.cost_micro_usd),
            }
            for r in rows
        ]

    def days(self, now: datetime, count: int = 31) -> list[tuple[date, int]]:
        """Spend per local day, for the last ``count`` days (oldest first)."""
        first = self.day_start(now) - timedelta(days=count - 1)
        rows = self.spend_between(first.timestamp(), now.timestamp() + 60)
        per_day: dict[date, int] = {}
        for minute, cost, _rate in rows:
            day = self._local(datetime.fromtimestamp(minute, UTC)).date()
            per_day[day] = per_day.get(day, 0) + cost
        return sorted(per_day.items())

    # -- cells -----------------------------------------------------------------

    def add_cell(self, session_id: str, record: dict[str, Any]) -> None:
        with self._lock, self.engine.begin() as conn:
            conn.execute(
                cells_table.insert().values(
                    session_id=session_id,
                    cell_id=str(record.get("cell_id", "")),
                    notebook_path=record.get("notebook_path"),
                    kernel_id=record.get("kernel_id"),
                    started=str(record.get("started", "")),
                    ended=str(record.get("ended", "")),
                    record=record,
                )
            )

    def add_action(self, session_id: str, record: dict[str, Any]) -> None:
        """Keep what a budget did (an audit trail across sessions)."""
        with self._lock, self.engine.begin() as conn:
            conn.execute(
                actions_table.insert().values(
                    session_id=session_id,
                    at=str(record.get("at", ""))[:40],
                    action=str(record.get("action", ""))[:32],
                    record=record,
                )
            )

    def actions(self, limit: int = 50) -> list[dict[str, Any]]:
        """Budget actions, newest first, each with its session id."""
        c = actions_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.record, c.session_id).order_by(c.at.desc(), c.id.desc()).limit(limit)
            ).all()
        return [{**dict(r.record), "session_id": r.session_id} for r in rows]

    def recent_cells(self, limit: int = 50) -> list[dict[str, Any]]:
        c = cells_table.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.record, c.session_id).order_by(c.ended.desc(), c.id.desc()).limit(limit)
            ).all()
        return [{**dict(r.record), "session_id": r.session_id} for r in rows]

    # -- bulk (benchmarks) -----------------------------------------------------

    def bulk_spend(self, session_id: str, rows: Iterable[Sequence[int]]) -> None:
        """Insert (minute, cost, idle, rate) rows directly (benchmarks and imports)."""
        rows = list(rows)
        quarters: dict[int, int] = {}
        for m, c, _i, _r in rows:
            quarters[quarter_of(m)] = quarters.get(quarter_of(m), 0) + c
        with self._lock, self.engine.begin() as conn:
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
