"""The hub ledger: every server session the hub service has seen, what it was allocated
and what it reported, by local day, in SQLite (WAL, a file of its own) or any
SQLAlchemy URL (PostgreSQL through psycopg 3: ``postgresql+psycopg://...``).

May import: the hub's core types and rules (:mod:`..model`, :mod:`..accounting`) and
``jupyter_gpucost.core``; never another room of the hub, the service or the app.

How it keeps the bill (:class:`HubLedger` implements :class:`~..model.HubLedgerApi`):

* Each running server is held in memory (:mod:`.state`) with what the database has for it.
  Its allocation is a pure function of its start and rate, so it is computed, not
  accumulated; reports only add what the server's meter counted since its previous report.
* :meth:`HubLedger.flush` writes, in one transaction, every day whose figures changed and
  every running server's ``last_seen``: 1,000 servers reporting every 10 s cost one
  transaction per flush, not 100 writes a second.
* A session's bill is ``max(allocated, reported)``, the report counted only up to what
  the server's GPUs could physically cost (:class:`~..model.ReportCeiling`); a day's bill
  is that session bill's growth over the day (:mod:`.state`), and never goes down: a report
  below the allocation does not lower it, and a report below an earlier one (out of order,
  or a meter gone back) takes nothing back and adds nothing.
* No figure outside what the ledger may hold is ever written; one found when the ledger
  is opened is moved to quarantine (:mod:`.quarantine`), and a flush that cannot write
  one server (bad data) writes the others. Sums are exact and cannot overflow.
* A spell of the database (:func:`~jupyter_gpucost.core.sql.is_transient`) is never bad
  data: nothing is quarantined, the bill goes on from memory (servers opened and closed,
  deadlines, totals from the sums last known) and is written when it is back (:mod:`.outage`,
  :mod:`.catchup`); :class:`~..model.HubLedgerDown` says so meanwhile.
* :meth:`HubLedger.totals` and :meth:`HubLedger.all_totals` are exact up to ``now``: the
  database's sums (as of the last flush) plus, for each running server, what it has
  allocated and reported since. They are the user's own: rows are selected by user name.
* Killed hard (SIGKILL), the ledger loses what came after its last flush: reports received
  since then (a server's next report, being cumulative, brings most of it back) and, for a
  server that stopped while the service was down, the time after its ``last_seen``. On the
  next start, :meth:`HubLedger.running` gives back the servers that were running, with
  ``last_seen`` = the last flush; the service closes those the Hub no longer lists at the
  time the Hub says they stopped (never before ``last_seen``), and the others go on being
  billed from their start.

One process writes a ledger (the service); pages and tools may read it at the same time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path

import sqlalchemy as sa

from ...core.billing import BillingRule
from ...core.currency import symbol as currency_symbol
from ...core.hub_protocol import SpendReport
from ...core.money import exact
from ..accounting import day_of, midnight, month_start
from ..model import (
    GroupTotals,
    HubLedgerDown,
    InterruptionTotals,
    Rate,
    ReportCeiling,
    ServerInfo,
    ServerRow,
    UserTotals,
    pooled,
)
from .catchup import CatchUp
from .interruptions import USER_DAY_LIMIT, InterruptionStore
from .outage import Closing, DeadlineChange, Outage, Waiting
from .quarantine import quarantine_bad_rows
from .queries import daily_rows, load_open, session_rows, span_rows
from .schema import (
    daily_table,
    deadlines_table,
    from_us,
    open_engine,
    rates_table,
    safe_url,
    servers_table,
    to_us,
)
from .state import NO_DAY, Day, OpenServer
from .writes import write

__all__ = [
    "LEDGER_CURRENCY",
    "HubLedger",
    "HubLedgerDown",
    "daily_table",
    "default_url",
    "rates_table",
    "servers_table",
]

_s = servers_table.c
_d = daily_table.c
#: running servers whose figures a sum adds up under the lock at a time
TOTALS_CHUNK = 100
#: the currency the hub ledger keeps its amounts in (its ``*_usd`` names say so): the hub
#: refuses prices and bills in another
LEDGER_CURRENCY = "USD"


def default_url(data_dir: str | os.PathLike[str]) -> str:
    """The hub ledger's SQLite file in the service's data directory."""
    return f"sqlite:///{Path(data_dir) / 'gpucost-hub.sqlite'}"


class HubLedger(CatchUp):
    """One hub ledger. Thread-safe: reports may come in while a flush writes.

    ``tz`` is the time zone days and months are cut in; ``billing`` the provider's rule
    (granularity, minimum charge) the allocation is billed under; ``ceiling`` the most a
    server's reports can bill.
    """

    def __init__(
        self,
        url: str,
        *,
        tz: tzinfo = UTC,
        billing: BillingRule | None = None,
        ceiling: ReportCeiling | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.url = safe_url(url)
        self.tz = tz
        self.billing = billing or BillingRule()
        self.ceiling = ceiling or ReportCeiling()
        self.log = log or logging.getLogger("jupyter_gpucost.hub")
        self.engine = open_engine(url, str(getattr(tz, "key", tz)), self.log)
        with self.engine.begin() as conn:
            quarantine_bad_rows(conn, to_us(datetime.now(UTC)), self.log)
        #: guards the servers in memory (held briefly, never during I/O)
        self._lock = threading.Lock()
        #: held while the database and memory must be seen together (writes, totals)
        self._view = threading.Lock()
        self._open: dict[int, OpenServer] = {}
        self._keys: dict[tuple[str, str, int], int] = {}
        self._by_user: dict[str, set[int]] = {}
        #: the spot interruptions servers reported (shown, never billed)
        self.interruptions = InterruptionStore(self.engine)
        with self.engine.connect() as conn:
            for server in load_open(conn, _s.stopped_us.is_(None), self.ceiling):
                self._track(server)
        #: whether the database answers; what waits in memory while it does not
        self.outage = Outage(self.engine, self.log)
        self.waiting = Waiting()
        #: the database's sums by user (today, month) as last read or written: the totals
        #: while it cannot be read
        self._sums: tuple[date, dict[str, list[int]]] | None = None
        self._flushed_sums(day_of(datetime.now(UTC), tz), None)

    def close(self) -> None:
        """Release the database (what is not flushed is not written)."""
        self.engine.dispose()

    # -- servers ------------------------------------------------------------------------

    def _track(self, server: OpenServer) -> None:
        row = server.row
        self._open[row.server_id] = server
        self._keys[(row.user, row.server_name, to_us(row.started))] = row.server_id
        self._by_user.setdefault(row.user, set()).add(row.server_id)

    def _untrack(self, server_id: int) -> None:
        server = self._open.pop(server_id)
        row = server.row
        self._keys.pop((row.user, row.server_name, to_us(row.started)), None)
        ids = self._by_user.get(row.user, set())
        ids.discard(server_id)
        if not ids:
            self._by_user.pop(row.user, None)

    def open_server(self, server: ServerInfo, rate: Rate) -> ServerRow:
        """This server session's row (created on first sight; the same one again later;
        reopened if it had been closed). A session keeps the rate it was opened with."""
        key = (server.user, server.server_name, to_us(server.started))
        with self._view:
            with self._lock:
                known = self._keys.get(key)
                if known is not None:
                    return self._open[known].row
            try:
                found = self._insert_or_reopen(server, rate, key)
            except HubLedgerDown:  # billed from memory; its row is made when the db is back
                opened = OpenServer(
                    ServerRow(
                        self.waiting.provisional_id(),
                        server.user,
                        server.server_name,
                        server.started,
                        None,
                        server.started,
                        server.profile,
                        rate,
                    ),
                    self.ceiling.rate(rate),
                )
                with self._lock:
                    self.waiting.opened[opened.row.server_id] = opened
                    self._track(opened)
                return opened.row
            with self._lock:
                self._track(found)
            return found.row

    def close_server(self, server_id: int, stopped: datetime) -> None:
        """The session ended at ``stopped``: its bill is written up to then (never below
        what was already written) and it is no longer running. Unknown ids are ignored."""
        with self._view:
            with self._lock:
                server = self._open.get(self.waiting.real(server_id))
                if server is None:
                    return
                closing = Closing(
                    server,
                    server.changes(stopped, self.billing, self.tz),
                    stopped,
                    max(server.row.last_seen, stopped),
                    server.last,
                )
            try:
                if server.row.server_id < 0 or self.waiting:
                    raise HubLedgerDown("written after what waits")  # in order
                with self._db() as conn:
                    self._write_close(conn, closing)
            except HubLedgerDown:  # written when the database is back
                with self._lock:
                    self.waiting.closing[server.row.server_id] = closing
                    self.waiting.deadlines.pop(server.row.server_id, None)
                    self._untrack(server.row.server_id)
                return
            with self._lock:
                self._cache_written(server, closing.days)
                self._untrack(server.row.server_id)

    def unreachable_since(self) -> datetime | None:
        return self.outage.down_since

    def running(self) -> list[ServerRow]:
        with self._lock:
            return [self._open[i].row for i in sorted(self._open)]

    # -- reports and flushes ----------------------------------------------------------

    def add_report(self, server_id: int, report: SpendReport, received: datetime) -> None:
        """Keep a running server's report (written at the next flush). ``KeyError`` when
        the server is not running."""
        with self._lock:
            server = self._open.get(self.waiting.real(server_id))
            if server is None:
                raise KeyError(f"server {server_id} is not running")
            over = server.add_report(report, received, self.billing, self.tz)
            first = over and not server.capped
            server.capped = server.capped or over
        if self.interruptions.add(
            server.row.user, server.row.server_name, report.interruptions, received
        ):
            self.log.warning(
                "gpucost hub: %s's servers reported more new interruptions today than a "
                "machine has (%d): the rest are not recorded",
                server.row.user,
                USER_DAY_LIMIT,
            )
        if first:
            self.log.warning(
                "gpucost hub: %s/%s reported %d micro-dollars, more than its GPUs could cost "
                "(%s GPUs at %s an hour since it started): it is billed at most that",
                server.row.user,
                server.row.server_name,
                report.cost_micro_usd,
                server.ceiling.allocation.count,
                exact(server.ceiling.usd_per_gpu_hour, currency_symbol(LEDGER_CURRENCY)),
            )

    def flush(self, now: datetime) -> None:
        """Write every running server's changed days up to ``now``, its latest report and
        ``last_seen = now``, in one transaction. A server whose figures cannot be written
        is quarantined and logged; the others are written all the same. The reported
        interruptions are written first, in a transaction of their own."""
        self.outage.retry_now()
        self._write_waiting()
        try:
            self.interruptions.flush()
        except sa.exc.SQLAlchemyError as e:  # kept for the next flush; never stops the bill's
            self.log.error("gpucost hub: the reported interruptions are not written: %s", e)
        with self._view:
            with self._lock:
                batch, refused = [], []
                for s in self._open.values():
                    days = s.changes(now, self.billing, self.tz)
                    if s.quarantined:
                        continue
                    if all(v.in_range() for v in days.values()):
                        batch.append((s, days))
                    else:
                        refused.append((s, days))
                reports = [(s.row.server_id, s.last) for s, _ in batch if s.report_pending]
                for s, _ in batch:
                    s.report_pending = False
            for server, days in refused:
                self._quarantine(server, days, now, "a figure outside what the ledger holds")
            try:
                with self._db() as conn:
                    write(conn, batch, reports, now)
            except sa.exc.SQLAlchemyError as e:
                # bad data, not a spell: one server's row the database refuses must not
                # stop the others'
                self.log.error("gpucost hub: the flush failed (%s); writing server by server", e)
                for at, one in enumerate(batch):
                    mine = [(i, r) for i, r in reports if i == one[0].row.server_id]
                    try:
                        with self._db() as conn:
                            write(conn, [one], mine, now)
                    except sa.exc.SQLAlchemyError as why:
                        self._quarantine(one[0], one[1], now, f"the database refused it: {why}")
                        continue
                    except HubLedgerDown:
                        with self._lock:
                            for s, _ in batch[at:]:
                                s.report_pending = s.report_pending or any(
                                    i == s.row.server_id for i, _ in reports
                                )
                        raise
                    with self._lock:
                        self._cache_written(one[0], one[1])
                        one[0].written(one[1], now)
                return
            except BaseException:
                with self._lock:
                    for i, _ in reports:
                        if i in self._open:
                            self._open[i].report_pending = True
                raise
            with self._lock:
                for server, days in batch:
                    self._cache_written(server, days)
                    server.written(days, now)
            self.outage.back()

    def _quarantine(
        self, server: OpenServer, days: Mapping[date, Day], now: datetime, reason: str
    ) -> None:
        """Stop writing ``server``; its figures wait in memory for the quarantine (written
        first thing at the next flush, and kept until it can be)."""
        with self._lock:
            self._refuse(server, "flush", days, reason, now)
        with contextlib.suppress(HubLedgerDown):
            self._write_waiting()

    # -- grace deadlines ----------------------------------------------------------------

    def save_deadline(
        self, server_id: int, since: datetime, stop_at: datetime, reason: str
    ) -> None:
        """Keep a server's grace deadline (a restart of the service keeps it)."""
        self._deadline(server_id, DeadlineChange(since, stop_at, reason))

    def clear_deadline(self, server_id: int) -> None:
        self._deadline(server_id, DeadlineChange())

    def deadlines(self) -> dict[int, tuple[datetime, datetime, str]]:
        """server_id → (since, stop_at, reason) of every kept grace deadline."""
        with self._db(write=False) as conn:
            rows = conn.execute(sa.select(deadlines_table)).mappings().all()
        return {
            int(r["server_id"]): (from_us(r["since_us"]), from_us(r["stop_at_us"]), r["reason"])
            for r in rows
        }

    # -- totals -------------------------------------------------------------------------

    def _totals(self, now: datetime, users: Iterable[str] | None) -> dict[str, UserTotals]:
        """The database's sums plus each running server's figures since the last flush."""
        today = day_of(now, self.tz)
        first = month_start(today)
        wanted = None if users is None else set(users)
        with self._view:
            sums = self._flushed_sums(today, wanted)
            with self._lock:
                if wanted is None:
                    ids = list(self._open)
                else:
                    ids = [i for u in wanted for i in self._by_user.get(u, ())]
                # servers closed while the database could not be reached: not written yet
                for c in self.waiting.closing.values():
                    user = c.server.row.user
                    if wanted is None or user in wanted:
                        self._add_days(sums.setdefault(user, [0, 0]), c.server, c.days, today)
            sessions: dict[str, dict[int, int]] = {}
            # the lock a chunk at a time: reports (on the event loop) wait for at most one
            # chunk's figures, not every running server's
            for at in range(0, len(ids), TOTALS_CHUNK):
                with self._lock:
                    for i in ids[at : at + TOTALS_CHUNK]:
                        server = self._open.get(i)
                        if server is None:  # closed meanwhile, by the poll's thread
                            continue
                        user = server.row.user
                        figures = sum_today = sum_month = 0
                        for d, v in server.days(now, self.billing, self.tz).items():
                            figures += v.billed
                            if first <= d <= today:
                                delta = v.billed - server.flushed.get(d, NO_DAY).billed
                                sum_month += delta
                                if d == today:
                                    sum_today += delta
                        total = sums.setdefault(user, [0, 0])
                        total[0] += sum_today
                        total[1] += sum_month
                        sessions.setdefault(user, {})[i] = figures
        return {u: UserTotals(u, t, m, sessions.get(u, {})) for u, (t, m) in sorted(sums.items())}

    def interruptions_by_user(self, since: date) -> dict[str, InterruptionTotals]:
        self.outage.check()
        try:
            return self.interruptions.by_user(midnight(since, self.tz))
        except sa.exc.SQLAlchemyError as e:
            self.outage.failed(e)
            raise

    def totals(self, user: str, now: datetime) -> UserTotals:
        """``user``'s own today / this month, exact up to ``now``, and the bill of each of
        their running servers' sessions."""
        return self._totals(now, [user]).get(user) or UserTotals(user, 0, 0, {})

    def all_totals(self, now: datetime) -> dict[str, UserTotals]:
        """Every user with spend this month or a running server, exact up to ``now``."""
        return self._totals(now, None)

    def group_totals(
        self, groups: Mapping[str, Iterable[str]], now: datetime
    ) -> dict[str, GroupTotals]:
        members = {g: set(users) for g, users in groups.items()}
        everyone = {u for users in members.values() for u in users}
        return pooled(members, self._totals(now, everyone) if everyone else {})

    # -- pages ------------------------------------------------------------------------

    def daily(
        self, since: date, user: str | None = None, now: datetime | None = None
    ) -> list[tuple[date, str, int]]:
        """(day, user, billed micro-dollars) from ``since``, for ``user`` or everyone; as of
        the last flush, or with ``now`` up to then."""
        with self._view:
            with self._db(write=False) as conn:
                rows = daily_rows(conn, since, user)
            if now is None:
                return rows
            sums = {(d, u): v for d, u, v in rows}
            with self._lock:
                for server in self._open.values():
                    if user is not None and server.row.user != user:
                        continue
                    for d, v in server.days(now, self.billing, self.tz).items():
                        delta = v.billed - server.flushed.get(d, NO_DAY).billed
                        if d >= since and delta:
                            key = (d, server.row.user)
                            sums[key] = sums.get(key, 0) + delta
        return [(d, u, v) for (d, u), v in sorted(sums.items())]

    def spans(self, users: Iterable[str], since: datetime, now: datetime) -> list[ServerRow]:
        """The server sessions of ``users`` that ran after ``since`` (allowances in
        GPU-hours): a running one's stop is ``None``."""
        with self._view, self._db(write=False) as conn:
            return span_rows(conn, set(users), to_us(since), to_us(now))

    def sessions(
        self, user: str, limit: int = 50, now: datetime | None = None
    ) -> list[dict[str, object]]:
        """``user``'s server sessions, newest first; as of the last flush, or with ``now``
        the running ones up to then."""
        with self._view:
            with self._db(write=False) as conn:
                rows = session_rows(conn, user, limit)
            if now is None:
                return rows
            with self._lock:
                for row in rows:
                    server = self._open.get(int(str(row["server_id"])))
                    if server is None:
                        continue
                    days = server.days(now, self.billing, self.tz).values()
                    row["allocated_micro_usd"] = sum(v.allocated for v in days)
                    row["reported_micro_usd"] = sum(v.reported for v in days)
                    row["idle_micro_usd"] = sum(v.idle for v in days)
                    row["billed_micro_usd"] = sum(v.billed for v in days)
        return rows
