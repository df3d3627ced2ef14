"""Reports to the hub service, against a small real HTTP service on loopback that speaks
the protocol (core.hub_protocol): the server posts its spend with its own hub token, and
the service's budgets and stop time reach the budget (API and status)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from kernel_notebook import text
from test_config import start_server
from test_kernel_link import run_async
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.core import i18n
from jupyter_gpucost.core.hub_protocol import (
    ENV_HUB_URL,
    HUB_SOURCE_LABEL,
    HubAllowance,
    HubBudget,
    HubReply,
    ProtocolError,
    SpendReport,
)
from jupyter_gpucost.core.protocol import binding_standing
from jupyter_gpucost.server import hub_link
from jupyter_gpucost.server.budget.policy import (
    Budget,
    BudgetPolicy,
    Enforce,
    GraceCleared,
    GraceStarted,
    Standing,
)
from jupyter_gpucost.server.hub_link import (
    HubLinkConfig,
    HubLinkError,
    HubReporter,
    ReportConnection,
    post_report,
)

TOKEN = "hub-token-of-this-server-0123456789"


@dataclass
class FakeService:
    """The hub service's report endpoint (HTTP/1.1, connections kept alive): checks the
    token, keeps the reports and the client port of the connection each came on, answers
    with whatever reply the test sets."""

    reply: HubReply
    reports: list[SpendReport] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    url: str = ""
    restart: Callable[[], None] = lambda: None

    @property
    def connections(self) -> int:
        return len(set(self.ports))


@pytest.fixture
def service() -> Iterator[FakeService]:
    fake = FakeService(
        HubReply(user="alice", session_micro_usd=0, today_micro_usd=0, month_micro_usd=0)
    )
    open_sockets: list[socket.socket] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            open_sockets.append(self.connection)

        def do_POST(self) -> None:
            fake.tokens.append(self.headers.get("Authorization", ""))
            if self.path != "/services/gpucost/api/report":
                self.send_error(404)
                return
            if self.headers.get("Authorization") != f"token {TOKEN}":
                self.send_error(403)
                return
            body = self.rfile.read(int(self.headers["Content-Length"]))
            fake.reports.append(SpendReport.from_json(json.loads(body)))
            fake.ports.append(self.client_address[1])
            out = json.dumps(fake.reply.to_json()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    def serve(port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def close(server: ThreadingHTTPServer) -> None:
        server.shutdown()
        server.server_close()
        # the connections kept alive go with it, as they do when a process exits
        while open_sockets:
            with contextlib.suppress(OSError):
                open_sockets.pop().shutdown(socket.SHUT_RDWR)

    servers = [serve(0)]
    port = servers[0].server_address[1]
    fake.url = f"http://127.0.0.1:{port}/services/gpucost/"

    def restart() -> None:
        close(servers.pop())
        servers.append(serve(port))

    fake.restart = restart
    try:
        yield fake
    finally:
        close(servers.pop())


def link_config(tmp_path: Path) -> dict[str, Any]:
    """The server's settings in these tests: simulated GPUs, a report every second."""
    return {
        "telemetry": "simulated",
        "sample_interval_s": 0.2,
        "hub_report_interval_s": 1.0,
        "budget_state_path": str(tmp_path / "budget.json"),
    }


