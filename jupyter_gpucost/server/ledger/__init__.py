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

A ledger that cannot be reached or written just now (a database server down, a full or
failing disk, a lock, a write-protected file) is *offline*: nothing is moved aside, every
call raises :class:`LedgerOffline` at once until the next try (backing off from 1 s to
30 s), a fresh connection is made for each try, and the caller keeps what it has not
written. Only a SQLite file that ``PRAGMA integrity_check`` says is damaged (or one from a
newer version) is moved aside, and :attr:`Ledger.reset` says where and what it held. A
ledger that cannot be used at all (a bad URL) is :class:`LedgerUnavailable`. The server
never fails because of its ledger.

This package is the ledger's one entry point (:class:`Ledger`); its parts are the tables
(``schema``), opening and moving a damaged file aside (``opening``), the writes
(``writes``), the queries and rollups read back (``queries``) and the journal of what a
server could not write to a remote ledger (``journal``); its settings of ``c.GpuCost``
(``traits``), read by the app.

May import: ``jupyter_gpucost.core`` only; never another room of the server, the service
or the app (the headless tools read it too).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ...core.machine import Machine
from ...core.sql import Spell
from .bill import (
    BillCache,
    BillFigure,
    LedgerMachine,
    ReconciledDay,
    SessionHour,
    bill_figure,
    bill_json,
    billed_rate,
    ledger_machines,
    reconciled_days,
    record_machine,
    replace_reconciled,
    session_hours,
)
from .opening import LedgerOffline, LedgerUnavailable, Reset, open_ledger
from .queries import LedgerReads, Totals
from .schema import (
    actions_table,
    cells_table,
    gpu_minutes_table,
    metadata,
    minute_of,
    quarter_of,
    quarters_table,
    sessions_table,
    spend_table,
)
from .writes import GpuMinuteSums, Pending, add_bulk_spend, add_pending, merged

__all__ = [
    "BillCache",
    "BillFigure",
    "GpuMinuteSums",
    "Ledger",
    "LedgerMachine",
    "LedgerOffline",
    "LedgerUnavailable",
    "Pending",
    "ReconciledDay",
    "Reset",
    "SessionHour",
    "Totals",
    "actions_table",
    "bill_figure",
    "bill_json",
    "billed_rate",
    "cells_table",
    "default_url",
    "gpu_minutes_table",
    "metadata",
    "minute_of",
    "new_session_id",
    "quarter_of",
    "quarters_table",
    "sessions_table",
    "spend_table",
]


#: cells and budget actions kept in memory while the ledger cannot be reached, at most
MAX_LATER = 10_000


def default_url(data_dir: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(data_dir) / 'gpucost' / 'ledger.sqlite'}"


def new_session_id(started: datetime) -> str:
    return f"{started.strftime('%Y-%m-%dT%H:%M:%SZ')}-{secrets.token_hex(3)}"


