"""The hub ledger through a real PostgreSQL stopped (``pg_ctl -m immediate``) and started
again: a spell is never taken for bad data, the bill goes on from memory (servers opened
and closed, grace deadlines, reports), and everything is written once it is back, each
figure once. A row the database refuses as bad data is the only thing quarantined, and the
quarantine waits in memory until it can be written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa
from postgres import Postgres

from jupyter_gpucost.core.hub_protocol import SpendReport
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.model import GpuAllocation, HubLedgerDown, Rate, ServerInfo

T = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
#: 1,000 micro-dollars a second
T4 = Rate(GpuAllocation("T4", 1), Decimal("3.6"), "test price")


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def server(user: str, started: datetime = T) -> ServerInfo:
    return ServerInfo(user, "", started, True, profile="t4")


def report(cost: int, sent: datetime) -> SpendReport:
    return SpendReport(
        session_id="s1",
        server_name="",
        started=T,
        sent=sent,
        cost_micro_usd=cost,
        idle_micro_usd=0,
        rate_micro_usd_per_s=1000,
        energy_wh=1.0,
        cells=1,
    )


def rows(url: str, query: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(query))]
    finally:
        engine.dispose()


def test_a_stopped_postgresql_is_ridden_out_from_memory(
    postgres: Postgres, postgres_url: str
) -> None:
    ledger = HubLedger(postgres_url)
    alice = ledger.open_server(server("alice"), T4)
    bob = ledger.open_server(server("bob"), T4)
    ledger.flush(at(60))
    assert ledger.all_totals(at(60))["alice"].today_micro_usd == 60_000
    postgres.crash()
    try:
        # reports are kept; a flush keeps everything in memory and says why
        ledger.add_report(alice.server_id, report(150_000, at(100)), at(100))
        with pytest.raises(HubLedgerDown):
            ledger.flush(at(100))
        assert ledger.unreachable_since() is not None
        # the bill goes on from memory: totals, a server opened, one closed, a deadline
        carol = ledger.open_server(server("carol", at(110)), T4)
        assert carol.server_id < 0  # provisional until it has a row
        ledger.save_deadline(carol.server_id, at(120), at(300), "carol's day budget is spent")
        ledger.close_server(bob.server_id, at(130))
        ledger.add_report(carol.server_id, report(5_000, at(140)), at(140))
        everyone = ledger.all_totals(at(200))
        assert everyone["alice"].today_micro_usd == 200_000
        assert everyone["bob"].today_micro_usd == 130_000  # closed at 130 s, not written yet
        assert everyone["carol"].today_micro_usd == 90_000
        assert ledger.totals("carol", at(200)).sessions_micro_usd == {carol.server_id: 90_000}
        with pytest.raises(HubLedgerDown):
            ledger.flush(at(200))
    finally:
        postgres.restart()
    ledger.flush(at(200))
    assert ledger.unreachable_since() is None
    # written once it is back, each figure once, nothing quarantined
    assert rows(postgres_url, "SELECT count(*) FROM hub_quarantine") == [(0,)]
    billed = dict(
        rows(postgres_url, "SELECT user_name, sum(billed_micro_usd) FROM hub_daily GROUP BY 1")
    )
    assert billed == {"alice": 200_000, "bob": 130_000, "carol": 90_000}
    stopped = dict(rows(postgres_url, "SELECT user_name, stopped_us FROM hub_servers"))
    assert stopped["bob"] == int(at(130).timestamp() * 1_000_000)
    assert stopped["alice"] is None
    assert stopped["carol"] is None
    (deadline,) = rows(postgres_url, "SELECT server_id, reason FROM hub_deadlines")
    (carol_id,) = rows(postgres_url, "SELECT id FROM hub_servers WHERE user_name = 'carol'")
    assert deadline == (carol_id[0], "carol's day budget is spent")
    # a report for carol's provisional row still finds her server
    ledger.add_report(carol.server_id, report(6_000, at(210)), at(210))
    ledger.flush(at(220))
    assert ledger.all_totals(at(220))["carol"].today_micro_usd == 110_000
    ledger.close()
    again = HubLedger(postgres_url)
    assert again.all_totals(at(220))["carol"].today_micro_usd == 110_000
    assert {r.user for r in again.running()} == {"alice", "carol"}
    again.close()


def test_only_bad_data_is_quarantined_and_the_quarantine_waits_for_the_database(
    postgres: Postgres, postgres_url: str
) -> None:
    ledger = HubLedger(postgres_url)
    alice = ledger.open_server(server("alice"), T4)
    bob = ledger.open_server(server("bob"), T4)
    ledger.flush(at(10))
    # bob's row is gone from under the ledger, and a constraint refuses his next day row
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "ALTER TABLE hub_daily ADD CONSTRAINT no_bob CHECK (user_name <> 'bob') NOT VALID"
            )
        )
    engine.dispose()
    tomorrow = T + timedelta(days=1, seconds=10)
    ledger.flush(tomorrow)  # bob's new day is refused: he alone is quarantined
    quarantined = rows(postgres_url, "SELECT user_name, source FROM hub_quarantine")
    assert quarantined == [("bob", "flush")]
    # a spell on top: nothing more is quarantined, alice is billed on
    postgres.crash()
    try:
        with pytest.raises(HubLedgerDown):
            ledger.flush(tomorrow + timedelta(seconds=60))
        assert ledger.all_totals(tomorrow + timedelta(seconds=60))["alice"].today_micro_usd > 0
    finally:
        postgres.restart()
    ledger.flush(tomorrow + timedelta(seconds=60))
    assert rows(postgres_url, "SELECT user_name FROM hub_quarantine") == [("bob",)]
    assert ledger.totals("alice", tomorrow + timedelta(seconds=60)).sessions_micro_usd == {
        alice.server_id: 86_470_000
    }
    assert bob.server_id != alice.server_id
    ledger.close()
