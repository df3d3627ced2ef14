"""Faults injected into a real SQLite ledger, at the DB-API edge where SQLite itself
reports them: a disk that fails or fills (``disk I/O error``, ``database or disk is
full``) and a read-only spell.

The tests run as root, whom file permissions do not stop; so a read-only spell is what a
hub user whose ledger file or folder is write-protected gets from SQLite: a connection
opened in the spell is opened read-only (``PRAGMA query_only``; SQLite's own
``SQLITE_READONLY`` answer, "attempt to write a readonly database", to every write) and
stays so for as long as it lives, while connections opened before it go on writing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.pool import Pool

_WRITES = ("INSERT", "UPDATE", "DELETE", "CREATE")


@contextmanager
def failing_disk(message: str = "disk I/O error", *, connect: bool = True) -> Iterator[None]:
    """Every SQLite write fails with ``message`` (and, with ``connect``, every new
    connection), as SQLite reports a failing or full disk."""

    def on_connect(_dbapi: Any, _record: Any) -> None:
        raise sqlite3.OperationalError(message)

    def on_execute(
        _conn: Any, _cursor: Any, statement: str, params: Any, _context: Any, _many: bool
    ) -> tuple[str, Any]:
        if statement.lstrip().upper().startswith(_WRITES):
            raise sqlite3.OperationalError(message)
        return statement, params

    if connect:
        sa.event.listen(Pool, "connect", on_connect)
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", on_execute, retval=True)
    try:
        yield
    finally:
        if connect:
            sa.event.remove(Pool, "connect", on_connect)
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", on_execute)


@contextmanager
def read_only_spell() -> Iterator[None]:
    """Connections opened meanwhile are read-only for their whole life."""

    def on_connect(dbapi: Any, _record: Any) -> None:
        if isinstance(dbapi, sqlite3.Connection):
            dbapi.execute("PRAGMA query_only = ON")

    sa.event.listen(Pool, "connect", on_connect)
    try:
        yield
    finally:
        sa.event.remove(Pool, "connect", on_connect)
