"""Asking for more allowance and deciding, on a real hub ledger (SQLite, then PostgreSQL):
an owner of the group approves and it counts at once (a spent allowance may start again),
a non-owner, the requester and a replayed approval are refused with a sentence, two owners
deciding at once grant it once, and the ledger keeps who asked and decided what, when.
Hostile amounts and reasons are refused (property tests)."""

from __future__ import annotations

import csv
import io
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hub_allowance_service import WED, make, run_until_stopped

from jupyter_gpucost.core.i18n import messages_for
from jupyter_gpucost.core.refusal import Refusal
from jupyter_gpucost.hub.allowance.asking import check_ask, keep_hours, may_decide
from jupyter_gpucost.hub.allowance.usage import AllowanceStanding
from jupyter_gpucost.hub.ledger.requests import RequestStore
from jupyter_gpucost.hub.model import ServerInfo
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web.allowance_view import allowances
from jupyter_gpucost.hub.web.asking_view import (
    ask,
    decide,
    form_body,
    listing,
    page,
    requests_csv,
)
from jupyter_gpucost.hub.web.hubapi import Identity

EN = messages_for("en")
STUDENTS = {"students": {"gpu_hours": 1, "per": "week", "per_member": True}}
OWNER = Identity("user", "prof", scopes=frozenset({"custom:gpucost:approve!group=students"}))
OTHER_OWNER = Identity("user", "dean", scopes=frozenset({"custom:gpucost:approve!group=physics"}))
SAM = Identity("user", "sam", groups=("students",))


def setup(url: str) -> tuple[HubService, RequestStore]:
    service = make(url, None, STUDENTS, minimum_s=600)
    store = RequestStore(service.ledger.engine)  # type: ignore[attr-defined]
    service.allowances.grants = store.granted
    service.learn_groups("sam", ("students",))
    return service, store


def test_an_owner_approves_and_a_stopped_user_may_start_at_once(ledger_url: str) -> None:
    service, store = setup(ledger_url)
    server = ServerInfo("sam", "", WED, True, groups=("students",))
    stopped = run_until_stopped(service, server, WED + timedelta(hours=2))
    now = stopped + timedelta(minutes=5)
    assert allowances(service, "sam", None, now)[0] is not None  # spent: refused
    body = {"source": "group:students", "amount": 2, "reason": "thesis deadline on Friday"}
    made = ask(service, store, SAM, body, now, 3, EN)
    assert (made.state, made.amount_micro) == ("open", 2_000_000)
    # one open request at a time
    with pytest.raises(Refusal, match="already have an open request"):
        ask(service, store, SAM, body, now, 3, EN)
    # the owner sees it to decide; another group's owner does not
    assert [r["id"] for r in listing(store, OWNER, False, set(), now)["to_decide"]] == [made.id]
    assert listing(store, OTHER_OWNER, False, set(), now)["to_decide"] == []
    # refused: the requester themself, another group's owner
    with pytest.raises(Refusal, match="Nobody may decide their own request"):
        decide(store, SAM, True, made.id, {"approve": True}, now, EN)
    with pytest.raises(Refusal, match="Only an owner of group students or an admin"):
        decide(store, OTHER_OWNER, False, made.id, {"approve": True}, now, EN)
    # approved: it counts at once, the spawn is allowed, 2 GPU-hours more this week
    later = now + timedelta(minutes=1)
    decided = decide(store, OWNER, False, made.id, {"approve": True, "note": "ok"}, later, EN)
    assert (decided.state, decided.decided_by, decided.note) == ("approved", "prof", "ok")
    refusal, left = allowances(service, "sam", None, later + timedelta(seconds=1))
    assert refusal is None
    assert left[0]["left"] == 2.0
    # replayed: refused, nothing granted twice
    with pytest.raises(Refusal, match="already decided by prof"):
        decide(store, OWNER, False, made.id, {"approve": True}, later, EN)
    assert allowances(service, "sam", None, later + timedelta(seconds=2))[1][0]["left"] == 2.0
    # the ledger keeps the request and the decision, with who and when
    (kept,) = store.of_users(["sam"], WED)
    assert (kept.user, kept.reason, kept.decided_by) == ("sam", "thesis deadline on Friday", "prof")
    assert kept.asked == now
    assert kept.decided == later
    # next week the grant is gone with the week
    monday = datetime(2026, 11, 9, 8, tzinfo=UTC)
    assert allowances(service, "sam", None, monday)[1][0]["left"] == 1.0
    service.close(monday)