@pytest.fixture
def gpucost_config(
    service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    monkeypatch.setenv(ENV_HUB_URL, service.url)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", TOKEN)
    monkeypatch.setenv("JUPYTERHUB_SERVER_NAME", "gpu")
    return {**link_config(tmp_path), "budget_save_timeout_s": 5.0}


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def server_log(jp_serverapp: Any) -> Iterator[Lines]:
    """What the extension logs from now on (its logger does not propagate to pytest's)."""
    (app,) = jp_serverapp.extension_manager.extension_apps["jupyter_gpucost"]
    lines = Lines()
    app.log.addHandler(lines)
    try:
        yield lines
    finally:
        app.log.removeHandler(lines)


async def get(jp_fetch: Any, *path: str) -> dict[str, Any]:
    return dict(json.loads((await jp_fetch("gpucost", "api", *path)).body))


async def until(what: Callable[[], Awaitable[bool]], message: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await what():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out: {message}")


async def test_reports_arrive_with_the_servers_token_and_its_spend(
    jp_fetch: Any, service: FakeService, server_log: Lines
) -> None:
    async def costing() -> bool:
        return any(r.cost_micro_usd > 0 for r in service.reports)

    await until(costing, "a report with a cost")
    status = await get(jp_fetch, "status")
    assert set(service.tokens) == {f"token {TOKEN}"}
    report = service.reports[-1]
    assert report.session_id == status["session_id"]
    assert report.server_name == "gpu"
    assert report.started.tzinfo is not None
    assert (
        abs((report.started - datetime.fromisoformat(status["session_started"])).total_seconds())
        < 1
    )
    assert report.rate_micro_usd_per_s > 0
    assert 0 <= report.idle_micro_usd <= report.cost_micro_usd
    assert report.gpu_models
    assert report.cells == 0
    # reports go on at the interval, and never log the token
    count = len(service.reports)
    await until(lambda: _true(len(service.reports) > count), "a second report")
    assert TOKEN not in server_log.text


async def _true(value: bool) -> bool:
    return value


async def test_the_server_is_told_when_the_hubs_ledger_is_unreachable(
    jp_fetch: Any, service: FakeService
) -> None:
    down = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)
    service.reply = HubReply(
        user="alice",
        session_micro_usd=1_500_000,
        today_micro_usd=3_000_000,
        month_micro_usd=40_000_000,
        budgets=(HubBudget("day", 10_000_000, 3_000_000, "user"),),
        ledger_unreachable_since=down,
    )

    async def told() -> bool:
        hub = (await get(jp_fetch, "budget"))["hub"]
        return bool(hub and hub["error"])

    await until(told, "the hub's ledger outage in hub.error")
    hub = (await get(jp_fetch, "budget"))["hub"]
    local = down.astimezone()
    assert hub["error"] == (
        f"the hub's ledger is unreachable since {local:%H:%M} {local.tzname()}; the hub bills "
        "and enforces budgets from memory meanwhile, and writes it all when the ledger is back"
    )
    # the hub's figures still count: billing and budgets go on from its memory
    assert hub["today_usd"] == 3.0
    service.reply = replace(service.reply, ledger_unreachable_since=None)

    async def cleared() -> bool:
        return (await get(jp_fetch, "budget"))["hub"]["error"] is None

    await until(cleared, "hub.error cleared once the hub's ledger is back")


async def test_hub_budgets_are_locked_and_counted_as_the_hub_counts(
    jp_fetch: Any, service: FakeService
) -> None:
    service.reply = HubReply(
        user="alice",
        session_micro_usd=1_500_000,
        today_micro_usd=3_000_000,
        month_micro_usd=40_000_000,
        budgets=(
            HubBudget("day", 10_000_000, 3_000_000, "user"),
            HubBudget("month", 100_000_000, 40_000_000, "group:physics"),
        ),
    )

    async def shown() -> bool:
        hub = (await get(jp_fetch, "budget"))["hub"]
        return bool(hub and hub["budgets"])

    await until(shown, "the hub's budgets in the API")
    budget = await get(jp_fetch, "budget")
    hub = budget["hub"]
    assert hub["source"] == HUB_SOURCE_LABEL
    assert hub["user"] == "alice"
    assert hub["today_usd"] == 3.0
    assert hub["month_usd"] == 40.0
    assert hub["error"] is None
    day, month = hub["budgets"]
    assert day["kind"] == "hub"
    assert day["locked"] is True
    assert day["source"] == HUB_SOURCE_LABEL
    assert (day["scope"], day["amount_usd"], day["spent_usd"]) == ("day", 10.0, 3.0)
    assert (month["owner"], month["spent_usd"], month["share"]) == ("group:physics", 40.0, 0.4)

    async def ok() -> bool:
        return bool((await get(jp_fetch, "budget"))["state"] == "ok")

    await until(ok, "the budget's state with the hub's budgets")
    status = await get(jp_fetch, "status")
    assert status["budget"]["hub"]["budgets"][1]["owner"] == "group:physics"
    # the API refuses to change it, as it refuses the admin's hard budget
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch(
            "gpucost",
            "api",
            "budget",
            method="PUT",
            body=json.dumps({"kind": "hard", "amount_usd": 99}),
        )
    assert refused.value.code == 403


async def test_the_hubs_allowances_are_shown_read_only_in_the_status(
    jp_fetch: Any, service: FakeService
) -> None:
    monday = datetime(2026, 11, 30, tzinfo=UTC)
    service.reply = HubReply(
        user="alice",
        session_micro_usd=0,
        today_micro_usd=0,
        month_micro_usd=0,
        allowances=(
            HubAllowance("group:students", "gpu_hours", "week", 1_000_000, 250_000, monday),
        ),
    )

    async def shown() -> bool:
        hub = (await get(jp_fetch, "status"))["budget"]["hub"]
        return bool(hub and hub["allowances"])

    await until(shown, "the hub's allowances in the status")
    (allowance,) = (await get(jp_fetch, "status"))["budget"]["hub"]["allowances"]
    assert allowance == {
        "source": "group:students",
        "unit": "gpu_hours",
        "period": "week",
        "amount": 1.0,
        "left": 0.25,
        "refill_at": "2026-11-30T00:00:00Z",
    }


async def test_gpucost_in_a_kernel_says_what_is_left_of_the_hubs_allowances(
    jp_fetch: Any, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "UTC")  # the kernel writes the top-up in its own time zone
    monday = datetime(2026, 11, 30, tzinfo=UTC)
    service.reply = HubReply(
        user="alice",
        session_micro_usd=0,
        today_micro_usd=0,
        month_micro_usd=0,
        allowances=(
            HubAllowance("group:students", "gpu_hours", "week", 10_000_000, 6_333_333, monday),
            HubAllowance("user", "usd", "month", 20_000_000, 12_400_000, monday),
        ),
    )

    async def shown() -> bool:
        hub = (await get(jp_fetch, "status"))["budget"]["hub"]
        return bool(hub and hub["allowances"])

    await until(shown, "the hub's allowances in the status")
    nb = await run_async(["%load_ext jupyter_gpucost", "%gpucost"])
    summary = text(nb.cells[1])
    assert "this session has cost $" in summary
    # the time left in the server's duration words; the hub set it, read-only
    assert (
        "hub allowance: 6 h 20 min of GPU time left this week, fills up again on Mon "
        "2026-11-30 00:00 UTC; group students, set by your hub admin (read-only)" in summary
    )
    assert "hub allowance: $12.40 left this month" in summary
    assert "set by your hub admin (read-only)" in summary


@pytest.mark.parametrize(
    ("allowance", "error"),
    [
        ({"unit": "credits"}, "allowances[0].unit: must be one of usd, gpu_hours"),
        ({"left_micro": -1}, "left_micro: must be a whole number"),
        ({"left_micro": 10**16}, "left_micro: must be a whole number"),
        ({"amount_micro": 1.5}, "amount_micro: must be a whole number"),
        ({"refill_at": "monday"}, "refill_at: 'monday' is not an ISO 8601 time"),
        ({"period": ""}, "period"),
    ],
)
def test_a_hostile_allowance_in_a_reply_is_refused(allowance: dict[str, Any], error: str) -> None:
    good = HubAllowance("user", "usd", "week", 5, 4, datetime(2026, 11, 30, tzinfo=UTC))
    doc = HubReply("alice", 0, 0, 0, allowances=(good,)).to_json()
    assert HubReply.from_json(doc).allowances == (good,)
    doc["allowances"] = [{**good.to_json(), **allowance}]
    with pytest.raises(ProtocolError, match=re.escape(error)):
        HubReply.from_json(doc)


async def test_a_stop_at_starts_the_countdown_to_it(jp_fetch: Any, service: FakeService) -> None:
    stop_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=120)
    service.reply = HubReply(
        user="alice",
        session_micro_usd=10_000_000,
        today_micro_usd=10_000_000,
        month_micro_usd=10_000_000,
        budgets=(HubBudget("day", 10_000_000, 10_000_000, "user"),),
        stop_at=stop_at,
        reason="daily budget of $10.00 spent",
    )

    async def counting_down() -> bool:
        return bool((await get(jp_fetch, "budget"))["state"] == "grace")

    await until(counting_down, "the countdown")
    budget = await get(jp_fetch, "budget")
    assert budget["hub"]["stop_at"] == stop_at.isoformat().replace("+00:00", "Z")
    assert budget["hub"]["reason"] == "daily budget of $10.00 spent"
    # in Chinese: the catalog's sentence, never the hub's English one
    i18n.set_language("zh_CN")  # as JupyterLab's language setting sets it
    try:
        chinese = await get(jp_fetch, "budget")
    finally:
        i18n.set_language("en")
    assert chinese["hub"]["reason"] == "Hub 管理员设置的预算已用完。"
    grace = budget["grace"]
    # the countdown ends the save timeout before the hub stops the server
    ends = datetime.fromisoformat(grace["ends"].replace("Z", "+00:00"))
    assert ends == stop_at - timedelta(seconds=5)
    assert grace["can_raise"] is False
    assert budget["binding"] == "hub"
    assert any(e["kind"] == "grace" for e in budget["events"])

    # the admin raised the budget: the hub no longer stops the server
    service.reply = HubReply(
        user="alice",
        session_micro_usd=10_000_000,
        today_micro_usd=10_000_000,
        month_micro_usd=10_000_000,
        budgets=(HubBudget("day", 20_000_000, 10_000_000, "user"),),
    )

    async def cleared() -> bool:
        return bool((await get(jp_fetch, "budget"))["state"] != "grace")

    await until(cleared, "the countdown cleared")


