"""The one place a SQLAlchemy engine is made, for both ledgers (the single-user server's
and the hub service's): SQLite in WAL mode with a busy timeout, or any other URL with
connections checked before use; and the one owner of "is this database error transient".
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

#: seconds a connection attempt to a database server may take
CONNECT_TIMEOUT_S = 10

#: SQLite's words for a spell, not for a damaged file or bad data: the disk is failing or
#: full, the file is locked, write-protected, or cannot be opened just now
_SQLITE_TRANSIENT = (
    "disk i/o error",
    "database is locked",
    "database table is locked",
    "database or disk is full",
    "readonly",
    "read-only",
    "unable to open database file",
)
#: SQLite reports a schema mistake as an OperationalError too: not a spell
_SQLITE_SCHEMA = ("no such table", "no such column", "syntax error", "already exists")


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; ``None`` for another database or SQLite in memory."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(str(parsed.database))


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` says the database cannot be reached or written *just now* (a lost
    or refused connection, a timeout, a locked, full, failing or read-only disk), so the
    same write may succeed later on a fresh connection. A row the database refuses (a
    constraint, a value out of range) or a file that is not a database is not transient.

    The one owner of this rule, for both ledgers."""
    if isinstance(error, sa.exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, sa.exc.DisconnectionError | sa.exc.TimeoutError):
        return True
    if isinstance(error, sa.exc.IntegrityError | sa.exc.DataError | sa.exc.ProgrammingError):
        return False
    cause: BaseException = getattr(error, "orig", None) or error
    text = str(cause).lower()
    if isinstance(cause, OSError):
        return True
    if isinstance(cause, sqlite3.Error):
        if any(word in text for word in _SQLITE_SCHEMA):
            return False
        return isinstance(cause, sqlite3.OperationalError) or any(
            word in text for word in _SQLITE_TRANSIENT
        )
    if isinstance(error, sa.exc.OperationalError | sa.exc.InterfaceError):
        # PostgreSQL (psycopg): a refused or lost connection, a shutdown, a timeout
        return True
    # PostgreSQL in a read-only transaction (a standby, default_transaction_read_only)
    return isinstance(error, sa.exc.InternalError) and "read-only" in text


def create_engine(url: str) -> Engine:
    """An engine on ``url``; a SQLite file's folder must exist (the caller makes it).

    Connections are checked before use (``pool_pre_ping``), so one a database server
    dropped is replaced, not handed out; callers dispose of the pool after a transient
    error (a SQLite connection opened while the file was write-protected stays read-only)."""
    if sqlite_path(url) is None:
        parsed = sa.engine.make_url(url)
        connect: dict[str, Any] = {}
        if parsed.get_backend_name() == "postgresql":
            connect["connect_timeout"] = CONNECT_TIMEOUT_S
        return sa.create_engine(url, pool_pre_ping=True, connect_args=connect)
    engine = sa.create_engine(url, pool_pre_ping=True, connect_args={"timeout": 10})

    @sa.event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def integrity_problem(path: Path) -> str | None:
    """What SQLite's ``PRAGMA integrity_check`` finds wrong with the file at ``path``, read
    read-only; ``None`` when it says ``ok``. A file that cannot be opened as a database at
    all is damaged too; a file that cannot be read just now (a failing disk, a lock)
    raises :class:`sqlite3.OperationalError`."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.OperationalError as e:
        if any(word in str(e).lower() for word in _SQLITE_TRANSIENT):
            raise
        return str(e)
    except sqlite3.DatabaseError as e:  # "file is not a database", "malformed"
        return str(e)
    finally:
        conn.close()
    found = [str(r[0]) for r in rows]
    return None if found == ["ok"] else "; ".join(found)[:500]


class Spell:
    """Whether a ledger's database answers, since when it has not, and when to try it
    again (backing off from 1 s to 30 s): the one record of a spell, for both ledgers."""

    FIRST_RETRY_S = 1.0
    LONGEST_RETRY_S = 30.0

    def __init__(self) -> None:
        self.down_since: datetime | None = None
        self.error: str | None = None
        #: failures since the spell began (1: it began with the latest)
        self.failures = 0
        self._retry_at = 0.0
        self._retry_s = self.FIRST_RETRY_S

    def due(self) -> bool:
        """Whether the database may be tried now (never while a spell waits its retry)."""
        return self.down_since is None or time.monotonic() >= self._retry_at

    def retry_now(self) -> None:
        self._retry_at = 0.0

    def failed(self, error: BaseException, engine: Engine | None) -> bool:
        """Record ``error`` when it is a spell (:func:`is_transient`): the pool is emptied,
        so the next try opens fresh connections (one opened while the file was
        write-protected stays read-only for its whole life). False for any other error."""
        if not is_transient(error):
            return False
        if engine is not None:
            engine.dispose()
        said = str(getattr(error, "orig", None) or error).strip().splitlines()
        self.down(said[0][:300] if said else type(error).__name__)
        return True

    def down(self, error: str) -> None:
        """Record a spell already known to be one (``error``: why, for people)."""
        self.error = error
        if self.down_since is None:
            self.down_since = datetime.now(UTC)
            self.failures = 0
            self._retry_s = self.FIRST_RETRY_S
        else:
            self._retry_s = min(self._retry_s * 2, self.LONGEST_RETRY_S)
        self.failures += 1
        self._retry_at = time.monotonic() + self._retry_s

    def back(self) -> datetime | None:
        """The database answered: the spell is over. Returns since when it had lasted."""
        since, self.down_since, self.error, self.failures = self.down_since, None, None, 0
        return since
