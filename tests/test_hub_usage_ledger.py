"""The ledger's ``hub_usage`` table on SQLite and on a real PostgreSQL: polls add up
exactly, per server and per user this month, sums that no 64-bit column could hold
included, and a restart finds where each server's split stopped."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.state import MAX_ROW_MICRO_USD
from jupyter_gpucost.hub.ledger.usage import UsageDelta, UsageLedger, UsageTotals
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo

T = datetime(2026, 11, 26, 9, tzinfo=UTC)
A100 = Rate(GpuAllocation("A100-80GB", 1), Decimal("3.6"), "test price")


def test_polls_add_up_exactly_per_server_and_user(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    usage = UsageLedger(ledger.engine)
    alice = ledger.open_server(ServerInfo("alice", "", T, True, "a100"), A100).server_id
    bob = ledger.open_server(ServerInfo("bob", "gpu", T, True, "a100"), A100).server_id
    today = T.date()
    deltas = [
        UsageDelta(alice, "alice", today, UsageTotals(870, 130, 0, 15_000, 0, 0), T),
        UsageDelta(alice, "alice", today, UsageTotals(1, 2, 3, 4, 5, 1), T + timedelta(1 / 24)),
        UsageDelta(bob, "bob", today, UsageTotals(0, 1000, 0, 550, 550, 0), T),
        # last month's: not this month's
        UsageDelta(bob, "bob", date(2026, 10, 31), UsageTotals(7, 7, 7, 7, 7, 7), T),
    ]
    usage.add(deltas[:1])
    usage.add(deltas[1:])
    assert usage.by_server([alice])[alice] == UsageTotals(871, 132, 3, 15_004, 5, 1)
    assert usage.by_user(today) == {
        "alice": UsageTotals(871, 132, 3, 15_004, 5, 1),
        "bob": UsageTotals(0, 1000, 0, 550, 550, 0),
    }
    assert usage.untils([alice, bob]) == {alice: T + timedelta(1 / 24), bob: T}
    ledger.close()


def test_sums_past_64_bits_are_exact_and_a_row_out_of_range_is_left_out(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    usage = UsageLedger(ledger.engine)
    ids = [
        ledger.open_server(ServerInfo(f"u{i}", "", T, True, "a100"), A100).server_id
        for i in range(3)
    ]
    day = T.date()
    big = UsageTotals(MAX_ROW_MICRO_USD, MAX_ROW_MICRO_USD, MAX_ROW_MICRO_USD, 0, 0, 0)
    # 10,000 days of 10^15 µ$ each: 10^19 in all, past 2^63
    usage.add([UsageDelta(ids[0], "u0", day - timedelta(days=n), big, T) for n in range(10_000)])
    assert usage.by_server([ids[0]])[ids[0]].used_micro_usd == MAX_ROW_MICRO_USD * 10_000
    assert MAX_ROW_MICRO_USD * 10_000 > 2**63
    assert usage.by_user(day)["u0"].idle_micro_usd == MAX_ROW_MICRO_USD * day.day
    # a figure no row may hold is left out, the others are written
    usage.add(
        [
            UsageDelta(ids[1], "u1", day, UsageTotals(used_micro_usd=-1), T),
            UsageDelta(ids[2], "u2", day, UsageTotals(used_micro_usd=5), T),
        ]
    )
    assert ids[1] not in usage.by_server(ids)
    assert usage.by_server(ids)[ids[2]].used_micro_usd == 5
    ledger.close()
