"""The hub ledger against values that would break it, each test on a SQLite file and on
a real PostgreSQL database: a row no query can sum (left by an older version), sums past
64 bits, figures that are not numbers, a server whose figures cannot be written, and the
grace deadlines a restart must keep."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import sqlalchemy as sa

from jupyter_gpucost.hub.ledger import HubLedger, daily_table, servers_table
from jupyter_gpucost.hub.ledger.schema import quarantine_table
from jupyter_gpucost.hub.ledger.state import MAX_ROW_MICRO_USD
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo

T = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
T4 = Rate(GpuAllocation("T4", 1), Decimal("3.6"), "test price")
DAY = T.date()


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def server(user: str, started: datetime = T) -> ServerInfo:
    return ServerInfo(user, "", started, True, profile="t4")


def test_a_row_no_sum_can_hold_is_quarantined_and_the_rest_goes_on(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    mallory = ledger.open_server(server("mallory"), T4)
    bob = ledger.open_server(server("bob"), T4)
    ledger.flush(at(60))
    ledger.close_server(mallory.server_id, at(60))
    ledger.close_server(bob.server_id, at(60))
    # what an older version let a hostile report write: 9.2 × 10^18 in one row
    huge = 9_223_372_036_854_775_000
    with ledger.engine.begin() as conn:
        conn.execute(
            daily_table.update()
            .where(daily_table.c.server_id == mallory.server_id)
            .values(reported_micro_usd=huge, billed_micro_usd=huge)
        )
        conn.execute(
            daily_table.insert().values(
                server_id=mallory.server_id + 1000,
                day=DAY,
                user_name="mallory",
                allocated_micro_usd=0,
                reported_micro_usd=huge,
                idle_micro_usd=0,
                billed_micro_usd=huge,
            )
        )
    ledger.close()
    again = HubLedger(ledger_url)
    # every query runs, bob's figures are his, and mallory's bad rows are out of the bill
    everyone = again.all_totals(at(120))
    assert everyone["bob"].today_micro_usd == 60_000
    assert "mallory" not in everyone
    assert again.daily(DAY) == [(DAY, "bob", 60_000)]
    assert again.sessions("mallory")[0]["billed_micro_usd"] == 0
    with again.engine.connect() as conn:
        kept = conn.execute(sa.select(quarantine_table)).mappings().all()
    assert len(kept) == 2
    assert all(str(huge) in row["row_text"] and row["user_name"] == "mallory" for row in kept)
    again.close()


def test_sums_are_exact_past_64_bits(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    # 10,000 rows at the most a row may hold: 10^19, past what a 64-bit SUM can hold
    rows = [
        {
            "server_id": i,
            "day": DAY,
            "user_name": "whale",
            "allocated_micro_usd": MAX_ROW_MICRO_USD,
            "reported_micro_usd": 0,
            "idle_micro_usd": 0,
            "billed_micro_usd": MAX_ROW_MICRO_USD - (i % 7),
        }
        for i in range(10_000)
    ]
    with ledger.engine.begin() as conn:
        conn.execute(daily_table.insert(), rows)
    expected = sum(int(r["billed_micro_usd"]) for r in rows)  # type: ignore[call-overload]
    assert expected > 2**63
    totals = ledger.totals("whale", at(10))
    assert (totals.today_micro_usd, totals.month_micro_usd) == (expected, expected)
    assert ledger.daily(DAY) == [(DAY, "whale", expected)]
    ledger.close()


def test_report_figures_that_are_not_numbers_never_reach_a_page(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(server("mallory"), T4)
    ledger.flush(at(10))
    with ledger.engine.begin() as conn:
        conn.execute(
            servers_table.update()
            .where(servers_table.c.id == row.server_id)
            .values(report_energy_wh=float("inf"), report_cells=2_000_000_000)
        )
    # read as the pages read it: JSON, which has no Infinity
    (session,) = ledger.sessions("mallory")
    assert session["energy_wh"] is None
    json.dumps(session, allow_nan=False)
    ledger.close()
    again = HubLedger(ledger_url)  # opened again: the out-of-range figures are cleared
    (session,) = again.sessions("mallory")
    assert (session["energy_wh"], session["cells"]) == (None, None)
    again.close()


def test_a_server_whose_figures_cannot_be_written_does_not_stop_the_flush(
    ledger_url: str,
) -> None:
    ledger = HubLedger(ledger_url)
    # a price no ledger row can hold a day of: quarantined, the others written
    absurd = Rate(GpuAllocation("T4", 1), Decimal("1000000000000"), "a typo")
    bad = ledger.open_server(server("mallory"), absurd)
    good = ledger.open_server(server("bob"), T4)
    ledger.flush(at(3600))
    ledger.flush(at(3601))
    ledger.close()
    again = HubLedger(ledger_url)
    assert again.totals("bob", at(3601)).today_micro_usd == 3_601_000
    with again.engine.connect() as conn:
        kept = conn.execute(sa.select(quarantine_table)).mappings().all()
        days = conn.execute(
            sa.select(daily_table.c.server_id).where(daily_table.c.server_id == bad.server_id)
        ).all()
    assert days == []
    assert [(r["source"], r["server_id"]) for r in kept] == [("flush", bad.server_id)]
    assert good.server_id != bad.server_id
    again.close()


def test_a_grace_deadline_is_kept_across_a_restart_until_the_server_stops(
    ledger_url: str,
) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(server("alice"), T4)
    ledger.save_deadline(row.server_id, at(10), at(310), "Your day budget is spent.")
    ledger.close()
    again = HubLedger(ledger_url)
    assert again.deadlines() == {row.server_id: (at(10), at(310), "Your day budget is spent.")}
    again.close_server(row.server_id, at(400))
    assert again.deadlines() == {}
    again.close()


def test_days_before_this_month_are_left_out_of_the_month(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    with ledger.engine.begin() as conn:
        conn.execute(
            daily_table.insert(),
            [
                {
                    "server_id": 1,
                    "day": d,
                    "user_name": "ann",
                    "allocated_micro_usd": 1_999_999,
                    "reported_micro_usd": 0,
                    "idle_micro_usd": 0,
                    "billed_micro_usd": 1_999_999,
                }
                for d in (date(2026, 10, 31), date(2026, 11, 1), DAY)
            ],
        )
    totals = ledger.totals("ann", at(0))
    assert (totals.today_micro_usd, totals.month_micro_usd) == (1_999_999, 3_999_998)
    ledger.close()


def test_a_restart_of_the_service_keeps_a_servers_grace_deadline(ledger_url: str) -> None:
    from jupyter_gpucost.hub.budgets import HubBudgetPolicy
    from jupyter_gpucost.hub.enforcer import HubEnforcer
    from jupyter_gpucost.hub.service import HubService

    def service() -> HubService:
        ledger = HubLedger(ledger_url)
        # alice's day budget: $0.10, spent after 100 s of her T4 ($3.60 an hour); a 60 s
        # grace: the countdown starts 40 s in and ends when the money runs out
        budgets = HubBudgetPolicy({"alice": {"day": 0.1}})
        return HubService(ledger, lambda _: T4, budgets, HubEnforcer(60))

    first = service()
    first.sync([server("alice")], at(40))
    (row,) = first.rows.values()
    stop_at = first.reply(row).stop_at
    assert stop_at == at(100)
    first.close(at(40))
    # restarted 30 s into the countdown: the deadline is the one it had (begun at 40 s),
    # not a new countdown from now
    second = service()
    second.sync([server("alice")], at(70))
    (row,) = second.rows.values()
    assert second.reply(row).stop_at == at(100)
    kept = second.enforcer.deadline(("alice", "", row.started))
    assert kept is not None
    assert kept.since == at(40)
    assert [r.user for r in second.due(at(99))] == []
    assert [r.user for r in second.due(at(100))] == ["alice"]
    second.close(at(100))
