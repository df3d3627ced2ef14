"""The gpucost hub service against its own users, on a real JupyterHub on loopback.

mallory holds nothing but her own hub token (her server runs with the extension off: she
reports by hand). bob shares the group ``team`` (a $100 month budget) with her and his
server reports for itself. Every attack is refused or bounded, the service keeps
answering, and afterwards an over-budget user is still stopped on time, one of them a
server that ignores SIGINT and SIGTERM, billed until the Hub reports it gone.

The tests run in order on one hub (start-up and spawns take seconds).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlparse

import pytest
from hub_service_fixture import NO_EXTENSION, USD_PER_S, Hub, dig, running_hub, spawn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.catalog import load_catalog

POLL_S = 1.0
RATE_PER_S = 20.0
BURST = 100
MAX_GPUS = 8
#: the most a report can bill a second: 8 GPUs at the catalog's dearest price
CEILING_USD_PER_S = MAX_GPUS * float(max(r.per_gpu_hour for r in load_catalog().rows)) / 3600
#: the Hub's signal sequence for a server that will not stop: SIGINT, SIGTERM, SIGKILL
INTERRUPT_S, TERM_S, KILL_S = 5, 5, 5
#: day budgets of the two servers stopped at the end (about 21 s of 2 A100s: both are
#: spawned by then, even on a loaded machine)
DAY_USD = 0.04
#: how long the Hub itself may take to stop a well-behaved server on a loaded machine
HUB_STOP_S = 15.0

#: a user's own Jupyter config that ignores the Hub's SIGINT and SIGTERM
IGNORE_SIGNALS = """
import signal

_signal = signal.signal


def _ignore(sig, handler):
    if sig in (signal.SIGINT, signal.SIGTERM):
        return _signal(sig, signal.SIG_IGN)
    return _signal(sig, handler)


signal.signal = _ignore
_signal(signal.SIGINT, signal.SIG_IGN)
_signal(signal.SIGTERM, signal.SIG_IGN)
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubattacks")
    with running_hub(
        root,
        budgets={"dave": {"day": DAY_USD}, "frank": {"day": DAY_USD}},
        flush_s=2.0,
        users=("mallory", "bob", "dave", "frank"),
        groups={"team": ["mallory", "bob"]},
        group_budgets={"team": {"month": 100}},
        user_configs={"mallory": NO_EXTENSION, "dave": NO_EXTENSION + IGNORE_SIGNALS},
        service_extra=(
            f"c.GpuCostHub.report_rate_per_s = {RATE_PER_S}\n"
            f"c.GpuCostHub.report_burst = {BURST}\n"
            f"c.GpuCostHub.max_gpus_per_server = {MAX_GPUS}\n"
        ),
        hub_extra=(
            f"c.Spawner.interrupt_timeout = {INTERRUPT_S}\n"
            f"c.Spawner.term_timeout = {TERM_S}\n"
            f"c.Spawner.kill_timeout = {KILL_S}\n"
        ),
    ) as hub:
        spawn(hub, "mallory")
        spawn(hub, "bob")
        yield hub


def report(cost_usd: float = 0.0, **extra: Any) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat()
    return {
        "version": 1,
        "session_id": "s-1",
        "server_name": "",
        "started": now,
        "sent": now,
        "cost_micro_usd": round(cost_usd * 1_000_000),
        "idle_micro_usd": 0,
        "rate_micro_usd_per_s": 1900,
        **extra,
    }


