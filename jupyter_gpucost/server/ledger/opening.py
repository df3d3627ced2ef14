"""Opening the ledger's database: the engine (SQLite in WAL mode, or any SQLAlchemy URL),
the schema created or checked, and a database that cannot be read moved aside.

A ledger that cannot be read (not a database, a newer schema) is moved aside and a fresh
one started, with a warning; a ledger that cannot be written at all (no permission) is
:class:`LedgerUnavailable`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...core.sql import create_engine, sqlite_path
from .schema import SCHEMA_VERSION, meta_table, metadata


class LedgerUnavailable(Exception):
    """The ledger cannot be used at all; the message says why."""


@dataclass(frozen=True)
class Opened:
    """An engine on a usable ledger, and where a broken one was moved, if one was."""

    engine: Engine
    reset_from: str | None = None


def open_ledger(url: str, log: logging.Logger) -> Opened:
    """An engine on the ledger at ``url``, its schema checked; a broken file moved aside."""
    engine = _create_engine(url)
    try:
        _check(url, engine)
        return Opened(engine)
    except sa.exc.OperationalError as e:
        if _is_permission_error(e):
            engine.dispose()
            raise LedgerUnavailable(f"cannot write the ledger: {e.orig}") from None
        broken: BaseException = e
    except (sa.exc.DatabaseError, ValueError) as e:
        broken = e
    engine.dispose()
    path = sqlite_path(url)
    if path is None:
        raise LedgerUnavailable(f"the ledger database cannot be used: {broken}") from None
    aside = _move_aside(path, broken)
    log.warning(
        "jupyter-gpucost: the ledger %s could not be read (%s); it was moved to %s and a "
        "fresh ledger started. Totals of earlier sessions are in the old file.",
        path,
        broken,
        aside,
    )
    engine = _create_engine(url)
    _check(url, engine)
    return Opened(engine, reset_from=str(aside))


def _move_aside(path: Path, broken: BaseException) -> Path:
    """Rename a broken SQLite file (and its WAL files) to ``<name>.broken-<time>``."""
    aside = path.with_name(f"{path.name}.broken-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")
    try:
        path.rename(aside)
        for suffix in ("-wal", "-shm"):
            extra = path.with_name(path.name + suffix)
            if extra.exists():
                extra.rename(aside.with_name(aside.name + suffix))
    except OSError as e:
        raise LedgerUnavailable(
            f"the ledger {path} is unreadable ({broken}) and cannot be moved aside: {e.strerror}"
        ) from None
    return aside


def _create_engine(url: str) -> Engine:
    path = sqlite_path(url)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LedgerUnavailable(f"cannot create {path.parent}: {e.strerror}") from None
    return create_engine(url)


def _check(url: str, engine: Engine) -> None:
    """Create the schema, or check the one there; raises on a broken database."""
    with engine.begin() as conn:
        if sqlite_path(url) is not None:
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


def _is_permission_error(e: BaseException) -> bool:
    text = str(getattr(e, "orig", e)).lower()
    return "readonly" in text or "permission" in text or "unable to open" in text
