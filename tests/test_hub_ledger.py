"""The hub ledger, each test on a SQLite file and on a real PostgreSQL database: what a
user is billed, that it is their own, that reports cannot lower it, days and months in the
hub's time zone, and what a crash can lose."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.hub_protocol import SpendReport
from jupyter_gpucost.hub.ledger import HubLedger, default_url, rates_table
from jupyter_gpucost.hub.ledger.schema import meta_table
from jupyter_gpucost.hub.model import (
    GpuAllocation,
    HubConfigError,
    HubLedgerApi,
    Rate,
    ReportCeiling,
    ServerInfo,
)

T = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
#: 3.60 $ an hour: 1,000 micro-dollars a second, so seconds read as thousands
T4 = Rate(GpuAllocation("T4", 1), Decimal("3.6"), "test price")
A100_X2 = Rate(GpuAllocation("A100-80GB", 2), Decimal("1.8"), "test price")  # same per server


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def server(user: str, started: datetime = T, name: str = "", profile: str = "t4") -> ServerInfo:
    return ServerInfo(user, name, started, True, profile=profile)


def report(cost: int, *, session: str = "s1", idle: int = 0, sent: datetime = T) -> SpendReport:
    return SpendReport(
        session_id=session,
        server_name="",
        started=T,
        sent=sent,
        cost_micro_usd=cost,
        idle_micro_usd=idle,
        rate_micro_usd_per_s=1000,
        energy_wh=1.5,
        cells=3,
    )


def test_the_ledger_is_what_the_service_expects(ledger_url: str) -> None:
    ledger: HubLedgerApi = HubLedger(ledger_url)
    ledger.close()


def test_a_running_server_is_billed_its_allocation_up_to_now(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(server("alice"), T4)
    assert row.rate == T4
    # exact up to now, before any flush
    assert ledger.totals("alice", at(100)).today_micro_usd == 100_000
    ledger.flush(at(60))
    totals = ledger.totals("alice", at(100))
    assert (totals.today_micro_usd, totals.month_micro_usd) == (100_000, 100_000)
    assert totals.sessions_micro_usd == {row.server_id: 100_000}
    assert ledger.daily(T.date()) == [(T.date(), "alice", 60_000)]  # as of the flush
    assert ledger.daily(T.date(), now=at(100)) == [(T.date(), "alice", 100_000)]
    assert ledger.sessions("alice")[0]["billed_micro_usd"] == 60_000
    assert ledger.sessions("alice", now=at(100))[0]["billed_micro_usd"] == 100_000
    ledger.close()
    again = HubLedger(ledger_url)
    assert again.totals("alice", at(100)).today_micro_usd == 100_000
    again.close()


def test_one_users_totals_never_include_another_users(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    alice = ledger.open_server(server("alice"), T4)
    bob = ledger.open_server(server("bob"), A100_X2)  # 2 GPUs at 1.80: 1,000 µ$ a second too
    quote = ledger.open_server(server("o'brien", started=at(50)), T4)
    # alice reports more (within what 8 GPUs could cost)
    ledger.add_report(alice.server_id, report(200_000), at(30))
    ledger.flush(at(60))
    ledger.close_server(bob.server_id, at(80))

    assert ledger.totals("bob", at(100)).today_micro_usd == 80_000
    assert ledger.totals("bob", at(100)).sessions_micro_usd == {}  # no longer running
    assert ledger.totals("alice", at(100)).today_micro_usd == 200_000
    assert ledger.totals("o'brien", at(100)).today_micro_usd == 50_000
    assert ledger.totals("carol", at(100)).today_micro_usd == 0
    everyone = ledger.all_totals(at(100))
    assert {u: t.today_micro_usd for u, t in everyone.items()} == {
        "alice": 200_000,
        "bob": 80_000,
        "o'brien": 50_000,
    }
    assert everyone["alice"].sessions_micro_usd == {alice.server_id: 200_000}
    assert everyone["o'brien"].sessions_micro_usd == {quote.server_id: 50_000}
    assert ledger.daily(T.date(), "bob") == [(T.date(), "bob", 80_000)]
    assert ledger.daily(T.date(), "bob", now=at(100)) == [(T.date(), "bob", 80_000)]
    assert ledger.daily(T.date(), now=at(100)) == [
        (T.date(), "alice", 200_000),
        (T.date(), "bob", 80_000),
        (T.date(), "o'brien", 50_000),
    ]
    assert [s["user"] for s in ledger.sessions("bob")] == ["bob"]
    assert ledger.sessions("carol") == []
    ledger.close()


def test_a_report_lower_than_the_allocation_does_not_lower_the_bill(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(server("alice"), T4)
    ledger.add_report(row.server_id, report(10_000, idle=9_000), at(100))
    assert ledger.totals("alice", at(100)).today_micro_usd == 100_000
    # the server saw more than its allocation (a pricier price list): the bill follows it
    ledger.add_report(row.server_id, report(250_000, idle=9_000), at(110))
    ledger.flush(at(120))
    assert ledger.totals("alice", at(120)).today_micro_usd == 250_000
    # a report lower than an earlier one (out of order, or a meter gone back) takes
    # nothing back and adds nothing ...
    ledger.add_report(row.server_id, report(5_000), at(130))
    ledger.flush(at(140))
    assert ledger.totals("alice", at(140)).today_micro_usd == 250_000
    ledger.add_report(row.server_id, report(8_000), at(150))
    assert ledger.totals("alice", at(150)).today_micro_usd == 250_000
    # ... nor does a new session id: the session is the Hub's spawn, not the report's word
    ledger.add_report(row.server_id, report(2_000, session="s2"), at(160))
    ledger.add_report(row.server_id, report(240_000, session="s3"), at(160))
    ledger.flush(at(160))
    assert ledger.totals("alice", at(160)).today_micro_usd == 250_000
    # what the meter counts past its highest report is added
    ledger.add_report(row.server_id, report(255_000, session="s3"), at(160))
    ledger.flush(at(160))
    assert ledger.totals("alice", at(160)).today_micro_usd == 255_000
    ledger.close()
    again = HubLedger(ledger_url)
    assert again.totals("alice", at(160)).today_micro_usd == 255_000
    (session,) = again.sessions("alice")
    assert session["reported_micro_usd"] == 255_000
    assert session["allocated_micro_usd"] == 160_000
    assert session["billed_micro_usd"] == 255_000
    assert session["idle_micro_usd"] == 9_000
    again.close()


def test_a_report_counts_only_what_the_servers_gpus_could_cost(ledger_url: str) -> None:
    # 8 GPUs at $3.60 (the ceiling): at most 8,000 micro-dollars a second since the start
    ceiling = ReportCeiling(max_gpus=8, usd_per_gpu_hour=Decimal("3.6"))
    ledger = HubLedger(ledger_url, ceiling=ceiling)
    row = ledger.open_server(server("alice"), T4)
    ledger.open_server(server("bob"), T4)
    ledger.add_report(row.server_id, report(999_999_999_999_999 // 10), at(10))
    assert ledger.totals("alice", at(10)).today_micro_usd == 80_000
    # the ceiling grows with time, and a report can fill it later, never past it
    ledger.add_report(row.server_id, report(10**14), at(20))
    ledger.flush(at(20))
    assert ledger.totals("alice", at(20)).today_micro_usd == 160_000
    assert ledger.totals("alice", at(30)).today_micro_usd == 160_000
    assert ledger.totals("bob", at(30)).today_micro_usd == 30_000
    ledger.close()


def test_a_report_spanning_two_days_is_not_counted_on_both(
    ledger_url: str,
) -> None:
    ledger = HubLedger(ledger_url)
    started = datetime(2026, 11, 23, 23, 0, tzinfo=UTC)
    row = ledger.open_server(server("alice", started), T4)
    # an hour on the 23rd, reported low; then a big report on the 24th
    ledger.add_report(row.server_id, report(1_000), started + timedelta(minutes=59))
    ledger.add_report(row.server_id, report(9_000_000), started + timedelta(minutes=70))
    now = started + timedelta(minutes=90)
    ledger.flush(now)
    # the session's bill is max(allocated, reported) = $9: the 24th adds what the report
    # says beyond what the 23rd already billed, not the report over again
    assert ledger.daily(date(2026, 11, 23)) == [
        (date(2026, 11, 23), "alice", 3_600_000),
        (date(2026, 11, 24), "alice", 9_000_000 - 3_600_000),
    ]
    assert ledger.totals("alice", now).month_micro_usd == 9_000_000
    ledger.close()


def test_days_and_months_are_cut_in_the_hubs_time_zone(ledger_url: str) -> None:
    tokyo = ZoneInfo("Asia/Tokyo")  # UTC+9
    ledger = HubLedger(ledger_url, tz=tokyo)
    # 23:30 on 31 October in Tokyo, for two hours: half an hour in October
    started = datetime(2026, 10, 31, 14, 30, tzinfo=UTC)
    row = ledger.open_server(server("alice", started), T4)
    before_midnight = datetime(2026, 10, 31, 14, 59, tzinfo=UTC)
    october = ledger.totals("alice", before_midnight)
    assert (october.today_micro_usd, october.month_micro_usd) == (1_740_000, 1_740_000)
    ledger.flush(before_midnight)
    now = datetime(2026, 10, 31, 16, 30, tzinfo=UTC)  # 01:30 on 1 November in Tokyo
    november = ledger.totals("alice", now)
    assert (november.today_micro_usd, november.month_micro_usd) == (5_400_000, 5_400_000)
    assert november.sessions_micro_usd == {row.server_id: 7_200_000}
    ledger.close_server(row.server_id, now)
    assert ledger.daily(date(2026, 10, 1)) == [
        (date(2026, 10, 31), "alice", 1_800_000),
        (date(2026, 11, 1), "alice", 5_400_000),
    ]
    assert ledger.totals("alice", now).month_micro_usd == 5_400_000
    assert ledger.all_totals(now)["alice"].month_micro_usd == 5_400_000
    ledger.close()


def test_the_same_hours_in_utc_fall_on_one_day(tmp_path: Path) -> None:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'utc.sqlite'}", tz=UTC)
    started = datetime(2026, 10, 31, 14, 30, tzinfo=UTC)
    row = ledger.open_server(server("alice", started), T4)
    ledger.close_server(row.server_id, started + timedelta(hours=2))
    assert ledger.daily(date(2026, 10, 1)) == [(date(2026, 10, 31), "alice", 7_200_000)]
    ledger.close()


def test_a_day_boundary_west_of_greenwich(ledger_url: str) -> None:
    new_york = ZoneInfo("America/New_York")  # UTC-5 in November
    ledger = HubLedger(ledger_url, tz=new_york)
    started = datetime(2026, 11, 24, 4, 0, tzinfo=UTC)  # 23:00 on the 23rd in New York
    row = ledger.open_server(server("bob", started), T4)
    ledger.flush(started + timedelta(minutes=30))
    now = started + timedelta(hours=2)  # 01:00 on the 24th
    totals = ledger.totals("bob", now)
    assert (totals.today_micro_usd, totals.month_micro_usd) == (3_600_000, 7_200_000)
    ledger.flush(now)
    assert ledger.daily(date(2026, 11, 1), "bob") == [
        (date(2026, 11, 23), "bob", 3_600_000),
        (date(2026, 11, 24), "bob", 3_600_000),
    ]
    assert ledger.totals("bob", now).sessions_micro_usd == {row.server_id: 7_200_000}
    ledger.close()


def test_a_crash_loses_at_most_what_came_after_the_last_flush(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    gone = ledger.open_server(server("alice"), T4)
    stays = ledger.open_server(server("bob"), T4)
    ledger.add_report(gone.server_id, report(90_000), at(30))
    ledger.add_report(stays.server_id, report(70_000), at(30))
    ledger.flush(at(60))
    ledger.add_report(gone.server_id, report(200_000), at(90))  # never flushed
    ledger.add_report(stays.server_id, report(150_000), at(90))  # never flushed
    del ledger  # killed: no flush, no close
    gc.collect()

    again = HubLedger(ledger_url)
    running = {r.user: r for r in again.running()}
    assert set(running) == {"alice", "bob"}
    assert running["alice"].last_seen == at(60)
    assert running["alice"].rate == T4
    # the Hub no longer lists alice's server: it is closed at its last_seen
    again.close_server(gone.server_id, running["alice"].last_seen)
    assert again.totals("alice", at(300)).today_micro_usd == 90_000  # lost: 90 -> 200 k
    # bob's server still runs: billed from its start, and its next (cumulative) report
    # brings back what the lost one said
    assert again.totals("bob", at(300)).today_micro_usd == 300_000
    again.add_report(stays.server_id, report(400_000), at(300))
    assert again.totals("bob", at(300)).today_micro_usd == 400_000
    assert again.open_server(server("bob"), T4).server_id == stays.server_id
    assert [r.user for r in again.running()] == ["bob"]
    again.close()


def test_a_flush_of_a_thousand_reporting_servers_is_one_transaction(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    rows = [ledger.open_server(server(f"user{i:04d}"), T4) for i in range(1000)]
    ledger.flush(at(10))
    for row in rows:
        ledger.add_report(row.server_id, report(20_000), at(15))
    statements: list[str] = []
    sa.event.listen(
        ledger.engine,
        "before_cursor_execute",
        lambda *args: statements.append(args[2].split()[0]),
    )
    ledger.flush(at(20))
    # inserts of the new days are batched, updates too: a handful of statements in all
    assert len(statements) <= 6, statements
    assert ledger.totals("user0999", at(20)).today_micro_usd == 20_000
    assert len(ledger.all_totals(at(20))) == 1000
    ledger.close()


def test_servers_are_opened_once_and_reopened_when_seen_again(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    first = ledger.open_server(server("alice"), T4)
    assert ledger.open_server(server("alice"), A100_X2) == first  # keeps its rate
    named = ledger.open_server(server("alice", name="gpu-2", started=at(10)), A100_X2)
    assert named.server_id != first.server_id
    ledger.close_server(first.server_id, at(100))
    ledger.close_server(first.server_id, at(500))  # already closed: nothing changes
    assert [r.server_name for r in ledger.running()] == ["gpu-2"]
    # listed again by the Hub (same start): the same session goes on
    assert ledger.open_server(server("alice"), T4).server_id == first.server_id
    assert ledger.totals("alice", at(200)).sessions_micro_usd == {
        first.server_id: 200_000,
        named.server_id: 190_000,
    }
    with pytest.raises(KeyError):
        ledger.add_report(999_999, report(1), at(1))
    ledger.close()


def test_sessions_list_newest_first_with_their_rate_and_bill(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    old = ledger.open_server(server("alice", profile="a100"), A100_X2)
    ledger.close_server(old.server_id, at(3600))
    new = ledger.open_server(server("alice", started=at(7200)), T4)
    ledger.add_report(new.server_id, report(5_000), at(7210))
    ledger.flush(at(7260))
    newest, oldest = ledger.sessions("alice")
    assert newest["server_id"] == new.server_id
    assert newest["running"] is True
    assert newest["billed_micro_usd"] == 60_000
    assert newest["energy_wh"] == 1.5
    assert oldest["stopped"] == at(3600).isoformat()
    assert (oldest["gpu_model"], oldest["gpu_count"]) == ("A100-80GB", 2)
    assert oldest["usd_per_gpu_hour"] == "1.8"
    assert oldest["profile"] == "a100"
    assert oldest["billed_micro_usd"] == 3_600_000
    assert oldest["rate_source"] == "test price"
    assert len(ledger.sessions("alice", limit=1)) == 1
    # sessions at the same rate share its row
    ledger.open_server(server("bob"), T4)
    with ledger.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(rates_table)).scalar() == 2
    ledger.close()


def test_a_group_pools_its_members_spend(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    for user in ("alice", "bob", "carol"):
        ledger.open_server(server(user), T4)
    ledger.flush(at(30))
    groups = ledger.group_totals({"ml": ["alice", "bob"], "empty": [], "solo": ["carol"]}, at(60))
    assert groups["ml"].today_micro_usd == 120_000
    assert groups["ml"].month_micro_usd == 120_000
    assert groups["solo"].month_micro_usd == 60_000
    assert groups["empty"].month_micro_usd == 0
    ledger.close()


def test_the_minimum_charge_is_billed_from_the_first_second(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url, billing=BillingRule(minimum_charge_s=60))
    row = ledger.open_server(server("alice"), T4)
    assert ledger.totals("alice", at(5)).today_micro_usd == 60_000
    ledger.close_server(row.server_id, at(5))
    assert ledger.totals("alice", at(500)).today_micro_usd == 60_000
    ledger.close()


def test_a_ledger_written_by_a_newer_version_is_refused_naming_the_setting(
    ledger_url: str,
) -> None:
    HubLedger(ledger_url).close()
    engine = sa.create_engine(ledger_url)
    with engine.begin() as conn:
        conn.execute(
            meta_table.update().where(meta_table.c.key == "schema_version").values(value="99")
        )
    engine.dispose()
    with pytest.raises(HubConfigError, match=r"^c\.GpuCostHub\.ledger_url: .* newer"):
        HubLedger(ledger_url)


def test_an_unreachable_database_names_the_setting_and_hides_its_password() -> None:
    url = "postgresql+psycopg://gpucost:s3cret@127.0.0.1:1/hub"
    with pytest.raises(HubConfigError) as e:
        HubLedger(url)
    assert str(e.value).startswith("c.GpuCostHub.ledger_url: cannot open postgresql+psycopg://")
    assert "s3cret" not in str(e.value)
    with pytest.raises(HubConfigError, match=r"^c\.GpuCostHub\.ledger_url: cannot use"):
        HubLedger("not a url")


def test_the_default_ledger_is_a_sqlite_file_in_the_data_dir(tmp_path: Path) -> None:
    url = default_url(str(tmp_path))
    assert url == f"sqlite:///{tmp_path}/gpucost-hub.sqlite"
    HubLedger(url).close()


_KILLED_SERVICE = """
import os, signal, sys
from datetime import timedelta
sys.path[:0] = [{root!r}, {tests!r}]
from test_hub_ledger import T, T4, at, report, server
from jupyter_gpucost.hub.ledger import HubLedger

