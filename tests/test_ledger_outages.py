"""The server's ledger through outages: a PostgreSQL stopped (``pg_ctl -m immediate``)
and started again, down at start-up, a server SIGKILLed while it is down; a SQLite disk
that fails or fills; a read-only spell (see ``ledger_faults``). Each ends with the
ledger's total equal to what the meter counted (minus at most one flush after a SIGKILL),
nothing counted twice, and the user told while it lasted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from ledger_faults import failing_disk, read_only_spell
from postgres import Postgres

from jupyter_gpucost.core.catalog import load_catalog
from jupyter_gpucost.core.refusal import Refusal
from jupyter_gpucost.core.sql import is_transient
from jupyter_gpucost.server.ledger import Ledger, LedgerOffline, Pending, minute_of
from jupyter_gpucost.server.service import CostConfig, CostService

FLUSH_S = 0.3
SAMPLE_S = 0.1
UNREACHABLE = re.compile(
    r"^The ledger is unreachable since \d\d:\d\d UTC; nothing lost yet; \d+ s waiting to be "
    r"written\.$"
)


def wait(predicate: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def config(url: str, data_dir: Path) -> CostConfig:
    return CostConfig(
        catalog=load_catalog(),
        telemetry="simulated",
        sample_interval_s=SAMPLE_S,
        ledger_url=url,
        data_dir=str(data_dir),
        ledger_flush_interval_s=FLUSH_S,
        ledger_timezone="UTC",
        ledger_stop_wait_s=20.0,
    )


@pytest.fixture
def started() -> Iterator[Callable[[CostConfig], CostService]]:
    services: list[CostService] = []

    def start(cfg: CostConfig) -> CostService:
        service = CostService(cfg)
        service.start()
        services.append(service)
        return service

    yield start
    for service in services:
        service.sampler.stop()


def written(url: str, session_id: str) -> int | None:
    """The session's cost in the ledger, read by a connection of the test's own."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(
                sa.text("SELECT cost_micro_usd FROM sessions WHERE id = :id"), {"id": session_id}
            ).scalar()
    except sa.exc.SQLAlchemyError:
        return None
    finally:
        engine.dispose()


def codes(service: CostService) -> list[str]:
    return [w["code"] for w in service.status()["warnings"]]


def unreachable_message(service: CostService) -> str:
    (found,) = [
        w["message"] for w in service.status()["warnings"] if w["code"] == "ledger-unreachable"
    ]
    return str(found)


def metered(service: CostService) -> int:
    return service.sampler.latest.snapshot.cost_micro


def spent_something(url: str, service: CostService) -> Callable[[], bool]:
    return lambda: (written(url, service.session_id) or 0) > 0


# -- what is transient ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (sqlite3.OperationalError("disk I/O error"), True),
        (sqlite3.OperationalError("database or disk is full"), True),
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("attempt to write a readonly database"), True),
        (sqlite3.OperationalError("unable to open database file"), True),
        (sqlite3.OperationalError("no such table: sessions"), False),
        (sqlite3.DatabaseError("file is not a database"), False),
        (sqlite3.DatabaseError("database disk image is malformed"), False),
        (sqlite3.IntegrityError("UNIQUE constraint failed: sessions.id"), False),
    ],
)
def test_one_rule_says_which_errors_are_a_spell(error: Exception, transient: bool) -> None:
    wrapped = sa.exc.DBAPIError.instance("INSERT", None, error, sqlite3.Error)
    assert is_transient(wrapped) is transient


def test_a_refused_postgresql_connection_is_a_spell(postgres: Postgres, postgres_url: str) -> None:
    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    engine = sa.create_engine(postgres_url.replace(f":{postgres.port}/", f":{port}/"))
    with pytest.raises(sa.exc.OperationalError) as raised:
        engine.connect()
    assert is_transient(raised.value)


# -- PostgreSQL ----------------------------------------------------------------------------


