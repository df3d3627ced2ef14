"""Opening the ledger's database: the engine (SQLite in WAL mode, or any SQLAlchemy URL),
the schema created or checked, and a damaged file moved aside.

Three outcomes besides success, never confused:

* the database cannot be reached or written just now (a server down, a full or failing
  disk, a lock, a write-protected file: :func:`~jupyter_gpucost.core.sql.is_transient`):
  :class:`LedgerOffline`, and the file is left where it is;
* a SQLite file that ``PRAGMA integrity_check`` says is damaged, or one written by a newer
  version: moved aside (what it held is read first, where it can be) and a fresh one
  started, named in the status's ``ledger-reset`` warning;
* anything else that makes the ledger unusable (a bad URL, a folder that cannot be made):
  :class:`LedgerUnavailable`.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...core.sql import create_engine, integrity_problem, is_transient, sqlite_path
from .schema import SCHEMA_VERSION, meta_table, metadata


class LedgerUnavailable(Exception):
    """The ledger cannot be used at all; the message says why."""


class LedgerOffline(LedgerUnavailable):
    """The ledger cannot be reached or written just now; it may be later. Nothing was
    moved aside; what was not written is kept by the caller."""


@dataclass(frozen=True)
class Reset:
    """A damaged ledger moved aside: where it went and what it held, where that could
    still be read."""

    path: str
    reason: str
    sessions: int | None = None
    #: in micro-units of the session's currency
    cost_micro: int | None = None


@dataclass(frozen=True)
class Opened:
    """An engine on a usable ledger, and the damaged one moved aside, if one was."""

    engine: Engine
    reset: Reset | None = None


def open_ledger(url: str, log: logging.Logger) -> Opened:
    """An engine on the ledger at ``url``, its schema checked; a damaged file moved aside.
    Raises :class:`LedgerOffline` when the database cannot be reached just now."""
    engine = _create_engine(url)
    try:
        _check(url, engine)
        return Opened(engine)
    except sa.exc.SQLAlchemyError as e:
        engine.dispose()
        if is_transient(e):
            raise LedgerOffline(f"cannot reach or write the ledger: {_said(e)}") from None
        broken: BaseException = e
    except _NewerSchema as e:
        engine.dispose()
        broken = e
    path = sqlite_path(url)
    if path is None:
        raise LedgerUnavailable(f"the ledger database cannot be used: {broken}") from None
    if not isinstance(broken, _NewerSchema):
        try:
            problem = integrity_problem(path)
        except sqlite3.Error as e:
            raise LedgerOffline(f"cannot check the ledger {path}: {e}") from None
        if problem is None:
            # a healthy file that failed for another reason: never moved aside
            raise LedgerUnavailable(f"the ledger database cannot be used: {broken}") from None
        reason = problem
    else:
        reason = str(broken)
    sessions, cost = _what_it_held(path)
    aside = _move_aside(path, reason)
    log.warning(
        "jupyter-gpucost: the ledger %s is damaged (%s); it was moved to %s and a fresh "
        "ledger started. It held %s sessions costing %s micro-dollars.",
        path,
        reason,
        aside,
        "?" if sessions is None else sessions,
        "?" if cost is None else cost,
    )
    engine = _create_engine(url)
    try:
        _check(url, engine)
    except sa.exc.SQLAlchemyError as e:
        engine.dispose()
        raise LedgerOffline(f"cannot start a fresh ledger: {_said(e)}") from None
    return Opened(engine, reset=Reset(str(aside), reason, sessions, cost))


def _said(e: sa.exc.SQLAlchemyError) -> str:
    return str(getattr(e, "orig", None) or e).strip().splitlines()[0][:300]


class _NewerSchema(Exception):
    """The ledger was written by a newer jupyter-gpucost."""


def _what_it_held(path: Path) -> tuple[int | None, int | None]:
    """(sessions, their cost in micro-dollars) of a damaged file, where it still says."""
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            count, cost = conn.execute(
                "SELECT count(*), coalesce(sum(cost_micro_usd), 0) FROM sessions"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None, None
    return int(count), int(cost)


def _move_aside(path: Path, reason: str) -> Path:
    """Rename a damaged SQLite file (and its WAL files) to ``<name>.broken-<time>``."""
    aside = path.with_name(f"{path.name}.broken-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")
    try:
        path.rename(aside)
        for suffix in ("-wal", "-shm"):
            extra = path.with_name(path.name + suffix)
            if extra.exists():
                extra.rename(aside.with_name(aside.name + suffix))
    except OSError as e:
        raise LedgerUnavailable(
            f"the ledger {path} is damaged ({reason}) and cannot be moved aside: {e.strerror}"
        ) from None
    return aside


def _create_engine(url: str) -> Engine:
    path = sqlite_path(url)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError as e:
            raise LedgerUnavailable(f"cannot create {path.parent}: {e.strerror}") from None
        except OSError as e:
            if path.parent.is_dir():
                pass
            elif e.errno in _SPELL_ERRNOS:
                raise LedgerOffline(f"cannot create {path.parent}: {e.strerror}") from None
            else:
                raise LedgerUnavailable(f"cannot create {path.parent}: {e.strerror}") from None
    return create_engine(url)


#: a folder that cannot be made just now (a full disk, a failing one, a read-only spell)
_SPELL_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EROFS, errno.EACCES)


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
            raise _NewerSchema(f"written by a newer jupyter-gpucost (schema {version})")
