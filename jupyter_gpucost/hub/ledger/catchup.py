"""The hub ledger catching up after a spell: its database used through one guard
(:meth:`CatchUp._db`), what waited in memory written first when it answers again, and
the totals read from the sums last known while it does not (see :mod:`.outage`).

A part of :class:`~.HubLedger`, in a module of its own; it imports what the ledger's other
parts do.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, date, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..accounting import month_start
from ..model import HubLedgerDown, Rate, ReportCeiling, ServerInfo
from .outage import Closing, DeadlineChange, Outage, QuarantinedRow, Waiting
from .quarantine import keep
from .queries import load_open, rate_id, sums_by_user
from .schema import deadlines_table, server_groups_table, servers_table, to_us
from .state import NO_DAY, Day, OpenServer
from .writes import report_values, write_days

_s = servers_table.c


class CatchUp:
    """The guard, the rows of servers (made on first sight, or after a spell), the
    catching up and the cached sums of :class:`~.HubLedger`."""

    engine: Engine
    log: logging.Logger
    outage: Outage
    waiting: Waiting
    _lock: threading.Lock
    _open: dict[int, OpenServer]
    _keys: dict[tuple[str, str, int], int]
    _by_user: dict[str, set[int]]
    ceiling: ReportCeiling
    #: the database's sums by user (today, month) as last read or written
    _sums: tuple[date, dict[str, list[int]]] | None

    def _insert_or_reopen(
        self, server: ServerInfo, rate: Rate, key: tuple[str, str, int]
    ) -> OpenServer:
        with self._db() as conn:
            found = conn.execute(
                sa.select(_s.id).where(
                    _s.user_name == key[0], _s.server_name == key[1], _s.started_us == key[2]
                )
            ).scalar()
            if found is None:
                found = self._insert(conn, server, rate, key[2])
            else:
                conn.execute(servers_table.update().where(_s.id == found).values(stopped_us=None))
            (opened,) = load_open(conn, _s.id == found, self.ceiling)
        return opened

    @staticmethod
    def _insert(conn: Connection, server: ServerInfo, rate: Rate, started_us: int) -> int:
        result = conn.execute(
            servers_table.insert().values(
                user_name=server.user,
                server_name=server.server_name,
                started_us=started_us,
                last_seen_us=started_us,
                profile=server.profile,
                rate_id=rate_id(conn, rate),
            )
        )
        key = result.inserted_primary_key
        assert key is not None
        # only names the column can hold: a group never keeps a server from being billed
        groups = sorted({g for g in server.groups if 0 < len(g) <= 255 and "\x00" not in g})
        if groups:
            conn.execute(
                server_groups_table.insert(),
                [{"server_id": int(key[0]), "group_name": g} for g in groups],
            )
        return int(key[0])

    @contextmanager
    def _db(self, *, write: bool = True) -> Iterator[Connection]:
        """A transaction (or, ``write=False``, a connection); a spell raises
        :class:`HubLedgerDown` at once while it lasts."""
        self.outage.check()
        try:
            with self.engine.begin() if write else self.engine.connect() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as e:
            self.outage.failed(e)
            raise

    @staticmethod
    def _write_close(conn: Connection, c: Closing) -> None:
        server_id = c.server.row.server_id
        write_days(conn, [(c.server, c.days)])
        conn.execute(
            servers_table.update()
            .where(_s.id == server_id)
            .values(
                stopped_us=to_us(c.stopped),
                last_seen_us=to_us(c.last_seen),
                **report_values(c.last),
            )
        )
        conn.execute(deadlines_table.delete().where(deadlines_table.c.server_id == server_id))

    def _write_waiting(self) -> None:
        """Write what waited in memory for the database, oldest first: servers opened,
        servers closed, grace deadlines, rows for quarantine. :class:`HubLedgerDown` while
        it cannot be reached (what is not written still waits)."""
        waiting = self.waiting
        for provisional, server in sorted(waiting.opened.items(), reverse=True):
            row = server.row
            info = ServerInfo(row.user, row.server_name, row.started, True, row.profile)
            key = (row.user, row.server_name, to_us(row.started))
            try:
                real = self._insert_or_reopen(info, row.rate, key).row.server_id
            except sa.exc.SQLAlchemyError as e:  # bad data: never written, kept for an admin
                why = f"the database refused it: {e}"
                self._refuse(waiting.opened.pop(provisional), "open", {}, why)
                continue
            with self._lock:
                server.row = dataclasses.replace(row, server_id=real)
                waiting.alias[provisional] = real
                del waiting.opened[provisional]
                if self._open.pop(provisional, None) is not None:
                    self._open[real] = server
                    self._keys[key] = real
                    mine = self._by_user.get(row.user, set())
                    mine.discard(provisional)
                    mine.add(real)
        for key_id, closing in list(waiting.closing.items()):
            try:
                with self._db() as conn:
                    self._write_close(conn, closing)
            except sa.exc.SQLAlchemyError as e:
                why = f"the database refused it: {e}"
                self._refuse(closing.server, "close", closing.days, why)
            else:
                with self._lock:
                    self._cache_written(closing.server, closing.days)
            del waiting.closing[key_id]
        for server_id, d in list(waiting.deadlines.items()):
            try:
                with self._db() as conn:
                    self._write_deadline(conn, waiting.real(server_id), d)
            except sa.exc.SQLAlchemyError as e:
                self.log.error("gpucost hub: a grace deadline cannot be written: %s", e)
            del waiting.deadlines[server_id]
        while waiting.refused:
            r = waiting.refused[0]
            try:
                with self._db() as conn:
                    keep(
                        conn,
                        now_us=r.now_us,
                        source=r.source,
                        row=r.row,
                        reason=r.reason,
                        log=self.log,
                    )
            except sa.exc.SQLAlchemyError as e:
                self.log.error("gpucost hub: cannot quarantine %r (%s): %s", r.row, r.reason, e)
            waiting.refused.pop(0)

    def _refuse(
        self,
        server: OpenServer,
        source: str,
        days: Mapping[date, Day],
        reason: str,
        now: datetime | None = None,
    ) -> None:
        """Keep for quarantine what the database refused as bad data (never a spell)."""
        server.quarantined = True
        row = {
            "server_id": server.row.server_id,
            "user_name": server.row.user,
            "server_name": server.row.server_name,
            "days": {d.isoformat(): v for d, v in days.items()},
        }
        self.waiting.refused.append(
            QuarantinedRow(to_us(now or datetime.now(UTC)), source, row, reason)
        )

    def _deadline(self, server_id: int, deadline: DeadlineChange) -> None:
        real = self.waiting.real(server_id)
        try:
            if real < 0 or self.waiting.deadlines:
                raise HubLedgerDown("written after what waits")
            with self._db() as conn:
                self._write_deadline(conn, real, deadline)
        except HubLedgerDown:  # kept, in memory, until the database is back
            self.waiting.deadlines[real] = deadline

    @staticmethod
    def _write_deadline(conn: Connection, server_id: int, d: DeadlineChange) -> None:
        table = deadlines_table
        conn.execute(table.delete().where(table.c.server_id == server_id))
        if d.since is not None and d.stop_at is not None:
            conn.execute(
                table.insert().values(
                    server_id=server_id,
                    since_us=to_us(d.since),
                    stop_at_us=to_us(d.stop_at),
                    reason=d.reason[:2000],
                )
            )

    def _flushed_sums(self, today: date, wanted: set[str] | None) -> dict[str, list[int]]:
        """The database's (today, month) by user; while it cannot be read, the sums last
        read or written (see :meth:`_cache_written`)."""
        try:
            with self._db(write=False) as conn:
                flushed = sums_by_user(conn, today, wanted)
        except HubLedgerDown:
            cached = self._sums
            if cached is None:
                raise
            day, by_user = cached
            same_month = (day.year, day.month) == (today.year, today.month)
            return {
                u: [v[0] if day == today else 0, v[1] if same_month else 0]
                for u, v in by_user.items()
                if wanted is None or u in wanted
            }
        sums = {u: list(v) for u, v in flushed.items()}
        if wanted is None:
            self._sums = (today, {u: list(v) for u, v in sums.items()})
        return sums

    def _add_days(
        self, total: list[int], server: OpenServer, days: Mapping[date, Day], today: date
    ) -> None:
        """Add what ``days`` bill beyond what the database has for ``server`` to a
        (today, month) pair."""
        first = month_start(today)
        for d, v in days.items():
            delta = v.billed - server.flushed.get(d, NO_DAY).billed
            if first <= d <= today:
                total[1] += delta
                if d == today:
                    total[0] += delta

    def _cache_written(self, server: OpenServer, days: Mapping[date, Day]) -> None:
        """Keep the cached sums equal to the database's after a write (under the lock)."""
        if self._sums is not None:
            day, by_user = self._sums
            self._add_days(by_user.setdefault(server.row.user, [0, 0]), server, days, day)
