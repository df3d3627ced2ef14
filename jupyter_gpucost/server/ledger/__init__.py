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

This package is the ledger's one entry point (:class:`Ledger`); its parts are the tables
(``schema``), opening and moving a broken file aside (``opening``), the writes
(``writes``) and the queries and rollups read back (``queries``).

May import: ``jupyter_gpucost.core`` only; never another room of the server, the service
or the app (the headless tools read it too).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from sqlalchemy import Insert

from .opening import LedgerUnavailable, open_ledger
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
from .writes import GpuMinuteSums, Pending, add_bulk_spend, add_pending

__all__ = [
    "GpuMinuteSums",
    "Ledger",
    "LedgerUnavailable",
    "Pending",
    "Totals",
    "actions_table",
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


def default_url(data_dir: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(data_dir) / 'gpucost' / 'ledger.sqlite'}"


def new_session_id(started: datetime) -> str:
    return f"{started.strftime('%Y-%m-%dT%H:%M:%SZ')}-{secrets.token_hex(3)}"


class Ledger(LedgerReads):
    """One ledger database. Thread-safe: every write holds one lock.

    ``user`` (``JUPYTERHUB_USER``): the reads are that user's sessions only, so that a
    ledger shared by several users' servers gives each their own today and month.
    """

    def __init__(
        self,
        url: str,
        *,
        tz: tzinfo | None = None,
        log: logging.Logger | None = None,
        user: str | None = None,
    ) -> None:
        self.url = url
        self.tz = tz
        self.user = user or None
        self.log = log or logging.getLogger("jupyter_gpucost")
        self._lock = threading.Lock()
        opened = open_ledger(url, self.log)
        self.engine = opened.engine
        #: set when a broken ledger was moved aside: where it went
        self.reset_from: str | None = opened.reset_from

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
            add_pending(conn, session_id, pending)

    # -- cells -----------------------------------------------------------------

    def add_cell(self, session_id: str, record: dict[str, Any]) -> None:
        with self._lock, self.engine.begin() as conn:
            conn.execute(_cell_row(session_id, record))

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
        rate) rows and its cells; all of it is written, or none (a retry counts it once)."""
        with self._lock, self.engine.begin() as conn:
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
                conn.execute(_cell_row(session_id, record))

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

    # -- bulk (benchmarks) -----------------------------------------------------

    def bulk_spend(self, session_id: str, rows: Iterable[Sequence[int]]) -> None:
        """Insert (minute, cost, idle, rate) rows directly (benchmarks and imports)."""
        with self._lock, self.engine.begin() as conn:
            add_bulk_spend(conn, session_id, list(rows))


def _cell_row(session_id: str, record: dict[str, Any]) -> Insert:
    return cells_table.insert().values(
        session_id=session_id,
        cell_id=str(record.get("cell_id", "")),
        notebook_path=record.get("notebook_path"),
        kernel_id=record.get("kernel_id"),
        started=str(record.get("started", "")),
        ended=str(record.get("ended", "")),
        record=record,
    )
