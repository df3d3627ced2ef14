"""The ledger on disk: totals, day and month boundaries, broken and unwritable files."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from jupyter_gpucost.server.ledger import (
    GpuMinuteSums,
    Ledger,
    LedgerUnavailable,
    Pending,
    minute_of,
)

NOW = datetime(2026, 11, 22, 14, 30, tzinfo=UTC)


def pending(minutes: dict[int, int], *, last: float) -> Pending:
    p = Pending()
    for minute, cost in minutes.items():
        p.spend[minute] = [cost, cost // 2, 6_880_000]
        p.cost_micro += cost
        p.idle_micro += cost // 2
    p.gpus[(0, min(minutes))] = GpuMinuteSums(97.0, 391.0, 1, 60 * 2**30)
    p.last_unix_s = last
    return p


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gpucost' / 'ledger.sqlite'}"


def test_flushes_add_up_per_minute_and_per_session(tmp_path: Path) -> None:
    ledger = Ledger(url(tmp_path), tz=ZoneInfo("UTC"))
    m = minute_of(NOW.timestamp())
    ledger.start_session("a", NOW, "alice")
    ledger.flush("a", pending({m: 1000, m + 60: 500}, last=NOW.timestamp()))
    # a second flush adds to the same minute, it does not replace it
    ledger.flush("a", pending({m + 60: 250}, last=NOW.timestamp() + 90))
    ledger.start_session("b", NOW, "alice")
    ledger.flush("b", pending({m: 7}, last=NOW.timestamp()))
    totals = ledger.totals(NOW)
    assert totals.all_time_micro == 1757
    assert totals.today_micro == 1757
    assert ledger.totals(NOW, exclude_session="a").all_time_micro == 7
    sessions = {s["id"]: s["cost_micro"] for s in ledger.sessions()}
    assert sessions == {"a": 1750, "b": 7}
    assert ledger.spend_between(m, m + 120) == [(m, 1007, 2 * 6_880_000), (m + 60, 750, 6_880_000)]


def test_today_and_this_month_start_in_the_configured_time_zone(tmp_path: Path) -> None:
    # 23:30 UTC on 31 October is already 1 November in Paris (UTC+1)
    late = datetime(2026, 10, 31, 23, 30, tzinfo=UTC)
    next_day = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    for zone, today, month in (("Europe/Paris", 300, 300), ("UTC", 200, 200)):
        ledger = Ledger(f"sqlite:///{tmp_path / zone.replace('/', '_')}.sqlite", tz=ZoneInfo(zone))
        ledger.start_session("s", late, None)
        ledger.flush("s", pending({minute_of(late.timestamp()): 100}, last=late.timestamp()))
        ledger.flush("s", pending({minute_of(next_day.timestamp()): 200}, last=0))
        totals = ledger.totals(next_day)
        assert (totals.today_micro, totals.month_micro) == (today, month), zone
        assert totals.all_time_micro == 300


def test_a_file_that_is_not_a_database_is_moved_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "gpucost" / "ledger.sqlite"
    path.parent.mkdir()
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    ledger = Ledger(url(tmp_path))
    assert ledger.reset_from is not None
    assert Path(ledger.reset_from).read_bytes() == garbage  # nothing lost
    assert "moved to" in caplog.text
    ledger.start_session("s", NOW, None)
    ledger.flush("s", pending({minute_of(NOW.timestamp()): 5}, last=0))
    assert ledger.totals(NOW).all_time_micro == 5


def test_a_ledger_from_a_newer_version_is_moved_aside_not_overwritten(tmp_path: Path) -> None:
    first = Ledger(url(tmp_path))
    first.close()
    path = tmp_path / "gpucost" / "ledger.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    ledger = Ledger(url(tmp_path))
    assert ledger.reset_from is not None
    with sqlite3.connect(ledger.reset_from) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("99",)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write a read-only folder")
def test_an_unwritable_folder_turns_the_ledger_off(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(LedgerUnavailable, match="cannot"):
            Ledger(url(tmp_path))
    finally:
        tmp_path.chmod(0o700)


def test_a_ledger_path_under_a_file_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "gpucost").write_text("a file where the folder should be")
    with pytest.raises(LedgerUnavailable, match="cannot create"):
        Ledger(url(tmp_path))


def test_cells_are_kept_newest_first(tmp_path: Path) -> None:
    ledger = Ledger(url(tmp_path))
    for i in range(3):
        ledger.add_cell(
            "s",
            {
                "cell_id": f"c{i}",
                "notebook_path": "a.ipynb",
                "kernel_id": "k",
                "started": f"2026-11-22T10:00:0{i}+00:00",
                "ended": f"2026-11-22T10:00:0{i}.5+00:00",
                "cost_usd": 0.001 * i,
            },
        )
    assert [c["cell_id"] for c in ledger.recent_cells(2)] == ["c2", "c1"]
