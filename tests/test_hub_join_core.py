"""Where the servers' reports and the cluster's DCGM meet in the hub service's core, without
a Hub: a report is a reading with or without an idle policy, a DCGM reading holds until the
next Prometheus poll, a server stopped while Prometheus answers leaves nothing behind, and
the admin page says "idle" of a server its busy kernel no longer keeps; the CSV's split."""

from __future__ import annotations

import asyncio
import csv
import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.hub_protocol import GpuTime, SpendReport
from jupyter_gpucost.hub.activity import ActivitySource, GpuActivity, UserServer
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.cluster.dcgm import UTIL
from jupyter_gpucost.hub.cluster.promanswer import Sample, Vector
from jupyter_gpucost.hub.cluster.prometheus import PrometheusAuth
from jupyter_gpucost.hub.cluster.settings import ClusterSettings
from jupyter_gpucost.hub.cluster.usage import ClusterUsage
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.idle.policy import HubIdleClock, IdlePolicy, judge
from jupyter_gpucost.hub.idle.reclaim import Reclaimer
from jupyter_gpucost.hub.idle.report_reading import ReportReadings
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.usage import UsageLedger
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo
from jupyter_gpucost.hub.profiles.podname import PodNames
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import idle_view, metrics_view, views

NOW = datetime.now(UTC).replace(microsecond=0)
RATE = Rate(GpuAllocation("A100-80GB", 2), Decimal("3.431"), "test")
BILLING = BillingRule(1, 0)
KEY = ("dora", "")


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def dora() -> ServerInfo:
    return ServerInfo("dora", "", at(-600), True)


def make_service(tmp_path: Path, policy: object = None) -> HubService:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'hub.sqlite'}", billing=BILLING)
    reclaimer = Reclaimer(IdlePolicy(policy), HubIdleClock(max_step_s=10), None)
    return HubService(ledger, lambda s: RATE, HubBudgetPolicy(), HubEnforcer(60), reclaimer)


def report(t: float, used_s: float, idle_s: float, busy: int = 0) -> SpendReport:
    each = GpuTime(round(used_s * 1e6), round(idle_s * 1e6))
    return SpendReport(
        "s-1", "", at(-600), at(t), 0, 0, 0, kernels_busy=busy, gpu_time=(each, each)
    )


