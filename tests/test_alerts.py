"""Alerts delivered to real receivers on loopback, and what the dispatcher promises: once per
(event, subject, threshold) even across a restart, retried with backoff, a dead target
recorded (masked) and never the URL in a log or a record."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from datetime import UTC, datetime
from email.header import decode_header, make_header
from pathlib import Path

import pytest
from alert_receivers import Http, Smtp
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.alerts import (
    AlertDispatcher,
    DispatchSettings,
    TargetError,
    budget_crossing,
    mask,
    parse_targets,
    spend_spike,
    stopped,
)
from jupyter_gpucost.alerts.deliver import deliver
from jupyter_gpucost.alerts.model import Alert, Context
from jupyter_gpucost.alerts.targets import Target, parse_target
from jupyter_gpucost.core import i18n

AT = datetime(2026, 11, 27, 9, 30, tzinfo=UTC)
CONTEXT = Context(
    user="alice",
    server="alice/train",
    machine="g5.xlarge (1 x A10G)",
    link="http://127.0.0.1:8888/lab",
)


def crossing(*args: object, **kwargs: object) -> Alert:
    alert = budget_crossing(*args, **kwargs)  # type: ignore[arg-type]
    assert alert is not None
    return alert


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_email_reaches_a_real_smtp_server(smtp: Smtp) -> None:
    (target,) = parse_targets([smtp.mailto("pi@example.com")], "c.GpuCost.notify")
    alert = crossing(CONTEXT, "hard:month:2026-11", 5_000_000, 10_000_000, [50], at=AT)
    deliver(alert, target, 5.0)
    (mail,) = smtp.inbox.messages
    assert smtp.inbox.recipients == [["pi@example.com"]]
    subject = str(make_header(decode_header(mail["Subject"])))
    assert subject == "alice: 50% of a $10.00 budget spent"
    parts = [p for p in mail.walk() if p.get_content_type() == "text/plain"]
    raw = parts[0].get_payload(decode=True)
    assert isinstance(raw, bytes)
    body = raw.decode()
    assert "alice has spent $5.00 of a $10.00 budget (50%)." in body
    assert "alice/train" in body
    assert "http://127.0.0.1:8888/lab" in body


def test_slack_compatible_json_and_generic_webhooks_reach_a_real_http_server(
    http_receiver: Http,
) -> None:
    port = http_receiver.port
    targets = parse_targets(
        [
            # Mattermost's incoming webhooks take Slack's payload ({"text": ...})
            f"mmost://127.0.0.1:{port}/slackkey",
            f"json://127.0.0.1:{port}/apprise-json",
            f"webhook://127.0.0.1:{port}/generic",
        ],
        "c.GpuCost.notify",
    )
    alert = crossing(CONTEXT, "hard:month:2026-11", 8_000_000, 10_000_000, [80], at=AT)
    for target in targets:
        deliver(alert, target, 5.0)
    (slack,) = http_receiver.at("/hooks/slackkey")
    assert "alice has spent $8.00 of a $10.00 budget (80%)." in slack["text"]
    (generic_apprise,) = http_receiver.at("/apprise-json")
    assert generic_apprise["title"] == "alice: 80% of a $10.00 budget spent"
    (ours,) = http_receiver.at("/generic")
    assert ours == {
        "schema": "gpucost.alert/v1",
        "kind": "budget_threshold",
        "at": "2026-11-27T09:30:00Z",
        "user": "alice",
        "group": None,
        "server": "alice/train",
        "machine": "g5.xlarge (1 x A10G)",
        "subject": "hard:month:2026-11",
        "threshold_pct": 80,
        "currency": "USD",
        "amounts": {"spent": "$8.00", "budget": "$10.00"},
        "language": "en",
        "title": "alice: 80% of a $10.00 budget spent",
        "message": "alice has spent $8.00 of a $10.00 budget (80%).",
        "link": "http://127.0.0.1:8888/lab",
    }


def test_once_per_event_subject_threshold_even_after_a_restart(
    http_receiver: Http, tmp_path: Path
) -> None:
    state = tmp_path / "alerts.json"
    targets = parse_targets([f"webhook://127.0.0.1:{http_receiver.port}/a"], "c.GpuCost.notify")
    dispatcher = AlertDispatcher(DispatchSettings(state_path=state))
    for spent in (5_000_000, 6_000_000, 8_500_000, 8_600_000):
        dispatcher.submit(crossing(CONTEXT, "hard:session:s1", spent, 10_000_000), targets)
    assert dispatcher.wait_idle(20)
    dispatcher.save()
    dispatcher.close()
    assert sorted(b["threshold_pct"] for b in http_receiver.at("/a")) == [50, 80]
    again = AlertDispatcher(DispatchSettings(state_path=state))
    again.submit(crossing(CONTEXT, "hard:session:s1", 10_000_000, 10_000_000), targets)
    # another period of the same budget is another subject
    again.submit(crossing(CONTEXT, "hard:session:s2", 5_000_000, 10_000_000), targets)
    assert again.wait_idle(20)
    again.close()
    assert sorted((b["subject"], b["threshold_pct"]) for b in http_receiver.at("/a")) == [
        ("hard:session:s1", 50),
        ("hard:session:s1", 80),
        ("hard:session:s1", 100),
        ("hard:session:s2", 50),
    ]


def test_several_thresholds_passed_at_once_are_one_alert_naming_the_highest() -> None:
    # a $0.02 budget found 5x spent at the first check
    alert = crossing(CONTEXT, "hard:session:s1", 100_000, 20_000, at=AT)
    assert alert.threshold_pct == 100
    assert alert.title == "alice: 100% of a $0.02 budget spent"
    assert crossing(CONTEXT, "s", 8_500_000, 10_000_000, [50, 80, 95]).threshold_pct == 80
    assert budget_crossing(CONTEXT, "s", 4_999_999, 10_000_000) is None
    assert budget_crossing(CONTEXT, "s", 5_000_000, 0) is None


@given(
    spent=st.integers(0, 10**12),
    budget=st.integers(1, 10**10),
    thresholds=st.lists(st.integers(1, 1000), min_size=1, max_size=6),
)
def test_the_alert_names_the_highest_threshold_reached(
    spent: int, budget: int, thresholds: list[int]
) -> None:
    alert = budget_crossing(CONTEXT, "s", spent, budget, thresholds, at=AT)
    reached = [t for t in thresholds if spent * 100 >= t * budget]
    assert (alert is None) == (not reached)
    if alert is not None:
        assert alert.threshold_pct == max(reached)


def test_each_target_is_paced_and_the_next_alert_says_how_many_were_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    targets = parse_targets(
        ["webhook://127.0.0.1:9/pi", "webhook://127.0.0.1:9/lab"], "c.GpuCost.notify"
    )
    delivered: list[tuple[str, Alert]] = []
    dispatcher = AlertDispatcher(
        DispatchSettings(per_target_per_hour=3, pace_window_s=1.0),
        send=lambda alert, target, _t: delivered.append((target.url, alert)),
    )
    alerts = [crossing(CONTEXT, f"s{n}", 10_000_000, 10_000_000) for n in range(12)]
    assert [dispatcher.submit(a, targets[:1]) for a in alerts[:5]] == [True] * 3 + [False] * 2
    # the other target has a pace of its own
    assert dispatcher.submit(alerts[5], targets[1:])
    assert dispatcher.held_back(targets[0]) == 2
    # logged once for the spell, never the URL
    held = [r.getMessage() for r in caplog.records if "held back" in r.getMessage()]
    assert len(held) == 1
    assert "127.0.0.1:9" not in held[0]
    # what was held back is not sent later as if new: its key counts as sent
    assert not dispatcher.submit(alerts[4], targets[:1])
    time.sleep(1.1)
    assert dispatcher.submit(alerts[6], targets[:1])
    assert dispatcher.wait_idle(10)
    dispatcher.close()
    to_pi = [a for url, a in delivered if url.endswith("/pi")]
    assert len(to_pi) == 4
    assert to_pi[-1].message.endswith(
        "2 more alerts were held back: at most 3 an hour go to one place."
    )
    assert not any("held back" in a.message for a in to_pi[:3])
    assert dispatcher.held_back(targets[0]) == 0


def test_a_key_is_remembered_until_its_end_and_not_by_count(tmp_path: Path) -> None:
    from datetime import timedelta

    from jupyter_gpucost.alerts.memory import FileKeys

    sent: list[str] = []
    clock = [AT]

    def dispatcher() -> AlertDispatcher:
        return AlertDispatcher(
            DispatchSettings(per_target_per_hour=0, queue_size=20_000),
            send=lambda alert, _target, _t: sent.append(alert.key),
            memory=FileKeys(tmp_path / "alerts.json"),
            clock=lambda: clock[0],
        )

    (target,) = parse_targets(["webhook://127.0.0.1:9/pi"], "c.GpuCost.notify")
    first = dispatcher()
    half = crossing(CONTEXT, "hard:month:2026-11", 5_000_000, 10_000_000, at=AT)
    assert first.submit(half, [target])
    for n in range(6000):
        first.submit(crossing(CONTEXT, f"other:{n}", 5_000_000, 10_000_000, at=AT), [target])
    assert not first.submit(half, [target])
    assert first.wait_idle(30)
    first.save()
    first.close()
    assert sent.count(half.key) == 1
    # a restart remembers it until its end, and forgets it after
    clock[0] = AT + timedelta(days=20)
    assert not dispatcher().submit(half, [target])
    clock[0] = AT + timedelta(days=60)
    later = dispatcher()
    assert later.submit(half, [target])
    assert later.wait_idle(10)
    later.close()
    assert sent.count(half.key) == 2


def test_a_dead_target_is_retried_with_backoff_recorded_masked_and_never_logged(
    http_receiver: Http, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "hunter2-token"
    dead = f"webhook://user:{secret}@127.0.0.1:{closed_port()}/hook?key={secret}"
    live = f"webhook://127.0.0.1:{http_receiver.port}/live"
    targets = parse_targets([dead, live], "c.GpuCost.notify")
    waits: list[float] = []
    dispatcher = AlertDispatcher(
        DispatchSettings(retries=3, backoff_s=0.5, timeout_s=2), sleep=waits.append
    )
    alert = stopped(
        CONTEXT,
        "budget",
        "stopped at $10.00 budget",
        still_bills_per_hour=1.006,
        subject="2026-11-27T09:30:00Z",
        at=AT,
    )
    with caplog.at_level(logging.DEBUG):
        assert dispatcher.submit(alert, targets)
        assert dispatcher.wait_idle(30)
    dispatcher.close()
    assert waits == [0.5, 1.0, 2.0]
    (failure,) = dispatcher.failed()
    assert failure["attempts"] == 4
    assert failure["ok"] is False
    assert failure["target"] == mask(dead)
    assert secret not in str(failure)
    assert "could not be reached" in str(failure["error"])
    (live_body,) = http_receiver.at("/live")
    assert live_body["amounts"] == {"still_bills_per_hour": "$1.01/h"}
    assert "The machine still bills $1.01/h." in live_body["message"]
    assert secret not in caplog.text
    assert "127.0.0.1" not in caplog.text


def test_a_bad_url_is_refused_naming_the_setting_but_not_the_secret() -> None:
    with pytest.raises(TargetError, match=r"c\.GpuCost\.notify: .*not a URL Apprise") as e:
        parse_target("nosuchservice://secret-token@host", "c.GpuCost.notify")
    assert "secret-token" not in str(e.value)
    with pytest.raises(TargetError, match=r"c\.GpuCostHub\.notify"):
        parse_target("webhook:///no-host", "c.GpuCostHub.notify")
    with pytest.raises(TargetError):
        parse_target("", "c.GpuCost.notify")


#: a token: "tok" is in no scheme's name nor in a hex fingerprint
SECRETS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", max_size=60).map(
    lambda s: f"tok{s}"
)


@given(SECRETS, st.text(max_size=80), st.sampled_from(["slack", "mailtos", "webhook", "??"]))
def test_a_masked_target_never_shows_a_secret(secret: str, noise: str, scheme: str) -> None:
    url = f"{scheme}://{noise}{secret}@{noise}/{secret}?token={secret}"
    shown = mask(url)
    assert secret not in shown
    # all it shows: the scheme (when it is one) and six hex digits
    assert re.fullmatch(r"(slack|mailtos|webhook|\?)://…#[0-9a-f]{6}", shown)


def test_a_spike_needs_history_and_a_factor_above_the_median() -> None:
    assert spend_spike(CONTEXT, "2026-11-27", 10_000_000, [1_000_000, 2_000_000], 3) is None
    assert spend_spike(CONTEXT, "2026-11-27", 5_000_000, [1_000_000] * 5 + [9_000_000], 5) is None
    spike = spend_spike(CONTEXT, "2026-11-27", 6_000_000, [1_000_000] * 5 + [9_000_000], 5)
    assert spike is not None
    assert spike.key == "spend_spike|alice|day:2026-11-27|"
    assert spike.message == (
        "alice has spent $6.00 on 2026-11-27, more than 5 times the usual $1.00 a day."
    )


def test_an_alert_is_written_in_the_sessions_language_and_currency() -> None:
    context = Context(user="alice", currency="CNY", symbol="¥")
    i18n.set_language("zh_CN")
    try:
        alert = crossing(context, "s", 5_000_000, 10_000_000, [50], at=AT)
    finally:
        i18n.set_language("en")
    assert alert.language == "zh_CN"
    assert alert.message == "alice 已花费 ¥5.00，预算 ¥10.00 的 50%。"  # noqa: RUF001
    assert alert.document()["currency"] == "CNY"


def test_a_flood_is_dropped_not_waited_for_and_a_dropped_alert_is_not_marked_sent() -> None:
    (target,) = parse_targets(["webhook://127.0.0.1:9/x"], "c.GpuCost.notify")
    release = threading.Event()
    sent: list[str] = []

    def slow(alert: Alert, _target: Target, _timeout_s: float) -> None:
        release.wait(10)
        sent.append(alert.key)

    dispatcher = AlertDispatcher(DispatchSettings(queue_size=1, workers=1), send=slow)
    alerts = [crossing(CONTEXT, f"s{n}", 10_000_000, 10_000_000) for n in range(3)]
    started = time.perf_counter()
    queued = [dispatcher.submit(a, [target]) for a in alerts]
    assert time.perf_counter() - started < 1  # never waits for the stuck worker
    assert not all(queued)
    release.set()
    assert dispatcher.wait_idle(10)
    # what was dropped goes out on a later try; what was sent is not sent again
    again = []
    for alert in alerts:
        again.append(dispatcher.submit(alert, [target]))
        assert dispatcher.wait_idle(10)
    dispatcher.close()
    assert [not q for q in queued] == again
    assert sorted(sent) == sorted(a.key for a in alerts)


def test_a_single_servers_ledger_remembers_the_keys_sent_across_a_restart(
    tmp_path: Path,
) -> None:
    from jupyter_gpucost.core.sent_keys import TableKeys
    from jupyter_gpucost.server.ledger import Ledger
    from jupyter_gpucost.server.ledger.schema import alerts_sent_table

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    sent: list[str] = []
    (target,) = parse_targets(["webhook://127.0.0.1:9/pi"], "c.GpuCost.notify")
    half = crossing(CONTEXT, "hard:month:2026-11", 5_000_000, 10_000_000, at=AT)
    for _restart in range(3):
        ledger = Ledger(url)
        dispatcher = AlertDispatcher(
            DispatchSettings(),
            send=lambda alert, _target, _t: sent.append(alert.key),
            memory=TableKeys(ledger.engine, alerts_sent_table),
        )
        dispatcher.submit(half, [target])
        assert dispatcher.wait_idle(10)
        dispatcher.save()
        dispatcher.close()
        ledger.close()
    assert sent == [half.key]