def test_postgresql_stopped_mid_session_loses_nothing_and_the_user_is_told(
    postgres: Postgres,
    postgres_url: str,
    tmp_path: Path,
    started: Callable[[CostConfig], CostService],
) -> None:
    service = started(config(postgres_url, tmp_path))
    assert wait(spent_something(postgres_url, service))
    postgres.crash()
    try:
        assert wait(lambda: "ledger-unreachable" in codes(service))
        assert UNREACHABLE.match(unreachable_message(service))
        assert wait(lambda: service.status()["ledger"]["unwritten_s"] >= 1.0)
        # the history that needs the ledger: a sentence, 503, never a 500
        with pytest.raises(Refusal) as refused:
            service.history("24h", None)
        assert refused.value.status == 503
        assert str(refused.value).startswith("The ledger is unreachable since ")
        # a remote ledger: what waits is in the local journal too
        journal = tmp_path / "gpucost" / "journal"
        assert wait(lambda: any(journal.glob("*.json")))
        assert service.status()["ledger"]["journaled"] is True
    finally:
        postgres.restart()
    assert wait(lambda: "ledger-unreachable" not in codes(service))
    assert service.history("24h", None)["source"] == "ledger"
    service.stop()
    assert written(postgres_url, service.session_id) == metered(service)
    assert not any(journal.glob("*.json"))


def test_postgresql_down_at_start_the_session_is_written_once_it_is_back(
    postgres: Postgres,
    postgres_url: str,
    tmp_path: Path,
    started: Callable[[CostConfig], CostService],
) -> None:
    postgres.crash()
    try:
        service = started(config(postgres_url, tmp_path))
        assert service.status()["ledger"]["enabled"] is True
        assert wait(lambda: "ledger-unreachable" in codes(service))
        time.sleep(1.0)
    finally:
        postgres.restart()
    assert wait(spent_something(postgres_url, service))
    assert wait(lambda: "ledger-unreachable" not in codes(service))
    service.stop()
    assert written(postgres_url, service.session_id) == metered(service)


_KILLED = """
import json, sys, time
from jupyter_gpucost.core.catalog import load_catalog
from jupyter_gpucost.server.service import CostConfig, CostService
url, data_dir, out = sys.argv[1:4]
service = CostService(CostConfig(catalog=load_catalog(), telemetry="simulated",
    sample_interval_s=0.1, ledger_url=url, data_dir=data_dir, ledger_flush_interval_s=0.3,
    ledger_timezone="UTC"))
service.start()
while True:
    snap = service.sampler.latest.snapshot
    with open(out + ".new", "w") as f:
        json.dump({"session": service.session_id, "metered": snap.cost_micro,
                   "rate": str(snap.rate_per_hour)}, f)
    import os; os.replace(out + ".new", out)
    time.sleep(0.02)
"""


def test_a_server_killed_while_postgresql_is_down_loses_at_most_one_flush(
    postgres: Postgres,
    postgres_url: str,
    tmp_path: Path,
    started: Callable[[CostConfig], CostService],
) -> None:
    Ledger(postgres_url).close()  # the schema, before the outage
    out = tmp_path / "metered.json"
    postgres.crash()
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED, postgres_url, str(tmp_path), str(out)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        try:
            journal = tmp_path / "gpucost" / "journal"
            assert wait(lambda: any(journal.glob("*.json")))
            time.sleep(2.0)
            child.send_signal(signal.SIGKILL)
            child.wait(10)
            last: dict[str, Any] = json.loads(out.read_text())
        finally:
            child.kill()
            child.wait(10)
    finally:
        postgres.restart()
    # the next server on this data dir writes the journal the killed one left
    service = started(config(postgres_url, tmp_path))
    assert wait(lambda: written(postgres_url, last["session"]) is not None)
    assert not any(journal.glob("*.json"))
    one_flush = float(last["rate"]) * 1_000_000 * (FLUSH_S + 2 * SAMPLE_S) / 3600
    kept = written(postgres_url, last["session"])
    assert kept is not None
    assert last["metered"] - one_flush <= kept <= last["metered"] + one_flush
    # read once, written once: another start finds nothing more to add
    service.stop()
    again = started(config(postgres_url, tmp_path))
    again.stop()
    assert written(postgres_url, last["session"]) == kept


# -- SQLite: a failing or full disk, a read-only spell, a damaged file ------------------------


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gpucost' / 'ledger.sqlite'}"


def earlier_session(url: str, cost: int) -> None:
    """A session of an earlier server, already in the ledger."""
    ledger = Ledger(url)
    now = datetime.now(UTC)
    ledger.start_session("earlier", now, None)
    p = Pending(cost_micro=cost, last_unix_s=now.timestamp())
    p.spend[minute_of(now.timestamp())] = [cost, 0, 1]
    ledger.flush("earlier", p)
    ledger.close()