async def test_at_the_hubs_stop_time_the_server_saves_and_acts(
    jp_fetch: Any, service: FakeService
) -> None:
    await jp_fetch("api", "kernels", method="POST", body="{}")
    service.reply = HubReply(
        user="alice",
        session_micro_usd=0,
        today_micro_usd=0,
        month_micro_usd=0,
        stop_at=datetime.now(UTC) + timedelta(seconds=6),
        reason="group budget spent",
    )

    async def acted() -> bool:
        return bool((await get(jp_fetch, "budget"))["state"] == "acted")

    await until(acted, "the action at the hub's stop time", timeout_s=30)
    budget = await get(jp_fetch, "budget")
    assert budget["last_action"]["action"] == "shutdown"
    assert budget["last_action"]["reason"] == "hub"
    assert "stopped for the hub" in budget["last_action"]["message"]
    kernels = json.loads((await jp_fetch("api", "kernels")).body)
    assert kernels == []


def report_of(cost_micro_usd: int) -> SpendReport:
    return SpendReport(
        session_id="s",
        server_name="",
        started=datetime.now(UTC),
        sent=datetime.now(UTC),
        cost_micro_usd=cost_micro_usd,
        idle_micro_usd=0,
        rate_micro_usd_per_s=1,
    )


def test_a_service_that_refuses_or_is_down_is_a_named_error(service: FakeService) -> None:
    report = report_of(1)
    wrong = HubLinkConfig(service.url + "api/report", "not-the-token", "", 10)
    with pytest.raises(HubLinkError) as refused:
        post_report(wrong, report)
    assert refused.value.kind == "http-403"
    assert "not-the-token" not in str(refused.value)
    down = HubLinkConfig("http://127.0.0.1:9/api/report", TOKEN, "", 10)
    with pytest.raises(HubLinkError) as unreachable:
        post_report(down, report)
    assert unreachable.value.kind == "unreachable"


class Sink:
    def __init__(self) -> None:
        self.got: list[tuple[HubReply | None, str | None]] = []

    def apply_hub_reply(self, reply: HubReply | None, error: str | None) -> None:
        self.got.append((reply, error))


async def test_a_servers_reports_share_one_kept_alive_connection(service: FakeService) -> None:
    config = HubLinkConfig(service.url + "api/report", TOKEN, "", 10)
    sink = Sink()
    log = logging.getLogger("test_hub_link.keepalive")
    reporter = HubReporter(config, lambda: report_of(1), sink, log=log)
    for _ in range(5):
        assert await reporter.once() == service.reply
    assert len(service.reports) == 5
    assert service.connections == 1
    assert [error for _, error in sink.got] == [None] * 5
    await reporter.stop()
    # closed at stop, in the reporter's thread
    await until(lambda: _true(reporter.connection._conn is None), "the connection closed")


@pytest.mark.parametrize("seen_idle", [True, False], ids=["closed-while-idle", "dropped-on-send"])
async def test_after_the_service_restarts_the_next_report_arrives(
    service: FakeService, monkeypatch: pytest.MonkeyPatch, seen_idle: bool
) -> None:
    if not seen_idle:
        # as if the service closed the connection just as the report was sent: the closed
        # connection is used, the report fails on it, and is sent once more on a new one
        monkeypatch.setattr(hub_link, "_readable", lambda sock: False)
    config = HubLinkConfig(service.url + "api/report", TOKEN, "", 10)
    connection = ReportConnection()
    loop = asyncio.get_running_loop()
    try:
        for _ in range(2):
            await loop.run_in_executor(None, post_report, config, report_of(1), connection)
        assert (len(service.reports), service.connections) == (2, 1)
        service.restart()
        reply = await loop.run_in_executor(None, post_report, config, report_of(2), connection)
        assert reply == service.reply
        assert [r.cost_micro_usd for r in service.reports] == [1, 1, 2]
        assert service.connections == 2
        await loop.run_in_executor(None, post_report, config, report_of(3), connection)
        assert service.connections == 2
    finally:
        connection.close()


def test_a_connection_dropped_before_any_reply_is_unreachable() -> None:
    """A fresh connection that the other end closes is not tried again."""
    accepted: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def drop() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = listener.accept()
                    accepted.append(1)
                    conn.close()

        threading.Thread(target=drop, daemon=True).start()
        port = listener.getsockname()[1]
        config = HubLinkConfig(f"http://127.0.0.1:{port}/api/report", TOKEN, "", 10)
        with pytest.raises(HubLinkError) as dropped:
            post_report(config, report_of(1))
    assert dropped.value.kind == "unreachable"
    assert "cannot be reached" in str(dropped.value)
    assert TOKEN not in str(dropped.value)
    assert len(accepted) == 1


class TestUnreachable:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
        monkeypatch.setenv(ENV_HUB_URL, "http://127.0.0.1:9/services/gpucost/")
        monkeypatch.setenv("JUPYTERHUB_API_TOKEN", TOKEN)
        return link_config(tmp_path)

    async def test_the_error_is_shown_and_logged_once(
        self, jp_fetch: Any, server_log: Lines
    ) -> None:
        async def failed() -> bool:
            hub = (await get(jp_fetch, "budget"))["hub"]
            return bool(hub and hub["error"])

        await until(failed, "the error in the API")
        await asyncio.sleep(2.5)  # two more failed reports
        hub = (await get(jp_fetch, "budget"))["hub"]
        assert "cannot be reached" in hub["error"]
        assert hub["budgets"] == []
        # logged when it first failed (at start-up: before or just after this test's log
        # handler is attached, as the first report races the fixtures), not at each report
        assert server_log.text.count("spend not reported to the hub") <= 1
        assert TOKEN not in server_log.text

    async def test_the_error_the_panel_shows_is_in_the_server_s_language(
        self, jp_fetch: Any, server_log: Lines
    ) -> None:
        i18n.set_language("zh_CN")  # as JupyterLab's language setting sets it
        try:

            async def in_chinese() -> bool:
                hub = (await get(jp_fetch, "budget"))["hub"]
                return bool(hub and (hub["error"] or "").startswith("无法连接 Hub 服务（"))  # noqa: RUF001

            # the next failed report says it in Chinese
            await until(in_chinese, "the error in Chinese")
        finally:
            i18n.set_language("en")
        # the log stays English
        assert "无法连接" not in server_log.text


class TestNoToken:
    @pytest.fixture
    def gpucost_config(
        self, service: FakeService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, Any]:
        monkeypatch.setenv(ENV_HUB_URL, service.url)
        monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
        monkeypatch.delenv("JPY_API_TOKEN", raising=False)
        return link_config(tmp_path)

    async def test_the_hub_link_says_it_sends_nothing(
        self, jp_fetch: Any, service: FakeService
    ) -> None:
        hub = (await get(jp_fetch, "budget"))["hub"]
        assert "no JUPYTERHUB_API_TOKEN" in hub["error"]
        await asyncio.sleep(1.5)
        assert service.reports == []


async def test_a_failure_is_logged_once_per_kind_until_a_report_gets_through() -> None:
    replies: list[HubReply | HubLinkError] = [
        HubLinkError("unreachable", "down"),
        HubLinkError("unreachable", "down"),
        HubLinkError("http-403", "refused"),
        HubReply(user="alice", session_micro_usd=0, today_micro_usd=0, month_micro_usd=0),
        HubLinkError("unreachable", "down"),
    ]

    def send(config: HubLinkConfig, report: SpendReport) -> HubReply:
        reply = replies.pop(0)
        if isinstance(reply, HubLinkError):
            raise reply
        return reply

    log = logging.getLogger("test_hub_link.once")
    lines = Lines()
    log.addHandler(lines)
    log.setLevel(logging.INFO)
    sink = Sink()
    config = HubLinkConfig("http://127.0.0.1:9/api/report", TOKEN, "", 10)
    reporter = HubReporter(config, lambda: report_of(1), sink, log=log, send=send)
    for _ in range(5):
        await reporter.once()
    await reporter.stop()
    assert lines.lines == [
        "jupyter-gpucost: spend not reported to the hub: down",
        "jupyter-gpucost: spend not reported to the hub: refused",
        "jupyter-gpucost: spend is reported to the hub again",
        "jupyter-gpucost: spend not reported to the hub: down",
    ]
    assert [error for _, error in sink.got] == ["down", "down", "refused", None, "down"]


def test_the_countdown_follows_the_hubs_stop_time() -> None:
    t0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    policy = BudgetPolicy(grace_s=120)
    # the hub stops the server (a group budget, say): a countdown to its time
    policy.deadline = t0 + timedelta(seconds=40)
    (started,) = policy.evaluate(t0, [])
    assert isinstance(started, GraceStarted)
    assert (started.reason, started.ends) == ("hub", t0 + timedelta(seconds=40))
    assert policy.evaluate(t0 + timedelta(seconds=39), []) == []
    (enforce,) = policy.evaluate(t0 + timedelta(seconds=40), [])
    assert isinstance(enforce, Enforce)
    assert enforce.reason == "hub"

    # a local budget's countdown is never made longer by a later hub stop
    # ($0.01 left at $0.60/h lasts the 60 s grace: the countdown starts, to end at the
    # budget; was: a spent budget, which now acts at once)
    policy = BudgetPolicy(hard=Budget("hard", 1_000_000), grace_s=60)
    policy.deadline = t0 + timedelta(hours=1)
    spent = Standing(Budget("hard", 1_000_000), 990_000, "s")
    rate = Decimal("0.6")
    events = policy.evaluate(t0, [spent], rate_per_hour=rate)
    assert [e.ends for e in events if isinstance(e, GraceStarted)] == [t0 + timedelta(seconds=60)]
    # ...and a hub stop that comes sooner shortens it
    policy.deadline = t0 + timedelta(seconds=10)
    policy.evaluate(t0 + timedelta(seconds=1), [spent], rate_per_hour=rate)
    assert policy.grace_ends == t0 + timedelta(seconds=10)

    # the hub no longer stops the server (its budget was raised): the countdown ends
    policy = BudgetPolicy()
    policy.deadline = t0 + timedelta(seconds=40)
    policy.evaluate(t0, [])
    policy.deadline = None
    (cleared,) = policy.evaluate(t0 + timedelta(seconds=5), [])
    assert isinstance(cleared, GraceCleared)
    assert policy.state == "none"


def test_kernels_find_the_binding_hub_budget_in_the_budget_document() -> None:
    day = {"kind": "hub", "scope": "day", "amount_usd": 10.0, "remaining_usd": 7.0}
    month = {"kind": "hub", "scope": "month", "amount_usd": 100.0, "remaining_usd": 60.0}
    document = {"binding": "hub", "hard": None, "soft": None, "hub": {"budgets": [month, day]}}
    assert binding_standing(document) == day
    soft = {"kind": "soft", "amount_usd": 5.0}
    assert binding_standing({"binding": "soft", "soft": soft, "hub": None}) == soft
    assert binding_standing({"binding": None}) is None


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ["--GpuCost.hub_url=ftp://hub/services/gpucost/"],
            {},
            "c.GpuCost.hub_url (GPUCOST_HUB_URL) = 'ftp://hub/services/gpucost/' is not "
            "valid: use the hub service's http:// or https:// URL, or leave it empty.",
        ),
        (
            [],
            {ENV_HUB_URL: "hub:8000/services/gpucost/"},
            "c.GpuCost.hub_url (GPUCOST_HUB_URL) = 'hub:8000/services/gpucost/' is not valid",
        ),
        (
            ["--GpuCost.hub_report_interval_s=0.1"],
            {},
            "c.GpuCost.hub_report_interval_s = 0.1 is not valid: use a number of seconds "
            "from 1 to 3600",
        ),
    ],
)
def test_a_hub_setting_that_is_not_valid_stops_the_server(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    with mock.patch.dict(os.environ, env):
        result = start_server(tmp_path, *args, "--GpuCost.telemetry=none")
    assert result.returncode != 0
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
