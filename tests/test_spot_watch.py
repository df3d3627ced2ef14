"""The spot notice watcher against loopback stand-ins that answer as each cloud documents:
EC2's 404 until an action is pending then ``{"action", "time"}``, the rebalance
recommendation, GCE's ``FALSE``/``TRUE`` behind a hanging GET, Azure's Scheduled Events
document with a ``Preempt`` event. A machine that is not spot sends nothing at all."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from cloud_standins import Cloud, StandIn, azure_preempt, serve
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpucost.cloud.detect import Endpoints
from jupyter_gpucost.cloud.interruption import (
    Checker,
    Notice,
    Watcher,
    parse_aws_action,
    parse_azure_events,
    parse_gcp_preempted,
    start_watch,
    watchable,
)
from jupyter_gpucost.core.machine import Machine

LOG = logging.getLogger("test-spot-watch")
NOW = datetime(2026, 11, 27, 14, 0, 0, tzinfo=UTC)


@pytest.fixture
def standin() -> Iterator[StandIn]:
    yield from serve(Cloud())


def endpoints(s: StandIn) -> Endpoints:
    return Endpoints(aws_imds=s.url, gce_metadata_host=s.url, azure_imds=s.url)


def spot(provider: str, **kw: object) -> Machine:
    return Machine(provider, "p5.48xlarge", "us-east-1", "spot", "i-0123", **kw)  # type: ignore[arg-type]


def test_aws_nothing_pending_then_terminate(standin: StandIn) -> None:
    checker = Checker("aws", endpoints(standin), clock=lambda: NOW)
    assert checker.check() is None
    # an IMDSv2 token, then the documented 404s
    assert standin.paths() == [
        "/latest/api/token",
        "/latest/meta-data/spot/instance-action",
        "/latest/meta-data/events/recommendations/rebalance",
    ]
    standin.cloud.aws_instance_action = {"action": "terminate", "time": "2026-11-27T14:02:00Z"}
    notice = checker.check()
    assert notice == Notice("aws", "terminate", NOW, NOW + timedelta(minutes=2))
    assert notice.seconds_left(NOW + timedelta(seconds=30)) == 90
    # the token is reused, not asked for every look
    assert standin.paths().count("/latest/api/token") == 1
    for _, path, headers in standin.cloud.requests[1:]:
        assert headers.get("X-Aws-Ec2-Metadata-Token"), path


@pytest.mark.parametrize("action", ["stop", "hibernate"])
def test_aws_stop_and_hibernate(standin: StandIn, action: str) -> None:
    standin.cloud.aws_instance_action = {"action": action, "time": "2026-11-27T14:02:00Z"}
    notice = Checker("aws", endpoints(standin), clock=lambda: NOW).check()
    assert notice is not None
    assert notice.action == action
    assert notice.final


def test_aws_rebalance_is_an_early_warning_said_once(standin: StandIn) -> None:
    standin.cloud.aws_rebalance = {"noticeTime": "2026-11-27T13:50:00Z"}
    checker = Checker("aws", endpoints(standin), clock=lambda: NOW)
    notice = checker.check()
    assert notice is not None
    assert notice.action == "rebalance"
    assert not notice.final
    assert notice.deadline is None
    assert checker.check() is None


def test_gcp_hanging_get_sees_the_change(standin: StandIn) -> None:
    checker = Checker("gcp", endpoints(standin), clock=lambda: NOW, gcp_wait_s=1)
    assert checker.check() is None  # FALSE after timeout_sec
    _, path, headers = standin.cloud.requests[-1]
    assert path == "/computeMetadata/v1/instance/preempted?wait_for_change=true&timeout_sec=1"
    assert headers["Metadata-Flavor"] == "Google"
    threading.Timer(0.3, lambda: setattr(standin.cloud, "gce_preempted", True)).start()
    started = time.monotonic()
    checker.gcp_wait_s = 30
    notice = checker.check()
    assert time.monotonic() - started < 5  # answered at the change, not after the wait
    assert notice == Notice("gcp", "preempt", NOW, NOW + timedelta(seconds=30))


def test_azure_preempt_event(standin: StandIn) -> None:
    checker = Checker("azure", endpoints(standin), clock=lambda: NOW)
    assert checker.check() is None
    _, path, headers = standin.cloud.requests[-1]
    assert path == "/metadata/scheduledevents?api-version=2020-07-01"
    assert headers["Metadata"] == "true"
    freeze = {**azure_preempt("Fri, 27 Nov 2026 14:00:30 GMT"), "EventType": "Freeze"}
    standin.cloud.azure_events = [freeze]
    assert checker.check() is None  # maintenance is not an eviction
    standin.cloud.azure_events = [freeze, azure_preempt("Fri, 27 Nov 2026 14:00:30 GMT")]
    assert checker.check() == Notice("azure", "preempt", NOW, NOW + timedelta(seconds=30))
    started = {**azure_preempt(""), "EventStatus": "Started"}
    standin.cloud.azure_events = [started]
    assert checker.check() == Notice("azure", "preempt", NOW, NOW)


def test_watcher_hands_the_notice_over_once_and_stops(standin: StandIn) -> None:
    got: list[Notice] = []
    arrived = threading.Event()

    def on_notice(n: Notice) -> None:
        got.append(n)
        arrived.set()

    checker = Checker("azure", endpoints(standin))
    watcher = Watcher(checker, on_notice, LOG)
    watcher.start()
    try:
        time.sleep(0.3)
        standin.cloud.azure_events = [azure_preempt("Fri, 27 Nov 2026 14:00:30 GMT")]
        assert arrived.wait(5)
        time.sleep(1.5)
        assert len(got) == 1
        # a final notice ends the watch: no more requests
        seen = len(standin.cloud.requests)
        time.sleep(1.5)
        assert len(standin.cloud.requests) == seen
    finally:
        watcher.stop()


def test_aws_polls_at_the_documented_rate(standin: StandIn) -> None:
    watcher = Watcher(Checker("aws", endpoints(standin)), lambda n: None, LOG)
    watcher.start()
    try:
        time.sleep(1.0)
    finally:
        watcher.stop()
    # one look (instance-action + rebalance) in the first second: every 5 s as AWS asks
    assert standin.paths().count("/latest/meta-data/spot/instance-action") == 1


def test_failing_service_is_backed_off(standin: StandIn, caplog: pytest.LogCaptureFixture) -> None:
    standin.cloud.raw["/metadata/scheduledevents"] = b"{}"
    standin.cloud.garbage = b"NOT HTTP"
    watcher = Watcher(Checker("azure", endpoints(standin)), lambda n: None, LOG)
    with caplog.at_level(logging.WARNING):
        watcher.start()
        time.sleep(1.5)
        watcher.stop()
    assert len(standin.cloud.requests) == 1  # 1 s polling, 10 s after a failure
    assert "interruption watch" in caplog.text


@pytest.mark.parametrize(
    "machine",
    [
        None,
        Machine("aws", "p5.48xlarge", "us-east-1", "on-demand", "i-0123"),
        Machine("azure", "Standard_NC24ads_A100_v4", "eastus", "", "vm"),
        spot("aws", shared=True),  # a pod: SIGTERM, not the node's metadata
        spot("runpod"),
        spot("alibaba"),
    ],
)
def test_not_spot_sends_nothing(standin: StandIn, machine: Machine | None) -> None:
    assert not watchable(machine)
    assert start_watch(machine, endpoints(standin), lambda n: None, LOG) is None
    time.sleep(0.2)
    assert standin.cloud.requests == []


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_spot_is_watched(provider: str) -> None:
    assert watchable(spot(provider))


def test_documented_bodies() -> None:
    assert parse_gcp_preempted("FALSE", NOW) is None
    assert parse_gcp_preempted("TRUE", NOW) is not None
    # an action with a time that cannot be read: the documented two minutes
    n = parse_aws_action('{"action": "terminate", "time": "soon"}', NOW)
    assert n is not None
    assert n.deadline == NOW + timedelta(minutes=2)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_hostile_bodies_never_raise(body: str) -> None:
    for parse in (parse_aws_action, parse_gcp_preempted, parse_azure_events):
        notice = parse(body, NOW)
        assert notice is None or notice.final
        assert notice is None or NOW <= notice.deadline <= NOW + timedelta(seconds=120)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=30),
        lambda kids: (
            st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_hostile_json_never_raises(doc: object) -> None:
    body = json.dumps(doc)
    for parse in (parse_aws_action, parse_azure_events):
        parse(body, NOW)
    azure = json.dumps({"Events": [{"EventType": "Preempt", "NotBefore": doc}]})
    for notice in (
        parse_azure_events(azure, NOW),
        parse_aws_action(json.dumps({"action": "stop", "time": doc}), NOW),
    ):
        # any time at all: a deadline between now and the longest documented notice
        assert notice is not None
        assert notice.deadline is not None
        assert NOW <= notice.deadline <= NOW + timedelta(seconds=120)


@pytest.mark.parametrize(
    "when", ["1999-01-01T00:00:00Z", "3000-01-01T00:00:00Z", "2026-11-27T14:00:00+14:00"]
)
def test_a_time_out_of_reach_is_bounded(when: str) -> None:
    notice = parse_aws_action(json.dumps({"action": "terminate", "time": when}), NOW)
    assert notice is not None
    assert notice.deadline is not None
    assert NOW <= notice.deadline <= NOW + timedelta(seconds=120)


def test_on_interrupt_magic_where_nothing_is_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel whose server watches no notice refuses the code: it would never run."""
    from kernel_notebook import run_notebook, text

    from jupyter_gpucost.core.interruption_files import ENV_NAME

    monkeypatch.delenv(ENV_NAME, raising=False)
    nb = run_notebook(
        [
            "%load_ext jupyter_gpucost",
            "%gpucost on-interrupt save()  # raises",
            "%gpucost on-interrupt off",
        ]
    )
    assert "does not watch for a spot interruption" in text(nb.cells[1])
    assert "no code is kept to run at an interruption" in text(nb.cells[2])