@pytest.mark.parametrize("message", ["disk I/O error", "database or disk is full"])
def test_a_failing_disk_at_start_is_waited_out_not_taken_for_a_damaged_ledger(
    message: str, tmp_path: Path, started: Callable[[CostConfig], CostService]
) -> None:
    url = sqlite_url(tmp_path)
    earlier_session(url, 370_000)
    with failing_disk(message):
        service = started(config(url, tmp_path))
        assert wait(lambda: "ledger-unreachable" in codes(service))
        assert UNREACHABLE.match(unreachable_message(service))
        time.sleep(1.0)
    assert wait(spent_something(url, service))
    assert wait(lambda: "ledger-unreachable" not in codes(service))
    assert not list((tmp_path / "gpucost").glob("*.broken-*"))
    assert "ledger-reset" not in codes(service)
    service.stop()
    assert written(url, service.session_id) == metered(service)
    # the earlier history is still in every total
    assert written(url, "earlier") == 370_000
    assert Ledger(url).totals(service.sampler.latest.snapshot.as_of).all_time_micro == (
        370_000 + metered(service)
    )


def test_a_disk_that_fills_mid_session_is_waited_out(
    tmp_path: Path, started: Callable[[CostConfig], CostService]
) -> None:
    url = sqlite_url(tmp_path)
    service = started(config(url, tmp_path))
    assert wait(spent_something(url, service))
    with failing_disk("database or disk is full", connect=False):
        assert wait(lambda: "ledger-unreachable" in codes(service))
        assert wait(lambda: service.status()["ledger"]["unwritten_s"] >= 1.0)
    assert wait(lambda: "ledger-unreachable" not in codes(service))
    service.stop()
    assert written(url, service.session_id) == metered(service)


def test_a_read_only_spell_is_waited_out_and_leaves_no_read_only_connection(
    tmp_path: Path, started: Callable[[CostConfig], CostService]
) -> None:
    url = sqlite_url(tmp_path)
    service = started(config(url, tmp_path))
    assert wait(spent_something(url, service))
    with read_only_spell():
        assert service.ledger is not None
        service.ledger.engine.dispose()  # the connections the spell finds are recycled
        # the panel reads history meanwhile: its connections are opened read-only
        for _ in range(3):
            try:
                service.history("24h", None)
            except Refusal as e:
                if e.status != 503:
                    raise
        assert wait(lambda: "ledger-unreachable" in codes(service))
        assert UNREACHABLE.match(unreachable_message(service))
    # writable again: the read-only connections are not handed out again
    assert wait(lambda: "ledger-unreachable" not in codes(service))
    service.stop()
    assert written(url, service.session_id) == metered(service)


def damage(path: Path) -> None:
    """Overwrite the middle of a SQLite file's pages (its header stays valid)."""
    data = bytearray(path.read_bytes())
    for at in range(4096, len(data), 4096):
        data[at : at + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))


def test_only_a_file_the_integrity_check_finds_damaged_is_moved_aside_and_named(
    tmp_path: Path, started: Callable[[CostConfig], CostService]
) -> None:
    url = sqlite_url(tmp_path)
    earlier_session(url, 370_000)
    path = tmp_path / "gpucost" / "ledger.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    damage(path)
    service = started(config(url, tmp_path))
    (aside,) = [
        p
        for p in (tmp_path / "gpucost").glob("ledger.sqlite.broken-*")
        if not p.name.endswith(("-wal", "-shm"))
    ]
    (reset,) = [w["message"] for w in service.status()["warnings"] if w["code"] == "ledger-reset"]
    assert str(aside) in reset
    ledger = service.status()["ledger"]
    assert ledger["reset"]["file"] == str(aside)
    assert ledger["reset"]["reason"]
    if ledger["reset"]["cost_micro_usd"] is None:
        assert "what it held could not be read" in reset
    else:
        assert "$0.37" in reset
    service.stop()


async def until(predicate: Callable[[], Awaitable[object]], timeout_s: float = 30.0) -> bool:
    """Wait, bounded, until ``predicate`` answers something true."""
    deadline = time.monotonic() + timeout_s
    while True:
        if await predicate():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)


