"""Spot interruptions a server reports, kept by the hub ledger: on a SQLite file and on a
real PostgreSQL database. A server's report is its user's claim: each interruption counts
once however often, in whatever order and after whatever restart it is sent again; one
user's ids never touch another's; a flood of forged ids is bounded; the bill is the same
with or without them; and every value outside the protocol is refused by name."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.hub_protocol import (
    MAX_INTERRUPTIONS,
    MAX_REPORT_MICRO_USD,
    ProtocolError,
    ReportedInterruption,
    SpendReport,
)
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.interruptions import USER_DAY_LIMIT
from jupyter_gpucost.hub.ledger.schema import interruptions_table
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo
from jupyter_gpucost.server.hub_link import reported_interruptions

T = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
MONTH = T.date().replace(day=1)
T4 = Rate(GpuAllocation("T4", 1), Decimal("3.6"), "test price")


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def spot(
    ident: str, lost: int, session: int | None = None, when: datetime = T
) -> ReportedInterruption:
    return ReportedInterruption(
        ident, when, "aws", "spot", lost, lost if session is None else session
    )


def report(*items: ReportedInterruption, cost: int = 0, sent: datetime = T) -> SpendReport:
    return SpendReport(
        session_id="s1",
        server_name="",
        started=T,
        sent=sent,
        cost_micro_usd=cost,
        idle_micro_usd=0,
        rate_micro_usd_per_s=1000,
        interruptions=tuple(items),
    )


def counted(ledger: HubLedger, user: str) -> tuple[int, int]:
    t = ledger.interruptions_by_user(MONTH).get(user)
    return (0, 0) if t is None else (t.count, t.lost_micro_usd)


def test_an_interruption_sent_in_every_report_counts_once(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(ServerInfo("ann", "", T, True), T4)
    a, b = (
        spot("s0@2026-11-23T08:00:00+00:00", 410_000),
        spot("s0@2026-11-23T08:30:00+00:00", 90_000),
    )
    ledger.add_report(row.server_id, report(a), at(10))
    assert counted(ledger, "ann") == (1, 410_000)  # queued: shown before the flush
    ledger.flush(at(11))
    for i, items in enumerate([(a, b), (b, a), (a,), (b,), (a, b)]):
        ledger.add_report(row.server_id, report(*items), at(20 + i))
        if i % 2:
            ledger.flush(at(20 + i))
    assert counted(ledger, "ann") == (2, 500_000)
    ledger.flush(at(40))
    # the same id with another figure (a forged second claim) changes nothing
    ledger.add_report(row.server_id, report(spot(a.interruption_id, 9_000_000)), at(41))
    ledger.flush(at(42))
    assert counted(ledger, "ann") == (2, 500_000)
    ledger.close()
    # a restarted service, sent the same again by the next session: still once
    again = HubLedger(ledger_url)
    row2 = again.open_server(ServerInfo("ann", "", at(100), True), T4)
    again.add_report(row2.server_id, report(a, b), at(110))
    assert counted(again, "ann") == (2, 500_000)  # queued again, but already written
    again.flush(at(111))
    assert counted(again, "ann") == (2, 500_000)
    with again.engine.connect() as conn:
        rows = conn.execute(sa.select(interruptions_table)).mappings().all()
    assert sorted((r["interruption_id"], r["lost_micro_usd"]) for r in rows) == [
        (a.interruption_id, 410_000),
        (b.interruption_id, 90_000),
    ]
    again.close()


def test_one_users_ids_never_touch_anothers_and_the_bill_is_unchanged(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    ann = ledger.open_server(ServerInfo("ann", "", T, True), T4)
    bob = ledger.open_server(ServerInfo("bob", "", T, True), T4)
    ledger.add_report(ann.server_id, report(cost=1_000), at(5))
    ledger.add_report(bob.server_id, report(cost=1_000), at(5))
    ledger.flush(at(10))
    before = ledger.all_totals(at(60))
    # bob forges ann's id, with the most a figure may say: it is his, and only shown
    same = "s0@2026-11-23T08:00:00+00:00"
    ledger.add_report(ann.server_id, report(spot(same, 410_000), cost=1_000), at(20))
    ledger.add_report(bob.server_id, report(spot(same, MAX_REPORT_MICRO_USD), cost=1_000), at(20))
    ledger.flush(at(30))
    assert counted(ledger, "ann") == (1, 410_000)
    assert counted(ledger, "bob") == (1, MAX_REPORT_MICRO_USD)
    assert ledger.all_totals(at(60)) == before
    ledger.close()


def test_an_interruption_of_last_month_is_not_counted_in_this_ones(ledger_url: str) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(ServerInfo("ann", "", T, True), T4)
    old = spot("s0@old", 5_000, when=datetime(2026, 10, 31, 23, 0, tzinfo=UTC))
    ledger.add_report(row.server_id, report(old, spot("s1@new", 7)), at(1))
    ledger.flush(at(2))
    assert counted(ledger, "ann") == (1, 7)
    ledger.close()


def test_a_flood_of_forged_ids_is_bounded_and_logged_once(
    ledger_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = HubLedger(ledger_url)
    row = ledger.open_server(ServerInfo("mallory", "", T, True), T4)
    for n in range(USER_DAY_LIMIT // MAX_INTERRUPTIONS + 5):
        items = [spot(f"forged-{n}-{i}", 1) for i in range(MAX_INTERRUPTIONS)]
        ledger.add_report(row.server_id, report(*items), at(n))
    ledger.flush(at(1000))
    assert counted(ledger, "mallory") == (USER_DAY_LIMIT, USER_DAY_LIMIT)
    assert sum("more new interruptions today" in r.message for r in caplog.records) == 1
    ledger.close()


def test_a_ledger_from_before_interruptions_gains_their_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    HubLedger(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE hub_interruptions"))
    engine.dispose()
    ledger = HubLedger(url)
    row = ledger.open_server(ServerInfo("ann", "", T, True), T4)
    ledger.add_report(row.server_id, report(spot("x", 3)), at(1))
    ledger.flush(at(2))
    assert counted(ledger, "ann") == (1, 3)
    ledger.close()


# -- any order, any repeats (hypothesis, on SQLite) -------------------------------------

EVENTS = [spot(f"s{i}@2026-11-2{i}T00:00:00+00:00", 1000 * (i + 1), when=at(i)) for i in range(6)]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(
        st.tuples(
            st.sampled_from(["ann", "bob"]),
            st.lists(st.sampled_from(EVENTS), max_size=MAX_INTERRUPTIONS, unique=True),
            st.booleans(),
        ),
        max_size=25,
    )
)
def test_any_order_and_repeats_count_each_id_once_per_user(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[tuple[str, list[ReportedInterruption], bool]],
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('h') / 'hub.sqlite'}"
    ledger = HubLedger(url)
    rows = {u: ledger.open_server(ServerInfo(u, "", T, True), T4) for u in ("ann", "bob")}
    sent: dict[str, set[str]] = {"ann": set(), "bob": set()}
    for n, (user, items, flush) in enumerate(batches):
        ledger.add_report(rows[user].server_id, report(*items), at(n))
        sent[user].update(i.interruption_id for i in items)
        if flush:
            ledger.flush(at(n))
        if n == len(batches) // 2:  # a restart of the service half-way
            ledger.flush(at(n))
            ledger.close()
            ledger = HubLedger(url)
    for _ in range(2):  # as queued, then as written
        for user in ("ann", "bob"):
            lost = sum(e.lost_micro_usd for e in EVENTS if e.interruption_id in sent[user])
            assert counted(ledger, user) == (len(sent[user]), lost)
        ledger.flush(at(999))
    ledger.close()


# -- the protocol: every field bounded, refused by name ---------------------------------

GOOD = {
    "id": "s0@2026-11-23T08:00:00+00:00",
    "at": "2026-11-23T08:00:00+00:00",
    "provider": "aws",
    "market": "spot",
    "lost_micro_usd": 410_000,
    "session_micro_usd": 2_000_000,
}


def doc(*items: object) -> dict[str, object]:
    body = report(cost=5).to_json()
    body["interruptions"] = list(items)
    return body


def test_a_report_round_trips_and_an_older_server_omits_the_field() -> None:
    full = SpendReport.from_json(doc(GOOD))
    assert full.interruptions == (ReportedInterruption.from_json(GOOD, "x"),)
    assert SpendReport.from_json(json.loads(json.dumps(full.to_json()))) == full
    older = report(cost=5).to_json()
    del older["interruptions"]
    assert SpendReport.from_json(older).interruptions == ()


HOSTILE = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([math.nan, math.inf, -math.inf, True, False, None, "1", [], {}, 1.5, -1]),
    st.integers(min_value=MAX_REPORT_MICRO_USD + 1, max_value=2**200),
)


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(["lost_micro_usd", "session_micro_usd"]), value=HOSTILE)
def test_amounts_outside_the_protocol_are_refused_by_name(field: str, value: object) -> None:
    item = {**GOOD, field: value, "session_micro_usd": GOOD["session_micro_usd"]}
    item[field] = value
    body = json.loads(json.dumps(doc(item)))  # NaN and Infinity as Python's json reads them
    ok = (
        isinstance(value, int)
        and not isinstance(value, bool)
        and 0 <= value <= MAX_REPORT_MICRO_USD
        and (field != "lost_micro_usd" or value <= 2_000_000)
        and (field != "session_micro_usd" or value >= 410_000)
    )
    if ok:
        assert SpendReport.from_json(body).interruptions[0].lost_micro_usd >= 0
    else:
        with pytest.raises(ProtocolError, match=r"^interruptions\[0\]\.(lost|session)_micro_usd"):
            SpendReport.from_json(body)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"id": ""}, "id"),
        ({"id": "x" * 201}, "id"),
        ({"id": 7}, "id"),
        ({"at": "2026-11-23T08:00:00"}, "at"),
        ({"at": "9999-01-01T00:00:00+00:00"}, "at"),
        ({"at": "not a time"}, "at"),
        ({"provider": "p" * 33}, "provider"),
        ({"provider": ""}, "provider"),
        ({"market": ["spot"]}, "market"),
        ({"lost_micro_usd": 3_000_000}, "lost_micro_usd"),
    ],
)
def test_a_bad_interruption_is_refused_naming_its_field(
    change: dict[str, object], named: str
) -> None:
    with pytest.raises(ProtocolError, match=rf"^interruptions\[0\]\.{named}:"):
        SpendReport.from_json(doc({**GOOD, **change}))


def test_too_many_repeated_or_future_interruptions_are_refused() -> None:
    many = [{**GOOD, "id": f"i{n}"} for n in range(MAX_INTERRUPTIONS + 1)]
    with pytest.raises(ProtocolError, match=r"^interruptions: must be a list of at most"):
        SpendReport.from_json(doc(*many))
    with pytest.raises(ProtocolError, match=r"^interruptions: an id is repeated"):
        SpendReport.from_json(doc(GOOD, GOOD))
    with pytest.raises(ProtocolError, match=r"^interruptions: must be a list"):
        SpendReport.from_json({**doc(), "interruptions": {"id": "x"}})
    future = SpendReport.from_json(doc({**GOOD, "at": "2026-11-23T10:00:00+00:00"}))
    with pytest.raises(ProtocolError, match=r"^interruptions\[0\]\.at: is in the future"):
        future.check_times(T)


# -- what the single server sends ---------------------------------------------------------


def test_the_server_sends_its_recorded_interruptions_with_stable_ids() -> None:
    last = {
        "action": "interruption",
        "session_id": "old-session",
        "at": "2026-11-23T08:00:00+00:00",
        "provider": "gcp",
        "market": "spot",
        "session_cost_micro_usd": 2_000_000,
        "lost_micro_usd": 410_000,
    }
    current = {**last, "at": "2026-11-23T09:00:00+00:00", "provider": "aws"}
    del current["session_id"]
    sent = reported_interruptions({"current": current, "last": last}, "this-session")
    assert [(i.interruption_id, i.provider, i.lost_micro_usd) for i in sent] == [
        ("old-session@2026-11-23T08:00:00+00:00", "gcp", 410_000),
        ("this-session@2026-11-23T09:00:00+00:00", "aws", 410_000),
    ]
    # the same records give the same ids (the hub counts them once)
    assert reported_interruptions({"current": current, "last": last}, "this-session") == sent
    # a notice still being answered (no record yet), none, or a record past the protocol
    answering = {"provider": "aws", "action": "terminate", "steps": []}
    assert reported_interruptions({"current": answering, "last": None}, "s") == ()
    assert reported_interruptions(None, "s") == ()
    bad = {**last, "lost_micro_usd": float("nan")}
    assert reported_interruptions({"current": None, "last": bad}, "s") == ()


def test_a_flush_the_database_refuses_keeps_them_for_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'hub.sqlite'}")
    row = ledger.open_server(ServerInfo("ann", "", T, True), T4)
    with ledger.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE hub_interruptions"))
    ledger.add_report(row.server_id, report(spot("x", 3)), at(1))
    ledger.flush(at(2))  # refused: logged, the bill's flush goes on
    assert "the reported interruptions are not written" in caplog.text
    assert ledger.all_totals(at(2))["ann"].today_micro_usd == 2_000
    # sent again meanwhile with another figure: the first report's stands
    ledger.add_report(row.server_id, report(spot("x", 5)), at(3))
    interruptions_table.create(ledger.engine)
    ledger.flush(at(4))
    assert counted(ledger, "ann") == (1, 3)
    ledger.close()