ledger = HubLedger({url!r})
row = ledger.open_server(server("alice"), T4)
ledger.add_report(row.server_id, report(90_000), at(30))
ledger.flush(at(60))
ledger.add_report(row.server_id, report(200_000), at(90))
print(row.server_id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_service_killed_with_sigkill_loses_only_what_came_after_its_last_flush(
    ledger_url: str,
) -> None:
    here = Path(__file__).resolve().parent
    script = _KILLED_SERVICE.format(root=str(here.parent), tests=str(here), url=ledger_url)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    server_id = int(done.stdout.split()[0])
    again = HubLedger(ledger_url)
    (row,) = again.running()
    assert (row.server_id, row.user, row.last_seen) == (server_id, "alice", at(60))
    again.close_server(row.server_id, row.last_seen)
    # flushed at 60 s: 90,000 reported (above the 60,000 allocated); the 200,000 is lost
    assert again.totals("alice", at(600)).today_micro_usd == 90_000
    again.close()


def test_reports_that_come_in_while_a_flush_writes_are_not_lost(ledger_url: str) -> None:
    # a ceiling of 1,000 GPUs: 30 million micro-dollars by 30 s, far above these reports
    ledger = HubLedger(ledger_url, ceiling=ReportCeiling(max_gpus=1000))
    rows = [ledger.open_server(server(f"user{i}"), T4) for i in range(20)]
    stop = threading.Event()
    last: dict[int, int] = {}

    def report_forever() -> None:
        cost = 1_000_000
        while not stop.is_set():
            cost += 1
            for row in rows:
                ledger.add_report(row.server_id, report(cost), at(30))
                last[row.server_id] = cost

    reporter = threading.Thread(target=report_forever)
    reporter.start()
    try:
        for i in range(20):
            ledger.flush(at(31 + i))
    finally:
        stop.set()
        reporter.join()
    ledger.flush(at(60))
    ledger.close()
    again = HubLedger(ledger_url)
    for row in rows:
        assert again.totals(row.user, at(60)).today_micro_usd == last[row.server_id]
    again.close()