def strict_json(text: str | bytes) -> Any:
    """JSON as a browser reads it: no NaN, no Infinity."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def raw(hub: Hub, method: str, path: str, token: str | None, body: bytes = b"") -> tuple[int, str]:
    """One request on its own connection; the answer's status and text."""
    url = urlparse(f"{hub.service}{path}")
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    try:
        conn.request(method, url.path, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def me(hub: Hub, user: str) -> dict[str, Any]:
    code, text = raw(hub, "GET", "api/me", hub.token_for(user))
    assert code == 200, text
    doc: dict[str, Any] = strict_json(text)
    return doc


def session_bound_usd(session: dict[str, Any]) -> float:
    """What the ceiling allows a session: 8 GPUs at the dearest price, from the Hub's
    start to its stop (or now), billed in whole seconds."""
    started = datetime.fromisoformat(session["started"])
    ended = datetime.fromisoformat(session["stopped"]) if session["stopped"] else None
    seconds = ((ended or datetime.now(UTC)) - started).total_seconds()
    return CEILING_USD_PER_S * (seconds + 1) + 1e-6


def assert_within_the_rule(hub: Hub, user: str) -> None:
    mine = me(hub, user)
    bound = sum(session_bound_usd(s) for s in mine["sessions"])
    for session in mine["sessions"]:
        assert session["bill_usd"] <= session_bound_usd(session), session
    assert mine["today_usd"] <= bound, (mine["today_usd"], bound)


def assert_the_sums_run(hub: Hub) -> None:
    bob = hub.token_for("bob")
    admin = hub.tokens["prometheus"]  # a service with custom:gpucost:admin
    # the admin data: every user's sums, as JSON and CSV
    code, text = raw(hub, "GET", "api/admin/summary", admin)
    assert code == 200, text
    strict_json(text)
    code, text = raw(hub, "GET", "api/admin/users.csv", admin)
    assert code == 200, text
    assert raw(hub, "GET", "api/me", bob)[0] == 200


HOSTILE: list[tuple[str, bytes]] = [
    ("cells", json.dumps(report(cells=10**20)).encode()),
    ("energy_wh", json.dumps(report(energy_wh=float("nan"))).encode()),
    ("energy_wh", json.dumps(report(energy_wh=float("inf"))).encode()),
    ("energy_wh", json.dumps(report()).encode()[:-1] + b', "energy_wh": 1e400}'),
    ("cost_micro_usd", json.dumps(report(cost_micro_usd=999_999_999_999_999)).encode()),
    ("cost_micro_usd", json.dumps(report(cost_micro_usd=-1)).encode()),
    ("cost_micro_usd", json.dumps(report(cost_micro_usd=1.5)).encode()),
    ("rate_micro_usd_per_s", json.dumps(report(rate_micro_usd_per_s=10**18)).encode()),
    ("idle_micro_usd", json.dumps(report(1.0, idle_micro_usd=2_000_000)).encode()),
    (
        "kernels[0].cost_micro_usd",
        json.dumps(
            report(kernels=[{"kernel_id": "k", "name": "n", "cost_micro_usd": 10**20}])
        ).encode(),
    ),
    ("started", json.dumps(report(started="0001-01-01T00:00:00+00:00")).encode()),
    (
        "sent",
        json.dumps(report(sent=(datetime.now(UTC) + timedelta(days=400)).isoformat())).encode(),
    ),
    ("the body is not JSON", b"[" * 60_000),
]


def test_hostile_values_are_refused_naming_the_field(hub: Hub) -> None:
    mallory = hub.token_for("mallory")
    for field, body in HOSTILE:
        code, text = raw(hub, "POST", "api/report", mallory, body)
        assert code == 400, (field, text)
        assert strict_json(text)["message"].startswith(field), (field, text)
    # her own page and everyone's sums are still JSON a browser can read
    assert me(hub, "mallory")["sessions"][0]["energy_wh"] is None
    assert_the_sums_run(hub)


def test_new_session_ids_and_out_of_order_reports_add_nothing(hub: Hub) -> None:
    mallory = hub.token_for("mallory")
    time.sleep(2)  # the ceiling is above these figures 2 s after her start
    # ten reports of $0.01, each with a new session id: one spawn, so $0.01
    for i in range(10):
        body = json.dumps(report(0.01, session_id=f"s-{i % 2}")).encode()
        assert raw(hub, "POST", "api/report", mallory, body)[0] == 200
    hub.wait(
        "mallory's report to be counted",
        lambda: (dig(me(hub, "mallory"), "sessions", 0, "reported_usd") or 0) > 0,
        10,
    )
    assert me(hub, "mallory")["sessions"][0]["reported_usd"] == pytest.approx(0.01)
    # out of order: the later, lower report takes nothing back and adds nothing
    for cost in (0.012, 0.011, 0.0115):
        assert raw(hub, "POST", "api/report", mallory, json.dumps(report(cost)).encode())[0] == 200
    assert me(hub, "mallory")["sessions"][0]["reported_usd"] == pytest.approx(0.012)
    assert_within_the_rule(hub, "mallory")


def test_a_report_cannot_spend_a_group_mates_budget(hub: Hub) -> None:
    mallory = hub.token_for("mallory")
    # a billion dollars is past what a report may say at all
    body = json.dumps(report(cost_micro_usd=10**15)).encode()
    assert raw(hub, "POST", "api/report", mallory, body)[0] == 400
    # a million is within the protocol: counted only up to what her GPUs could cost
    assert raw(hub, "POST", "api/report", mallory, json.dumps(report(1e6)).encode())[0] == 200
    time.sleep(3 * POLL_S)  # a few polls weigh the group's budget
    assert_within_the_rule(hub, "mallory")
    bob = me(hub, "bob")
    (team,) = [b for b in bob["budgets"] if b["source"] == "group:team"]
    pooled_bound = sum(
        session_bound_usd(s) for user in ("mallory", "bob") for s in me(hub, user)["sessions"]
    )
    assert team["spent_usd"] <= pooled_bound < 100
    assert not team["exceeded"]
    assert [s["stop_at"] for s in bob["running"]] == [None]
    assert (hub.server("bob") or {}).get("ready")


def test_an_oversized_body_is_answered_413_with_a_message(hub: Hub) -> None:
    mallory = hub.token_for("mallory")
    code, text = raw(hub, "POST", "api/report", mallory, b" " * (5 << 20))
    assert code == 413, text
    assert strict_json(text)["message"] == "a report is at most 65536 bytes"
    # without a token the Hub named, nothing is read for nothing: a 413 at once, and the
    # connection closed (the client, still sending, may see it reset first)
    for token in (None, "not-a-token"):
        try:
            code, text = raw(hub, "POST", "api/report", token, b" " * (5 << 20))
        except (ConnectionError, http.client.HTTPException):
            pass
        else:
            assert code == 413, text
    assert me(hub, "mallory")["user"] == "mallory"


def test_a_burst_of_a_thousand_reports_costs_the_others_nothing(hub: Hub) -> None:
    mallory = hub.token_for("mallory")
    url = urlparse(hub.service)
    body = json.dumps(report(0.001)).encode()
    codes: list[int] = []
    lock = threading.Lock()

    def flood(n: int) -> None:
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=30)
        headers = {"Authorization": f"token {mallory}", "Content-Type": "application/json"}
        try:
            for _ in range(n):
                conn.request("POST", f"{url.path}api/report", body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                with lock:
                    codes.append(response.status)
        finally:
            conn.close()

    bob_before = me(hub, "bob")["sessions"][0]["reported_usd"] or 0
    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(flood, [125] * 8))
    took = time.monotonic() - began
    assert len(codes) == 1000
    assert set(codes) <= {200, 429}, set(codes)
    # her bucket: the burst, then the rate, and nothing more
    assert codes.count(200) <= BURST + RATE_PER_S * took + 1, (codes.count(200), took)
    # bob's own server's reports are still taken, and his token is not limited by hers
    code, text = raw(hub, "POST", "api/report", hub.token_for("bob"), body)
    assert code == 200, text
    hub.wait(
        "bob's server's reports to be counted after the burst",
        lambda: (dig(me(hub, "bob"), "sessions", 0, "reported_usd") or 0) > bob_before,
        20,
    )


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["2026-11-25T12:00:00+00:00", "9999-12-31T23:59:59+14:00", "", "s-1"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = [
    "version",
    "session_id",
    "server_name",
    "started",
    "sent",
    "cost_micro_usd",
    "idle_micro_usd",
    "rate_micro_usd_per_s",
    "energy_wh",
    "cells",
    "kernels",
    "gpu_models",
]


@st.composite
def hostile_reports(draw: st.DrawFn) -> object:
    """A valid report with some fields replaced by anything JSON can say, or anything."""
    if draw(st.integers(0, 9)) == 0:
        return draw(JSONISH)
    base = report(draw(st.floats(0, 2e6)))
    changes = draw(st.dictionaries(st.sampled_from(FIELDS), JSONISH, max_size=3))
    for field in draw(st.lists(st.sampled_from(FIELDS), max_size=2)):
        base.pop(field, None)
    return {**base, **changes}


def test_arbitrary_reports_never_break_the_service(hub: Hub) -> None:
    mallory = hub.token_for("mallory")
    time.sleep(BURST / RATE_PER_S)  # her bucket, emptied by the burst, is full again
    frank_before = me(hub, "frank")
    bob_sessions = len(me(hub, "bob")["sessions"])
    seen: set[int] = set()

    @settings(
        max_examples=80,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(hostile_reports())
    def post(doc: object) -> None:
        body = json.dumps(doc, allow_nan=True).encode()
        code, text = raw(hub, "POST", "api/report", mallory, body)
        # refused or taken, never a 500; a refusal is a JSON message
        assert code in (200, 400, 409, 429), (code, text, body[:300])
        seen.add(code)
        answer = strict_json(text)
        if code != 200:
            assert answer["message"], answer

    post()
    assert 400 in seen, seen
    assert 200 in seen, seen
    # every total within the rule, the other users unchanged, the ledger's sums still run
    time.sleep(2.5)  # a flush
    assert_within_the_rule(hub, "mallory")
    assert_within_the_rule(hub, "bob")
    assert me(hub, "frank") == frank_before
    assert len(me(hub, "bob")["sessions"]) == bob_sessions
    assert_the_sums_run(hub)


def test_over_budget_servers_are_stopped_and_one_that_ignores_sigterm_is_billed_until_gone(
    hub: Hub,
) -> None:
    # frank's server is well-behaved; dave's ignores SIGINT and SIGTERM (his own config)
    with ThreadPoolExecutor(2) as pool:
        for code, body in pool.map(lambda user: spawn(hub, user), ["frank", "dave"]):
            assert code in (201, 202), body
    for user in ("frank", "dave"):
        hub.wait(
            f"the service to open {user}'s session", lambda u=user: dig(me(hub, u), "sessions"), 10
        )
    started = {
        user: datetime.fromisoformat(me(hub, user)["sessions"][0]["started"])
        for user in ("frank", "dave")
    }
    # when each day budget is spent: the allocation's cost reaches it (whole seconds)
    spent = {user: when + timedelta(seconds=DAY_USD / USD_PER_S) for user, when in started.items()}
    gone: dict[str, datetime] = {}

    def stopped(user: str) -> bool:
        if user not in gone and hub.server(user) is None:
            gone[user] = datetime.now(UTC)
        return user in gone

    signals_s = INTERRUPT_S + TERM_S + KILL_S
    hub.wait("frank's server to stop", lambda: stopped("frank"), 120)
    hub.wait("dave's server to stop", lambda: stopped("dave"), 120 + signals_s)
    # frank: a budget is a cap: the stop asked at the first poll after the money ran out
    # (no grace after it), and the Hub stopped him
    latest = spent["frank"] + timedelta(seconds=2 * POLL_S + HUB_STOP_S)
    assert gone["frank"] <= latest, (gone["frank"], spent["frank"])
    # dave: the Hub went through SIGINT and SIGTERM before it could kill his server, and
    # the ledger billed him until the Hub reported it gone, not until the stop was asked
    hub.wait(
        "dave's session to be closed",
        lambda: dig(me(hub, "dave"), "sessions", 0, "stopped"),
        10,
    )
    (session,) = me(hub, "dave")["sessions"]
    ended = datetime.fromisoformat(session["stopped"])
    asked_at_the_earliest = spent["dave"] - timedelta(seconds=1)
    assert ended - asked_at_the_earliest >= timedelta(seconds=INTERRUPT_S + TERM_S - POLL_S)
    assert gone["dave"] - timedelta(seconds=POLL_S + 4) <= ended <= gone["dave"]
    billed_s = (ended - started["dave"]).total_seconds()
    assert session["bill_usd"] >= USD_PER_S * billed_s - 1e-5
    # neither may spawn again today
    for user in ("frank", "dave"):
        code, body = hub.call("POST", f"/users/{user}/server")
        assert code == 403, body