def test_two_owners_deciding_at_once_grant_it_once(ledger_url: str) -> None:
    service, store = setup(ledger_url)
    now = WED + timedelta(hours=1)
    body = {"source": "group:students", "amount": 1, "reason": "more runs"}
    made = ask(service, store, SAM, body, now, 3, EN)
    second = Identity("user", "ta", scopes=OWNER.scopes)
    results: list[str] = []
    start = threading.Barrier(2)

    def run(who: Identity) -> None:
        start.wait(10)
        try:
            decide(store, who, False, made.id, {"approve": True}, now, EN)
            results.append("granted")
        except Refusal as e:
            results.append(str(e))

    threads = [threading.Thread(target=run, args=(w,)) for w in (OWNER, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    refused = [r for r in results if r != "granted"]
    assert len(refused) == 1
    assert refused[0] in (
        "This request was already decided by prof.",
        "This request was already decided by ta.",
    )
    assert results.count("granted") == 1
    assert store.granted(["sam"], "group:students", WED, now + timedelta(seconds=1)) == 10**6
    service.close(now)


def test_a_cap_of_requests_per_week(ledger_url: str) -> None:
    service, store = setup(ledger_url)
    now = WED
    for i in range(2):
        made = ask(
            service,
            store,
            SAM,
            {"source": "group:students", "amount": 1, "reason": f"r{i}"},
            now,
            2,
            EN,
        )
        decide(store, OWNER, False, made.id, {"approve": False}, now, EN)
    with pytest.raises(Refusal, match="asked 2 times this week"):
        ask(
            service,
            store,
            SAM,
            {"source": "group:students", "amount": 1, "reason": "again"},
            now,
            2,
            EN,
        )
    # declined: nothing granted
    assert allowances(service, "sam", None, now)[1][0]["left"] == 1.0
    service.close(now)


STANDING = AllowanceStanding(
    "group:students", "gpu_hours", "week", 10**6, 0, 10**6, WED + timedelta(days=5)
)


@settings(max_examples=200, deadline=None)
@given(
    amount=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not 0 < v <= 10),
        st.sampled_from(["NaN", "inf", "-1", "0", "1e9", "10.0000001", True, None, [1], "lots"]),
        st.integers(min_value=11) | st.integers(max_value=0),
        st.decimals(allow_nan=True).filter(lambda v: not v.is_finite() or not 0 < v <= 10),
    )
)
def test_negative_huge_or_nan_amounts_are_refused_with_a_sentence(amount: object) -> None:
    with pytest.raises(Refusal) as e:
        check_ask([STANDING], "group:students", amount, "why", [], WED, UTC, 3)
    assert str(e.value).startswith("Ask for more than 0 and at most 10")


@settings(max_examples=100, deadline=None)
@given(
    reason=st.one_of(
        st.just(""),
        st.just("   "),
        st.text(min_size=501, max_size=600).filter(lambda t: len(t.strip()) > 500),
        st.text(min_size=1, max_size=20).map(lambda t: t + "\x00"),
        st.text(min_size=1, max_size=20).map(lambda t: "ok\u202e" + t),
        st.integers(),
    )
)
def test_hostile_reasons_are_refused(reason: object) -> None:
    with pytest.raises(Refusal):
        check_ask([STANDING], "group:students", Decimal(1), reason, [], WED, UTC, 3)


def test_only_the_groups_owners_and_admins_decide() -> None:
    may_decide("prof", False, OWNER.scopes, "sam", "group:students")
    may_decide("root", True, (), "sam", "user")
    with pytest.raises(Refusal, match="Only an admin may decide a request on a user's own"):
        may_decide("prof", False, OWNER.scopes, "sam", "user")
    with pytest.raises(Refusal, match="Only an owner of group students"):
        # a scope of another group, or one that only looks alike
        may_decide("x", False, {"custom:gpucost:approve!group=students2"}, "sam", "group:students")
    with pytest.raises(Refusal, match="Nobody may decide their own request"):
        may_decide("root", True, (), "root", "user")
    with pytest.raises(Refusal, match="no such allowance"):
        check_ask([STANDING], "group:physics", 1, "why", [], WED, UTC, 3)


def test_the_requests_csv_holds_each_step_and_runs_no_formula(ledger_url: str) -> None:
    service, store = setup(ledger_url)
    body = {"source": "group:students", "amount": 1, "reason": "=HYPERLINK(evil)"}
    made = ask(service, store, SAM, body, WED, 3, EN)
    decide(store, OWNER, False, made.id, {"approve": False, "note": "-not now"}, WED, EN)
    header, row = csv.reader(io.StringIO(requests_csv(store, WED - timedelta(days=1))))
    record = dict(zip(header, row, strict=True))
    assert record["reason"] == "'=HYPERLINK(evil)"
    assert record["note"] == "'-not now"
    assert (record["user"], record["state"], record["decided_by"]) == ("sam", "declined", "prof")
    service.close(WED)