class Ledger(LedgerReads):
    """One ledger database. Thread-safe: every write holds one lock.

    ``user`` (``JUPYTERHUB_USER``): the reads are that user's sessions only, so that a
    ledger shared by several users' servers gives each their own today and month.

    ``offline_ok``: a ledger that cannot be reached when it is made is offline (and tried
    again later) instead of raising :class:`LedgerOffline`.
    """

    def __init__(
        self,
        url: str,
        *,
        tz: tzinfo | None = None,
        log: logging.Logger | None = None,
        user: str | None = None,
        offline_ok: bool = False,
    ) -> None:
        self.url = url
        self.tz = tz
        self.user = user or None
        self.log = log or logging.getLogger("jupyter_gpucost")
        self._lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._engine: Engine | None = None
        #: a damaged ledger moved aside when this one was opened: where, what it held
        self.reset: Reset | None = None
        #: since when the ledger cannot be reached (``None``: it can), and why
        #: whether the database answers, since when it has not, when to try it again
        self.spell = Spell()
        #: cells and budget actions not written yet (the ledger could not be reached)
        self._later: list[tuple[sa.Table, dict[str, Any]]] = []
        #: sessions started here: (started, user), written with their first flush when the
        #: ledger could not be reached at their start
        self._starts: dict[str, tuple[datetime, str | None]] = {}
        try:
            self._open()
        except LedgerOffline:
            if not offline_ok:
                raise

    @property
    def reset_from(self) -> str | None:
        """Where a damaged ledger was moved (``None``: none was)."""
        return None if self.reset is None else self.reset.path

    @property
    def safe_url(self) -> str:
        """The URL, its password hidden."""
        return sa.engine.make_url(self.url).render_as_string(hide_password=True)

    @property
    def down_since(self) -> datetime | None:
        """Since when the ledger cannot be reached (``None``: it can)."""
        return self.spell.down_since

    @property
    def error(self) -> str | None:
        """Why it cannot be reached, in the database's words."""
        return self.spell.error

    def _open(self) -> Engine:
        try:
            opened = open_ledger(self.url, self.log)
        except LedgerOffline as e:
            self.spell.down(str(e))
            self._told_down()
            raise
        self._engine = opened.engine
        if opened.reset is not None:
            self.reset = opened.reset
        return opened.engine

    @property
    def engine(self) -> Engine:
        """The engine, opened now if the ledger could not be reached before; raises
        :class:`LedgerOffline` while it cannot, without trying before the next retry."""
        with self._open_lock:
            if self._engine is not None:
                return self._engine
            if not self.spell.due():
                raise LedgerOffline(self.spell.error or "the ledger cannot be reached")
            return self._open()

    def retry_now(self) -> None:
        """Let the next call try the ledger at once (a clean stop's last tries)."""
        self.spell.retry_now()

    def _told_down(self) -> None:
        if self.spell.failures == 1:  # once per spell
            self.log.warning(
                "jupyter-gpucost: the ledger %s cannot be reached (%s); what is not written is "
                "kept and written when it is back",
                self.safe_url,
                self.spell.error,
            )

    def _came_back(self) -> None:
        since = self.spell.back()
        if since is not None:
            self.log.info(
                "jupyter-gpucost: the ledger %s is back (unreachable since %s)",
                self.safe_url,
                since.isoformat(timespec="seconds"),
            )

    def _failed(self, e: sa.exc.SQLAlchemyError) -> None:
        """Turn a spell into :class:`LedgerOffline` (fresh connections for the next try);
        other errors are raised as they are."""
        if self.spell.failed(e, self._engine):
            self._told_down()
            raise LedgerOffline(self.spell.error or "") from e

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """One transaction under the write lock; a spell raises :class:`LedgerOffline`."""
        with self._lock:
            engine = self.engine
            later = list(self._later)
            try:
                with engine.begin() as conn:
                    # cells and actions kept while the ledger could not be reached, first
                    for table, values in later:
                        conn.execute(table.insert().values(**values))
                    yield conn
            except sa.exc.SQLAlchemyError as e:
                self._failed(e)
                raise
            del self._later[: len(later)]
            self._came_back()

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        engine = self.engine
        try:
            with engine.connect() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as e:
            self._failed(e)
            raise

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    # -- sessions --------------------------------------------------------------

    def start_session(self, session_id: str, started: datetime, user: str | None) -> None:
        """Start a session's row; when the ledger cannot be reached it is written with the
        session's first flush (and :class:`LedgerOffline` is raised)."""
        self._starts[session_id] = (started, user)
        with self._writing() as conn:
            self._ensure_session(conn, session_id)

    def _ensure_session(self, conn: Connection, session_id: str) -> float | None:
        """The session's ``last_unix_s`` in the ledger, its row inserted when there is none
        yet and it was started here (``None``: no row)."""
        c = sessions_table.c
        last = conn.execute(sa.select(c.last_unix_s).where(c.id == session_id)).scalar()
        if last is not None:
            return float(last)
        start = self._starts.get(session_id)
        if start is None:
            return None
        started, user = start
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
        return started.timestamp()

    def remember_start(self, session_id: str, started: datetime, user: str | None) -> None:
        """Know a session's start without writing it (a journal read back at start-up)."""
        self._starts.setdefault(session_id, (started, user))

    def end_session(self, session_id: str, ended: datetime) -> None:
        with self._writing() as conn:
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
        with self._writing() as conn:
            add_pending(conn, session_id, pending)

    def write(self, session_id: str, queue: list[Pending]) -> None:
        """Write, in one transaction, every part of ``queue`` the ledger does not have yet,
        so a flush whose commit was lost with the connection is never counted twice.

        The parts are what successive flushes counted, oldest first, each ending later
        than the one before. A part ending at or before the session's ``last_unix_s`` was
        written by a flush that failed only after its commit: it is dropped. The rest are
        folded into one part before they are written, so whether this transaction
        commits or not, ``queue`` is left holding exactly what the ledger lacks (and at
        most two parts)."""
        queue[:] = [p for p in queue if not p.empty()]
        if not queue:
            return
        if len(queue) > 2:
            # only the first part can have been in a transaction (each try folds what it
            # writes into one part): the later ones are folded now, so a long spell keeps
            # two parts, in memory and in the journal
            queue[1:] = [merged(queue[1:])]
        with self._writing() as conn:
            last = self._ensure_session(conn, session_id)
            if last is not None:
                queue[:] = [p for p in queue if p.last_unix_s > last]
            if len(queue) > 1:
                queue[:] = [merged(queue)]
            for part in queue:
                add_pending(conn, session_id, part)

    # -- cells -----------------------------------------------------------------

    def add_cell(self, session_id: str, record: dict[str, Any]) -> None:
        """Keep a cell record (while the ledger cannot be reached: in memory, written with
        the next write that reaches it)."""
        self._insert(cells_table, _cell_values(session_id, record))

    def add_run(
        self,
        session_id: str,
        started: datetime,
        ended: datetime,
        user: str | None,
        spend: Sequence[Sequence[int]],
        cells: Sequence[dict[str, Any]],
    ) -> None:
        """A whole headless run in one transaction: its session, its (minute, cost, idle,
        rate) rows and its cells; all of it is written, or none (a retry counts it once).
        A spell raises :class:`LedgerOffline`: the runner keeps the run for its next start."""
        with self._writing() as conn:
            known = sessions_table.select().where(sessions_table.c.id == session_id)
            if conn.execute(known).first() is not None:
                return  # written before (a retry of a run kept for later)
            conn.execute(
                sessions_table.insert().values(
                    id=session_id,
                    started_unix_s=started.timestamp(),
                    last_unix_s=ended.timestamp(),
                    ended_unix_s=ended.timestamp(),
                    user=user,
                    cost_micro_usd=0,
                    idle_micro_usd=0,
                )
            )
            if spend:
                add_bulk_spend(conn, session_id, list(spend))
            for record in cells:
                conn.execute(cells_table.insert().values(**_cell_values(session_id, record)))

    def add_action(self, session_id: str, record: dict[str, Any]) -> None:
        """Keep what a budget did (an audit trail across sessions; kept like a cell)."""
        self._insert(
            actions_table,
            {
                "session_id": session_id,
                "at": str(record.get("at", ""))[:40],
                "action": str(record.get("action", ""))[:32],
                "record": record,
            },
        )

    def _insert(self, table: sa.Table, values: dict[str, Any]) -> None:
        try:
            with self._writing() as conn:
                conn.execute(table.insert().values(**values))
        except LedgerOffline:
            with self._lock:
                if len(self._later) < MAX_LATER:
                    self._later.append((table, values))

    # -- the bill ----------------------------------------------------------------

    def record_machine(self, session_id: str, machine: Machine, currency: str) -> None:
        """Keep the machine a session runs on (what a bill is matched by)."""
        with self._writing() as conn:
            record_machine(conn, session_id, machine, currency)

    def machines(self) -> list[LedgerMachine]:
        """The machines the ledger recorded sessions on, their spans and daily estimates."""
        with self._reading() as conn:
            return ledger_machines(conn)

    def keep_reconciled(self, source: str, days: list[ReconciledDay], at: datetime) -> None:
        """Keep a bill's days in one transaction (all of them, or none)."""
        with self._writing() as conn:
            replace_reconciled(conn, source, days, at)

    def reconciled(self) -> list[ReconciledDay]:
        with self._reading() as conn:
            return reconciled_days(conn)

    def session_hours(self, since_unix_s: int | None = None) -> list[SessionHour]:
        """Every session's cost per hour, with its user and machine (FOCUS export)."""
        with self._reading() as conn:
            return session_hours(conn, since_unix_s)

    # -- bulk (benchmarks) -----------------------------------------------------

    def bulk_spend(self, session_id: str, rows: Iterable[Sequence[int]]) -> None:
        """Insert (minute, cost, idle, rate) rows directly (benchmarks and imports)."""
        with self._writing() as conn:
            add_bulk_spend(conn, session_id, list(rows))


def _cell_values(session_id: str, record: dict[str, Any]) -> dict[str, object]:
    """A cell record's row in the cells table."""
    return {
        "session_id": session_id,
        "cell_id": str(record.get("cell_id", "")),
        "notebook_path": record.get("notebook_path"),
        "kernel_id": record.get("kernel_id"),
        "started": str(record.get("started", "")),
        "ended": str(record.get("ended", "")),
        "record": record,
    }
