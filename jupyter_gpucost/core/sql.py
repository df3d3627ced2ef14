"""The one place a SQLAlchemy engine is made, for both ledgers (the single-user server's
and the hub service's): SQLite in WAL mode with a busy timeout, or any other URL with
connections checked before use; and the one owner of "is this database error transient".
"""

from __future__ import annotations

import sqlite3
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