def test_a_report_is_a_gpu_reading_without_an_idle_policy(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    assert svc.reclaim is not None
    assert not svc.reclaim.enabled
    svc.sync([dora()], at(0))
    svc.report("dora", report(0, 0, 10), at(0))
    svc.report("dora", report(10, 9, 11), at(10))
    reading = svc.activity[KEY]["report"]
    # 9 s used of 10 s between the two reports, on each GPU
    assert reading.gpu_util_pct == (90.0, 90.0)
    assert reading.kernel_busy is False
    # gone with the server
    svc.sync([], at(11))
    assert KEY not in svc.activity
    svc.ledger.close()


def test_a_dcgm_reading_holds_until_the_next_poll() -> None:
    idle = GpuActivity("dcgm", at(0), 300.0, gpu_util_pct=(0.0, 0.0))
    # a poll every 5 minutes: its reading is still the cluster's word 4 minutes later
    assert judge({"dcgm": idle}, at(240), dcgm_stale_s=2 * 300 + 5).verdict == "idle"
    assert judge({"dcgm": idle}, at(240)).verdict == "unknown"
    # and no longer than that
    assert judge({"dcgm": idle}, at(700), dcgm_stale_s=2 * 300 + 5).verdict == "unknown"


class GoneWhileAsked:
    """A Prometheus whose answer comes after the Hub's poll found dora's server gone."""

    shown = "http://prometheus.test"

    def __init__(self, service: HubService) -> None:
        self.service = service

    async def query(self, promql: str, when: datetime) -> Vector:
        if promql.startswith(f"avg_over_time({UTIL}"):
            self.service.sync([], when)  # dora's server stopped meanwhile
            labels = {"gpu": "0", "UUID": "GPU-1", "pod": "jupyter-dora", "namespace": "jhub"}
            return Vector((Sample(labels, 0.0),))
        return Vector(())


def test_a_server_stopped_while_prometheus_answers_leaves_no_reading(tmp_path: Path) -> None:
    svc = make_service(tmp_path, {"*": {"after_min": 1}})
    svc.sync([dora()], at(0))
    ledger = svc.ledger
    assert isinstance(ledger, HubLedger)
    settings = ClusterSettings(
        "http://prometheus.test", "", 10, 2, PrometheusAuth(), 30, PodNames()
    )
    usage = ClusterUsage(
        settings,
        GoneWhileAsked(svc),
        UsageLedger(ledger.engine),
        billing=BILLING,
        tz=UTC,
        max_gpus=8,
    )
    svc.cluster = usage
    asyncio.run(usage.poll(svc, at(1)))
    assert KEY not in svc.activity
    assert not svc.rows
    ledger.close()


def test_a_server_its_busy_kernel_no_longer_keeps_is_shown_idle(tmp_path: Path) -> None:
    svc = make_service(tmp_path, {"*": {"after_min": 1, "busy_idle_max_min": 0.5}})
    reclaim = svc.reclaim
    assert reclaim is not None
    svc.sync([dora()], at(0))
    states = []
    for t in range(0, 60, 5):
        svc.activity[KEY] = {
            "dcgm": GpuActivity("dcgm", at(t), 5.0, gpu_util_pct=(0.0, 0.0)),
            "report": GpuActivity("report", at(t), 5.0, gpu_util_pct=(0.0, 0.0), kernel_busy=True),
        }
        svc.sync([dora()], at(t))
        row = svc.rows[KEY]
        view = reclaim.view(row)
        states.append((view.judgement.verdict, view.spared_by_kernel))
    # kept by the kernel for 30 s, then judged idle, and shown so
    assert states[0] == ("busy", True)
    assert states[-1] == ("idle", False)
    assert all(s == ("busy", True) for s in states[:6])
    summary = views.admin_summary(svc, at(60), at(60).date())
    (entry,) = summary["users"]
    assert entry["running"][0]["idle"]["state"] == "idle"
    assert idle_view.idle_gauges(svc)[0] == (
        "gpucost_hub_servers_idle",
        "running servers with every GPU idle and no kernel busy",
        1.0,
    )
    svc.ledger.close()


def test_the_csv_has_the_split_columns_empty_without_prometheus(tmp_path: Path) -> None:
    svc = make_service(tmp_path)
    svc.sync([dora()], at(0))
    text = views.users_csv(views.admin_summary(svc, at(1), at(1).date()))
    (row,) = list(csv.DictReader(io.StringIO(text)))
    for column in ("gpu_used_usd", "gpu_idle_usd", "gpu_unknown_usd", "dcgm_disagreements"):
        assert row[column] == ""
    assert "gpucost_hub_user_month_gpu_usd" not in metrics_view.metrics(svc, at(1), at(1).date())
    svc.ledger.close()


def test_reports_are_read_over_the_window_dcgm_is_read_over() -> None:
    """A server busy 10 s of every minute: its last report's few seconds say 0 % or
    100 %; over DCGM's minute, its reports say what DCGM does."""
    readings = ReportReadings()
    activity: dict[UserServer, dict[ActivitySource, GpuActivity]] = {}
    used = idle = 0.0
    for t in range(0, 125, 5):
        busy = t % 60 < 10
        used, idle = used + (5 if busy and t else 0), idle + (0 if busy or not t else 5)
        readings.take(activity, KEY, report(t, used, idle), at(t))
    assert activity[KEY]["report"].gpu_util_pct == (100.0, 100.0)  # the last 5 s
    over = readings.over(KEY, at(60), at(120))
    assert over is not None
    assert over.gpu_util_pct == (pytest.approx(100 * 10 / 60), pytest.approx(100 * 10 / 60))
    assert over.window_s == 60
    # reports that cover less than half the window say nothing of it
    assert readings.over(KEY, at(100), at(200)) is None
    # a new session's reports are not compared with the last one's
    readings.take(activity, KEY, replace(report(130, 0, 0), session_id="s-2"), at(130))
    assert readings.over(KEY, at(70), at(130)) is None
    readings.forget(KEY)
    assert not readings.knows(KEY)