class TestTheRoutesWhilePostgresqlIsDown:
    """A real Jupyter server on a PostgreSQL ledger that stops answering."""

    @pytest.fixture
    def gpucost_config(self, postgres_url: str) -> dict[str, Any]:
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "ledger_url": postgres_url,
            "ledger_flush_interval_s": 0.5,
            "ledger_timezone": "UTC",
        }

    async def test_history_answers_503_with_a_sentence_and_the_status_warns(
        self, jp_fetch: Any, postgres: Postgres
    ) -> None:
        from tornado.httpclient import HTTPClientError

        async def warned() -> list[dict[str, str]]:
            status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
            return [w for w in status["warnings"] if w["code"] == "ledger-unreachable"]

        postgres.crash()
        try:
            await until(warned)
            (warning,) = await warned()
            assert UNREACHABLE.match(warning["message"])
            with pytest.raises(HTTPClientError) as refused:
                await jp_fetch("gpucost", "api", "history", params={"window": "24h"})
            assert refused.value.code == 503
            body = json.loads(refused.value.response.body)  # type: ignore[union-attr]
            assert body["message"].startswith("The ledger is unreachable since ")
            # a window kept in memory still answers; its totals say why they are empty
            short = json.loads(
                (await jp_fetch("gpucost", "api", "history", params={"window": "15m"})).body
            )
            assert short["points"]
            assert short["totals"]["unavailable"].startswith("The ledger is unreachable")
        finally:
            postgres.restart()

        async def back() -> bool:
            return not await warned()

        assert await until(back)
        history = json.loads(
            (await jp_fetch("gpucost", "api", "history", params={"window": "24h"})).body
        )
        assert history["source"] == "ledger"


def part(minute: int, cost: int, last: float) -> Pending:
    p = Pending(cost_micro=cost, last_unix_s=last)
    p.spend[minute] = [cost, 0, 1]
    return p


def test_a_flush_whose_commit_was_lost_is_not_counted_twice(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    ledger = Ledger(url)
    start = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    ledger.start_session("s", start, None)
    m = minute_of(start.timestamp())
    first = part(m, 100, start.timestamp() + 5)
    ledger.write("s", [first])  # committed, but say the answer was lost with the connection
    # the next flush tries that part again with what came since: the first is not re-added
    queue = [part(m, 100, start.timestamp() + 5), part(m, 40, start.timestamp() + 10)]
    ledger.write("s", queue)
    assert written(url, "s") == 140
    assert ledger.spend_between(m, m + 60) == [(m, 140, 1)]


def test_a_long_spell_keeps_two_parts_and_counts_each_once(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    ledger = Ledger(url)
    start = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    ledger.start_session("s", start, None)
    m = minute_of(start.timestamp())
    queue = [part(m, 10 * (i + 1), start.timestamp() + i + 1) for i in range(6)]
    with failing_disk("disk I/O error", connect=False), pytest.raises(LedgerOffline):
        ledger.write("s", queue)
    assert len(queue) <= 2
    ledger.retry_now()
    ledger.write("s", queue)
    assert written(url, "s") == sum(10 * (i + 1) for i in range(6))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB filesystem (tmpfs), where one may be mounted (root, CAP_SYS_ADMIN)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
        capture_output=True,
        timeout=30,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {done.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte (ENOSPC); the filler is returned, to be removed."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while f.write(b"\0" * 4096):
            pass
    return filler


@pytest.mark.parametrize("when", ["at start", "mid-session"])
def test_a_really_full_disk_is_waited_out(
    when: str, small_disk: Path, started: Callable[[CostConfig], CostService]
) -> None:
    url = f"sqlite:///{small_disk / 'gpucost' / 'ledger.sqlite'}"
    earlier_session(url, 370_000)
    filler = fill(small_disk) if when == "at start" else None
    service = started(config(url, small_disk))
    if filler is None:
        assert wait(spent_something(url, service))
        filler = fill(small_disk)
    try:
        assert wait(lambda: "ledger-unreachable" in codes(service), 90)
        assert UNREACHABLE.match(unreachable_message(service))
        time.sleep(1.0)
    finally:
        filler.unlink()
    assert wait(lambda: "ledger-unreachable" not in codes(service), 60)
    assert not list((small_disk / "gpucost").glob("*.broken-*"))
    assert "ledger-reset" not in codes(service)
    service.stop()
    assert written(url, service.session_id) == metered(service)
    assert written(url, "earlier") == 370_000


def test_cells_and_budget_actions_sent_during_a_spell_are_written_after(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    ledger = Ledger(url)
    start = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    ledger.start_session("s", start, None)
    with failing_disk("disk I/O error", connect=False):
        ledger.add_cell("s", {"cell_id": "c1", "ended": start.isoformat(), "cost_usd": 0.01})
        ledger.add_action("s", {"at": start.isoformat(), "action": "shutdown"})
        assert ledger.down_since is not None
    ledger.retry_now()
    m = minute_of(start.timestamp())
    ledger.write("s", [part(m, 5, start.timestamp() + 5)])
    assert [c["cell_id"] for c in ledger.recent_cells()] == ["c1"]
    assert [a["action"] for a in ledger.actions()] == ["shutdown"]
    assert ledger.down_since is None