def test_an_approval_during_the_countdown_clears_it_at_the_next_poll(ledger_url: str) -> None:
    service, store = setup(ledger_url)
    server = ServerInfo("sam", "", WED, True, groups=("students",))
    service.sync([server], WED)
    near = WED + timedelta(minutes=57)
    service.sync([server], near)
    assert next(iter(service.state.values())).stop_at is not None  # counting down
    made = ask(
        service, store, SAM, {"source": "group:students", "amount": 1, "reason": "x"}, near, 3, EN
    )
    decide(store, OWNER, False, made.id, {"approve": True}, near, EN)
    service.sync([server], near + timedelta(seconds=30))
    standing = next(iter(service.state.values()))
    assert standing.stop_at is None  # the grace is over: an hour more to run
    assert not service.due(near + timedelta(minutes=5))
    service.close(near + timedelta(seconds=30))


@given(
    st.dictionaries(
        st.sampled_from(["source", "amount", "reason", "approve", "_xsrf", "user"]),
        st.text(max_size=20),
    )
)
def test_the_pages_forms_carry_only_what_the_api_takes(fields: dict[str, str]) -> None:
    body = form_body(fields)
    assert set(body) <= {"source", "amount", "reason", "approve"}
    # only the two buttons decide; any other value is no answer (decide refuses it)
    if "approve" in fields:
        assert body["approve"] is {"approve": True, "decline": False}.get(fields["approve"])


def test_the_user_page_shows_the_request_and_the_owner_the_buttons(ledger_url: str) -> None:
    service, store = setup(ledger_url)
    fields = {"source": "group:students", "amount": "1.5", "reason": "thesis", "_xsrf": "x"}
    made = ask(service, store, SAM, form_body(fields), WED, 3, EN)
    mine = page(service, store, SAM, False, WED, EN, "$")
    assert mine["sources"] == [("group:students", "gpu_hours")]
    assert (mine["latest"]["id"], mine["latest"]["state"]) == (made.id, "open")
    assert mine["latest"]["amount_text"] == "1.5 GPU-hours"
    assert mine["to_decide"] == []  # nobody decides their own
    assert page(service, store, OTHER_OWNER, False, WED, EN, "$")["to_decide"] == []
    (shown,) = page(service, store, OWNER, False, WED, EN, "$")["to_decide"]
    assert (shown["user"], shown["amount_text"]) == ("sam", "1.5 GPU-hours")
    decide(store, OWNER, False, made.id, form_body({"approve": "approve"}), WED, EN)
    assert page(service, store, SAM, False, WED, EN, "$")["latest"]["state"] == "approved"
    service.close(WED)


def test_keep_running_four_hours_moves_the_countdown_four_hours(ledger_url: str) -> None:
    service, store = setup(ledger_url)
    server = ServerInfo("sam", "", WED, True, groups=("students",))
    service.sync([server], WED)
    near = WED + timedelta(minutes=57)
    service.sync([server], near)
    assert next(iter(service.state.values())).stop_at is not None  # counting down
    body = {"source": "group:students", "keep_hours": "4", "reason": "training ends at 6"}
    made = ask(service, store, SAM, form_body(body), near, 3, EN)
    # his server uses 1 GPU-hour an hour: 4 hours of it, recorded like any request
    assert (made.unit, made.amount_micro, made.reason) == ("gpu_hours", 4_000_000, body["reason"])
    decide(store, OWNER, False, made.id, {"approve": True}, near, EN)
    service.sync([server], near + timedelta(seconds=30))
    assert next(iter(service.state.values())).stop_at is None
    assert not service.due(near + timedelta(hours=3, minutes=50))
    service.close(near + timedelta(seconds=30))


@given(st.one_of(st.text(max_size=6), st.integers(), st.floats(), st.none(), st.booleans()))
def test_hostile_hours_to_keep_running_are_refused_with_a_sentence(hours: object) -> None:
    text = hours.strip() if isinstance(hours, str) else str(hours)
    whole = not isinstance(hours, bool | float) and text.isascii() and text.isdecimal()
    if whole and 1 <= int(text) <= 24:
        assert keep_hours(hours, EN) == int(text)
    else:
        with pytest.raises(Refusal, match=r"^Ask to keep running for 1 to 24 whole hours\.$"):
            keep_hours(hours, EN)
