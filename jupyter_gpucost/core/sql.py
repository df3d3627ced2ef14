"""The one place a SQLAlchemy engine is made, for both ledgers (the single-user server's
and the hub service's): SQLite in WAL mode with a busy timeout, or any other URL with
connections checked before use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; ``None`` for another database or SQLite in memory."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(str(parsed.database))


def create_engine(url: str) -> Engine:
    """An engine on ``url``; a SQLite file's folder must exist (the caller makes it)."""
    if sqlite_path(url) is None:
        return sa.create_engine(url, pool_pre_ping=True)
    engine = sa.create_engine(url, connect_args={"timeout": 10})

    @sa.event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine
