"""The idle policy of the hub service, without a Hub: its settings, how a server's activity
is judged from DCGM and from its reports, the clock that warns then stops, and the service's
core with a real ledger (the warning survives a restart; the reply carries it)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hub_admin_page import admin_page
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.core.hub_protocol import (
    IDLE_STOP_REASON,
    GpuTime,
    HubReply,
    ProtocolError,
    SpendReport,
)
from jupyter_gpucost.hub.activity import ActivitySource, GpuActivity, UserServer
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.idle.policy import HubIdleClock, IdlePolicy, IdleRule, Judgement, judge
from jupyter_gpucost.hub.idle.reclaim import Reclaimer, report_activity
from jupyter_gpucost.hub.idle.report_reading import ReportReadings
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.reclaims import SAVINGS_HORIZON_S, ReclaimStore
from jupyter_gpucost.hub.model import GpuAllocation, HubConfigError, Rate, ServerInfo, ServerRow
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import metrics_view

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
KEY = ("dora", "")
RULE = IdleRule(after_s=60, warn_s=30)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def reading(
    source: ActivitySource,
    when: datetime,
    util: tuple[float, ...] = (0.0, 0.0),
    kernel_busy: bool | None = None,
) -> GpuActivity:
    return GpuActivity(source, when, 10.0, gpu_util_pct=util, kernel_busy=kernel_busy)


def idle_report(when: datetime, busy: bool | None = False) -> dict[ActivitySource, GpuActivity]:
    return {"report": reading("report", when, kernel_busy=busy)}


# -- the settings ------------------------------------------------------------------------


def server(profile: str | None, user: str = "dora") -> ServerInfo:
    return ServerInfo(user, "", NOW, True, profile)


def test_each_profile_has_its_rule_and_star_the_rest() -> None:
    policy = IdlePolicy(
        {
            "gpu-large": {"after_min": 30, "warn_min": 5},
            "cpu": None,
            "*": {"after_min": 120, "warn_min": 10, "busy_idle_max_min": 240},
        }
    )
    assert policy.rule_for(server("gpu-large")) == IdleRule(1800, 300)
    assert policy.rule_for(server("cpu")) is None
    assert policy.rule_for(server("other")) == IdleRule(7200, 600, 14400)
    assert policy.rule_for(server(None)) == IdleRule(7200, 600, 14400)
    assert not IdlePolicy(None).enabled
    assert IdlePolicy({"a": {"after_min": 1}}).rule_for(server("a")) == IdleRule(60, 300)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"a": {"after_min": 0}}, "c.GpuCostHub.idle_policy['a']['after_min']: 0 is out of range"),
        (
            {"a": {"after_min": float("nan")}},
            "c.GpuCostHub.idle_policy['a']['after_min']: nan is not a number of minutes",
        ),
        (
            {"a": {"after_min": True}},
            "c.GpuCostHub.idle_policy['a']['after_min']: True is not a number of minutes",
        ),
        (
            {"a": {"after_min": 5, "warn_min": -1}},
            "c.GpuCostHub.idle_policy['a']['warn_min']: -1 is out of range",
        ),
        ({"a": {"after": 5}}, "c.GpuCostHub.idle_policy['a']: unknown key 'after'"),
        ({"a": 30}, "c.GpuCostHub.idle_policy['a']: expected None or a dict"),
        ([30], "c.GpuCostHub.idle_policy: expected a dict of profile"),
    ],
)
def test_a_bad_rule_names_the_setting_and_what_is_wrong(raw: object, message: str) -> None:
    with pytest.raises(HubConfigError) as e:
        IdlePolicy(raw)
    assert str(e.value).startswith(message), str(e.value)


def test_a_callable_rule_that_fails_reclaims_nothing_and_says_so_once() -> None:
    said: list[str] = []

    def rule(server: ServerInfo) -> object:
        if server.user == "bad":
            raise RuntimeError("no such user")
        return {"after_min": 1, "warn_min": 1} if server.profile == "gpu" else None

    policy = IdlePolicy(rule, said.append)
    assert policy.rule_for(server("gpu")) == IdleRule(60, 60)
    assert policy.rule_for(server("cpu")) is None
    assert policy.rule_for(server("gpu", "bad")) is None
    assert policy.rule_for(server("gpu", "bad")) is None
    assert len(said) == 1
    assert "bad/" in said[0]
    assert "no such user" in said[0]


# -- judging activity --------------------------------------------------------------------


def test_a_kernel_reported_busy_is_activity_even_with_every_gpu_idle() -> None:
    sources = {
        "dcgm": reading("dcgm", NOW),
        "report": reading("report", NOW, kernel_busy=True),
    }
    found = judge(sources, NOW)
    assert found.verdict == "busy"
    assert found.kernel_busy
    assert found.dcgm_idle


def test_dcgm_decides_the_gpus_over_the_servers_own_report() -> None:
    sources = {
        "dcgm": reading("dcgm", NOW, util=(0.0, 55.0)),
        "report": reading("report", NOW, util=(0.0, 0.0), kernel_busy=False),
    }
    assert judge(sources, NOW) == Judgement("busy", False, False, "dcgm", False)


def test_dcgm_alone_judges_a_server_that_reports_nothing() -> None:
    assert judge({"dcgm": reading("dcgm", NOW)}, NOW).verdict == "idle"


def test_the_report_judges_the_gpus_where_dcgm_is_absent_or_stale() -> None:
    sources = {
        "dcgm": reading("dcgm", at(-600)),
        "report": reading("report", NOW, kernel_busy=False),
    }
    assert judge(sources, NOW) == Judgement("idle", False, False, "report", True)


@pytest.mark.parametrize(
    "sources",
    [
        {},
        {"report": reading("report", at(-600))},
        # a reading from far ahead of the service's clock is not believed
        {"dcgm": reading("dcgm", at(3600))},
        {"report": reading("report", NOW, util=())},
        {"dcgm": reading("dcgm", NOW, util=(math.nan, 0.0))},
        {"dcgm": reading("dcgm", NOW, util=(math.inf,))},
        {"dcgm": reading("dcgm", NOW, util=(-1.0,))},
    ],
)
def test_what_no_source_says_is_unknown_never_idle(
    sources: dict[ActivitySource, GpuActivity],
) -> None:
    assert judge(sources, NOW).verdict == "unknown"


# -- the clock ---------------------------------------------------------------------------


def run(clock: HubIdleClock, rule: IdleRule | None, steps: list[tuple[float, str]]) -> list[object]:
    """Tick every ``(seconds, verdict)``: the warning after each."""
    out: list[object] = []
    for t, verdict in steps:
        judgement = Judgement(verdict)  # type: ignore[arg-type]
        out.append(clock.tick(KEY, rule, judgement, at(t)).warning)
    return out


def test_an_idle_server_is_warned_after_its_minutes_then_due_at_its_stop_time() -> None:
    clock = HubIdleClock(max_step_s=10)
    warnings = run(clock, RULE, [(t, "idle") for t in range(0, 61, 10)])
    assert warnings[:-1] == [None] * 6
    warning = clock.warning(KEY)
    assert warning is not None
    assert warning.since == at(60)
    assert warning.stop_at == at(90)
    run(clock, RULE, [(80, "idle")])
    assert clock.due(at(89)) == []
    assert clock.due(at(90)) == [warning]


def test_any_activity_clears_the_warning_and_the_idle_time() -> None:
    clock = HubIdleClock(max_step_s=10)
    run(clock, RULE, [(t, "idle") for t in range(0, 61, 10)])
    assert clock.warning(KEY) is not None
    tick = clock.tick(KEY, RULE, Judgement("busy", kernel_busy=True), at(65))
    assert tick.changed is False
    assert tick.warning is None
    assert tick.ended is not None
    assert tick.ended.idle_s == 60
    assert tick.ended.outcome == "active"
    assert clock.due(at(1000)) == []
    assert clock.idle_s(KEY) == 0


def test_unknown_holds_the_warning_but_never_stops() -> None:
    clock = HubIdleClock(max_step_s=10)
    run(clock, RULE, [(t, "idle") for t in range(0, 61, 10)])
    run(clock, RULE, [(70, "unknown"), (200, "unknown")])
    assert clock.warning(KEY) is not None
    assert clock.due(at(200)) == []
    run(clock, RULE, [(205, "idle")])
    assert [w.key for w in clock.due(at(205))] == [KEY]


def test_a_clock_that_jumps_counts_at_most_one_step_forward_and_nothing_back() -> None:
    clock = HubIdleClock(max_step_s=10)
    run(clock, RULE, [(0, "idle"), (86_400, "idle"), (-86_400, "idle"), (86_410, "idle")])
    assert clock.idle_s(KEY) == 20
    assert clock.warning(KEY) is None


def test_a_server_with_no_rule_is_never_warned() -> None:
    clock = HubIdleClock(max_step_s=10)
    assert run(clock, None, [(t, "idle") for t in range(0, 1000, 10)])[-1] is None
    assert clock.due(at(2000)) == []


def test_a_kernel_reported_busy_spares_dcgm_idle_gpus_only_up_to_the_admins_bound() -> None:
    capped = IdleRule(after_s=60, warn_s=30, busy_idle_max_s=120)
    forged = Judgement("busy", dcgm_idle=True, kernel_busy=True)
    clock = HubIdleClock(max_step_s=10)
    for t in range(0, 120, 10):
        clock.tick(KEY, capped, forged, at(t))
    assert clock.spared_by_kernel(KEY)
    assert clock.idle_s(KEY) == 0
    for t in range(120, 200, 10):
        clock.tick(KEY, capped, forged, at(t))
    assert clock.warning(KEY) is not None
    # without the bound, a kernel reported busy always spares the server
    always = HubIdleClock(max_step_s=10)
    for t in range(0, 100_000, 10):
        always.tick(KEY, RULE, forged, at(t))
    assert always.warning(KEY) is None
    assert always.spared_by_kernel(KEY)


verdicts = st.sampled_from(["idle", "busy", "unknown"])
steps = st.lists(
    st.tuples(
        st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([0.0, 1e-9, 10.0, 1e9])),
        verdicts,
        st.booleans(),
    ),
    max_size=80,
)


@given(steps)
@settings(max_examples=300, deadline=None)
def test_never_due_unless_idle_long_enough_and_the_last_word_is_idle(
    moves: list[tuple[float, str, bool]],
) -> None:
    """Whatever the clock does (jumps both ways) and whatever the sources say, a server is
    due only when its last judgement was idle, at or after its stop time, with at least
    ``after_s`` of idle ticks counted, each at most ``max_step_s``."""
    clock = HubIdleClock(max_step_s=10)
    now = NOW
    idle_ticks = 0
    for delta, verdict, kernel in moves:
        now = now + timedelta(seconds=delta)
        judgement = Judgement(verdict, kernel_busy=kernel and verdict == "busy")  # type: ignore[arg-type]
        clock.tick(KEY, RULE, judgement, now)
        idle_ticks = (
            idle_ticks + 1 if verdict == "idle" else (0 if verdict == "busy" else idle_ticks)
        )
        for warning in clock.due(now):
            assert verdict == "idle"
            assert now >= warning.stop_at
        if clock.warning(KEY) is not None:
            assert idle_ticks * 10 >= RULE.after_s


utils = st.lists(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 0.99, 1.0, 100.0])
    ),
    max_size=4,
)
sources = st.fixed_dictionaries(
    {},
    optional={
        "dcgm": st.builds(
            reading,
            st.just("dcgm"),
            st.floats(-1e5, 1e5, allow_nan=False).map(at),
            utils.map(tuple),
        ),
        "report": st.builds(
            reading,
            st.just("report"),
            st.floats(-1e5, 1e5, allow_nan=False).map(at),
            utils.map(tuple),
            st.sampled_from([None, True, False]),
        ),
    },
)


@given(sources)
@settings(max_examples=500, deadline=None)
def test_idle_needs_every_gpu_idle_and_no_fresh_busy_kernel(
    found: dict[ActivitySource, GpuActivity],
) -> None:
    """Out-of-order, missing, stale, future and non-finite readings: idle only when the
    deciding source names GPUs, each a finite utilisation under 1 %, and no fresh report
    says a kernel is busy."""
    verdict = judge(found, NOW)
    if verdict.verdict != "idle":
        return
    report = found.get("report")
    if report is not None and abs((NOW - report.at).total_seconds()) <= 60:
        assert report.kernel_busy is not True
    deciding = found["dcgm"] if verdict.gpu_source == "dcgm" else found["report"]
    assert deciding.gpu_util_pct
    assert all(math.isfinite(u) and 0 <= u < 1 for u in deciding.gpu_util_pct)


# -- the reports -------------------------------------------------------------------------


def spend(
    session: str = "s-1", gpu_time: tuple[GpuTime, ...] = (), busy: int | None = 0
) -> SpendReport:
    return SpendReport(session, "", NOW, NOW, 0, 0, 0, kernels_busy=busy, gpu_time=gpu_time)


def test_consecutive_reports_give_each_gpus_utilisation_over_the_window() -> None:
    first, last = report_activity(None, spend(gpu_time=(GpuTime(0, 0), GpuTime(0, 0))), NOW)
    assert first.gpu_util_pct == ()
    assert first.kernel_busy is False
    second, last = report_activity(
        last, spend(gpu_time=(GpuTime(5_000_000, 5_000_000), GpuTime(0, 10_000_000))), at(10)
    )
    assert second.gpu_util_pct == (50.0, 0.0)
    assert second.window_s == 10
    # no sample since: the last window's figures still hold
    third, last = report_activity(
        last, spend(gpu_time=(GpuTime(5_000_000, 5_000_000), GpuTime(0, 10_000_000))), at(11)
    )
    assert third.gpu_util_pct == (50.0, 0.0)
    # ... but not for long: a meter that samples nothing any more says nothing
    silent, _ = report_activity(
        last, spend(gpu_time=(GpuTime(5_000_000, 5_000_000), GpuTime(0, 10_000_000))), at(600)
    )
    assert silent.gpu_util_pct == ()
    # a new session, or figures that went back, say nothing of the GPUs
    other, _ = report_activity(last, spend("s-2", (GpuTime(9, 9), GpuTime(9, 9))), at(12))
    assert other.gpu_util_pct == ()
    back, _ = report_activity(last, spend(gpu_time=(GpuTime(1, 1), GpuTime(1, 1))), at(12))
    assert back.gpu_util_pct == ()
    older, _ = report_activity(None, spend(busy=None), NOW)
    assert older.kernel_busy is None


def test_the_protocol_keeps_older_servers_and_refuses_bad_figures() -> None:
    doc = spend(gpu_time=(GpuTime(1, 2),), busy=3).to_json()
    again = SpendReport.from_json(doc)
    assert again.kernels_busy == 3
    assert again.gpu_time == (GpuTime(1, 2),)
    older = {k: v for k, v in doc.items() if k not in ("kernels_busy", "gpu_time")}
    assert SpendReport.from_json(older).kernels_busy is None
    assert SpendReport.from_json(older).gpu_time == ()
    for bad in (
        {"kernels_busy": -1},
        {"kernels_busy": True},
        {"gpu_time": [{"used_us": 1}]},
        {"gpu_time": [{"used_us": 1.5, "idle_us": 0}]},
        {"gpu_time": [{"used_us": 10**16, "idle_us": 0}]},
        {"gpu_time": "all idle"},
    ):
        with pytest.raises(ProtocolError):
            SpendReport.from_json({**doc, **bad})
    reply = HubReply("dora", 0, 0, 0, stop_at=NOW, reason=IDLE_STOP_REASON, stop_kind="idle")
    assert HubReply.from_json(reply.to_json()) == reply
    with pytest.raises(ProtocolError, match="stop_kind"):
        HubReply.from_json({**reply.to_json(), "stop_kind": "whim"})


# -- the service's core, with a real ledger ----------------------------------------------

RATE = Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "test")


class Servers:
    def __init__(self, servers: list[ServerInfo]) -> None:
        self.servers = servers
        self.stopped: list[str] = []

    async def active_servers(self) -> list[ServerInfo]:
        return self.servers

    async def stopped_at(self, user: str, server_name: str) -> datetime | None:
        return None  # a stand-in Hub keeps no record of stopped servers

    async def groups_of_users(self) -> dict[str, tuple[str, ...]]:
        return {}

    async def stop_server(self, user: str, server_name: str) -> str:
        self.stopped.append(user)
        return "stopped"


def service(url: str, policy: object = None) -> HubService:
    ledger = HubLedger(url)
    reclaimer = Reclaimer(
        IdlePolicy({"*": {"after_min": 1, "warn_min": 0.5}} if policy is None else policy),
        HubIdleClock(max_step_s=10),
        ReclaimStore(ledger.engine),
    )
    return HubService(ledger, lambda s: RATE, HubBudgetPolicy(None), HubEnforcer(60), reclaimer)


def idle_reports(svc: HubService, start: float, end: float, busy: int = 0) -> HubReply:
    reply = None
    for n, t in enumerate(range(int(start), int(end) + 1, 5)):
        used_idle = (GpuTime(0, (t + 1) * 1_000_000), GpuTime(0, (t + 1) * 1_000_000))
        rep = SpendReport("s-1", "", NOW, at(t), 0, 0, 0, kernels_busy=busy, gpu_time=used_idle)
        reply = svc.report("dora", rep, at(t))
        svc.sync([server(None)], at(t))
        assert n >= 0
    assert reply is not None
    return reply


async def test_the_warning_is_in_the_reply_survives_a_restart_and_activity_clears_it(
    ledger_url: str,
) -> None:
    url = ledger_url
    svc = service(url)
    svc.sync([server(None)], NOW)
    reply = idle_reports(svc, 0, 70)
    assert reply.stop_kind == "idle"
    assert reply.reason == IDLE_STOP_REASON
    assert reply.stop_at is not None
    stop_at = reply.stop_at
    metrics = metrics_view.metrics(svc)
    assert "gpucost_hub_servers_idle 1.000000" in metrics
    assert "gpucost_hub_servers_idle_warned 1.000000" in metrics
    svc.close(at(70))
    # a restart: the same stop time, not a new warning
    again = service(url)
    assert again.reply(again.rows[("dora", "")]).stop_at == stop_at
    # a busy kernel: cleared at once, in the reply to that very report
    cleared = idle_reports(again, 75, 75, busy=1)
    assert cleared.stop_at is None
    assert cleared.stop_kind is None
    again.close(at(80))
    third = service(url)
    assert third.reply(third.rows[("dora", "")]).stop_at is None
    third.close(at(81))


async def test_a_warning_kept_from_before_is_dropped_when_the_policy_is_off_now(
    ledger_url: str,
) -> None:
    url = ledger_url
    svc = service(url)
    svc.sync([server(None)], NOW)
    assert idle_reports(svc, 0, 70).stop_at is not None
    svc.close(at(70))
    off = service(url, {"*": None})
    row = off.rows[("dora", "")]
    assert off.reply(row).stop_at is None
    assert off.ledger.deadlines() == {}
    # and it stays off: idle reports give no warning
    assert idle_reports(off, 75, 200).stop_at is None
    off.close(at(200))


async def test_an_idle_server_is_stopped_once_and_its_reclaim_recorded(ledger_url: str) -> None:
    svc = service(ledger_url)
    hub = Servers([server(None)])
    await svc.poll(hub, lambda: NOW)
    idle_reports(svc, 0, 100)
    result = await svc.poll(hub, lambda: at(101))
    assert result.stopped == [("dora", "")]
    await svc.poll(hub, lambda: at(102))
    for task in list(svc._stopping):
        await task
    assert hub.stopped == ["dora"]
    svc.flush(at(103))
    store = svc.reclaim.store if svc.reclaim else None
    assert store is not None
    # an hour later, not started again: the rate × an hour saved, and the rate freed
    summary = store.summary(NOW, at(101 + 3600))
    assert summary.reclaimed == 1
    assert summary.saved_micro_usd == 6_862_000
    assert summary.freed_usd_per_hour == Decimal("6.862")
    assert summary.idle_gpu_us >= 2 * 60_000_000
    # at most the horizon, however long it stays stopped
    far = store.summary(NOW, at(10 * SAVINGS_HORIZON_S))
    assert far.saved_micro_usd == 6_862_000 * SAVINGS_HORIZON_S // 3600


# -- the user's countdown, in their language ---------------------------------------------


def test_the_countdown_of_an_idle_stop_says_why_in_the_users_language() -> None:
    from jupyter_gpucost.core import i18n
    from jupyter_gpucost.server.budget import messages

    english = messages.grace(None, "shutdown", 30, "$", reason="hub", hub_reason=IDLE_STOP_REASON)
    assert english.startswith(IDLE_STOP_REASON)
    # a budget's stop by the hub keeps its own sentence
    budget = messages.grace(None, "shutdown", 30, "$", reason="hub", hub_reason="Your day budget")
    assert budget.startswith("Your hub admin's budget runs out: the hub stops this server when")
    i18n.set_language("zh_CN")
    try:
        chinese = messages.grace(
            None, "shutdown", 30, "$", reason="hub", hub_reason=IDLE_STOP_REASON
        )
        cleared = messages.cleared("the hub no longer stops this server")
    finally:
        i18n.set_language("en")
    assert chinese.startswith("您的服务器的 GPU 一直空闲")
    assert cleared == "倒计时已停止\uff1aHub 不再停止此服务器。"


report_moves = st.lists(
    st.tuples(
        st.one_of(st.floats(-3600, 3600, allow_nan=False), st.sampled_from([0.0, 5.0, 1e7])),
        st.one_of(st.none(), st.integers(0, 3)),
        st.integers(-(10**7), 10**7),
        st.integers(-(10**7), 10**7),
        st.sampled_from(["s-1", "s-1", "s-1", "s-2"]),
    ),
    max_size=60,
)


@given(report_moves)
@settings(max_examples=200, deadline=None)
def test_a_report_with_a_busy_kernel_never_leaves_a_warning_or_a_stop(
    moves: list[tuple[float, int | None, int, int, str]],
) -> None:
    """Reports out of order, from a restarted meter or a new session, with figures that
    go back and a clock that jumps: after a report that says a kernel is busy the server
    has no warning and is not due, whatever came before."""
    reclaimer = Reclaimer(
        IdlePolicy({"*": {"after_min": 0.5, "warn_min": 0.5}}), HubIdleClock(max_step_s=10), None
    )
    row = ServerRow(1, "dora", "", NOW, None, NOW, None, RATE)
    activity: dict[UserServer, dict[ActivitySource, GpuActivity]] = {}
    readings = ReportReadings()
    now = NOW
    used = idle = 0
    for delta, busy, d_used, d_idle, session in moves:
        now = now + timedelta(seconds=delta)
        used, idle = max(0, used + d_used), max(0, idle + d_idle)
        gpus = (GpuTime(used, idle), GpuTime(used, idle))
        report = SpendReport(session, "", NOW, now, 0, 0, 0, kernels_busy=busy, gpu_time=gpus)
        readings.take(activity, KEY, report, now)
        reclaimer.tick(row, None, activity[KEY], now)
        if busy:
            assert reclaimer.warning(row) is None
            assert reclaimer.due(now) == []


async def test_the_admin_page_shows_the_warning_the_idle_hours_and_the_savings(
    ledger_url: str,
) -> None:
    svc = service(ledger_url)
    hub = Servers([server(None)])
    await svc.poll(hub, lambda: NOW)
    idle_reports(svc, 0, 70)
    page = admin_page(svc, now=at(70), user="erin")
    assert "idle: stops 2026-11-23 12:01:" in page
    assert "Idle GPUs, last 30 days" in page
    await svc.poll(hub, lambda: at(101))
    hub.servers = []
    await svc.poll(hub, lambda: at(102))
    for task in list(svc._stopping):
        await task
    svc.flush(at(103))
    page = admin_page(svc, now=at(101 + 3600), user="erin")
    block = page[page.index('id="gpucost-idle"') :]
    assert 'Servers reclaimed</div><div class="gpucost-big">1</div>' in block
    # an hour stopped at $6.862 an hour
    assert "$6.86</div>" in block
    svc.close(at(104))
