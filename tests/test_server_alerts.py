"""Alerts from a real Jupyter server (pytest-jupyter) to real receivers on loopback: a
budget crossing 50/80/100 % sends exactly three threshold alerts and one stop; the panel's
routes list targets masked, let the user add, test and remove their own, never the
admin's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from alert_receivers import Http, Smtp
from tornado.httpclient import HTTPClientError
from waiting import wait_for

from jupyter_gpucost.alerts.targets import fingerprint, mask

ADMIN_SECRET = "admin-secret-token"


async def eventually(check: Any, timeout_s: float = 60) -> None:
    async def holds() -> object:
        return check()

    await wait_for(holds, timeout_s, "the alerts to arrive")


class TestABudgetCrossingItsThresholds:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, http_receiver: Http, smtp: Smtp) -> dict[str, object]:
        # 2 simulated A100s at $6.862/h: $0.0019 a second; $0.04 lasts about 21 s, so
        # the alerts' check (every 2 s, 10 % of it) sees each threshold crossed on its own
        # (thresholds crossed within one check are one alert: see the class below)
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "hard_budget_usd": 0.04,
            "budget_grace_s": 1,
            "budget_save_timeout_s": 1,
            "budget_state_path": str(tmp_path / "budget.json"),
            "notify_state_path": str(tmp_path / "alerts.json"),
            "notify": [
                f"webhook://127.0.0.1:{http_receiver.port}/pi?token={ADMIN_SECRET}",
                smtp.mailto("pi@example.com"),
            ],
        }

    async def test_three_threshold_alerts_and_one_stop(
        self, jp_fetch: Any, jp_serverapp: Any, http_receiver: Http, smtp: Smtp
    ) -> None:
        def documents() -> list[dict[str, Any]]:
            return list(http_receiver.at("/pi"))

        await eventually(lambda: any(d["kind"] == "stopped" for d in documents()))
        # a few more checks of the standings: nothing is sent twice
        await asyncio.sleep(5)
        thresholds = sorted(
            d["threshold_pct"] for d in documents() if d["kind"] == "budget_threshold"
        )
        assert thresholds == [50, 80, 100]
        (stop,) = [d for d in documents() if d["kind"] == "stopped"]
        assert stop["title"].endswith("stopped because the budget ran out")
        assert "stopped at $0.04 budget" in stop["message"]
        assert stop["link"].endswith("/lab")
        assert len(documents()) == 4
        # the same four by e-mail
        await eventually(lambda: len(smtp.inbox.messages) == 4)
        # what the panel lists: the admin's targets by kind only
        listing = json.loads((await jp_fetch("gpucost", "api", "alerts")).body)
        assert listing["admin"] == ["webhook", "mailto"]
        assert listing["yours"] == []
        assert listing["thresholds_pct"] == [50, 80, 100]
        text = json.dumps(listing)
        assert ADMIN_SECRET not in text
        assert str(http_receiver.port) not in text
        assert str(smtp.port) not in text


class TestABudgetFoundSpentAtTheFirstCheck:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, http_receiver: Http) -> dict[str, object]:
        # $0.0001: the first sample (0.2 s of 2 A100s, $0.00038) is already 3.8x over it
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "minimum_charge_s": 0,
            "hard_budget_usd": 0.0001,
            "budget_grace_s": 1,
            "budget_save_timeout_s": 1,
            "budget_state_path": str(tmp_path / "budget.json"),
            "notify_state_path": str(tmp_path / "alerts.json"),
            "notify": [f"webhook://127.0.0.1:{http_receiver.port}/pi"],
        }

    async def test_one_alert_names_100_percent(
        self, jp_fetch: Any, jp_serverapp: Any, http_receiver: Http
    ) -> None:
        def documents() -> list[dict[str, Any]]:
            return list(http_receiver.at("/pi"))

        await eventually(lambda: any(d["kind"] == "stopped" for d in documents()))
        await asyncio.sleep(5)  # a few more checks: nothing more
        thresholds = [d["threshold_pct"] for d in documents() if d["kind"] == "budget_threshold"]
        assert thresholds == [100]
        assert len(documents()) == 2


class TestTheUsersOwnTargets:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "notify_state_path": str(tmp_path / "alerts.json"),
            "notify": [f"webhook://127.0.0.1:9/admin?token={ADMIN_SECRET}"],
        }

    async def test_add_test_and_remove_only_their_own(
        self, jp_fetch: Any, http_receiver: Http, tmp_path: Path
    ) -> None:
        mine = f"webhook://127.0.0.1:{http_receiver.port}/mine?key=my-own-secret"
        answer = await jp_fetch(
            "gpucost", "api", "alerts", "targets", method="POST", body=json.dumps({"url": mine})
        )
        listing = json.loads(answer.body)
        assert listing["yours"] == [{"id": fingerprint(mine), "target": mask(mine)}]
        assert "my-own-secret" not in answer.body.decode()
        # kept for the server's next start, readable by the server's user only
        kept = tmp_path / "alerts-targets.json"
        assert kept.stat().st_mode & 0o077 == 0
        # a test reaches it
        await jp_fetch(
            "gpucost",
            "api",
            "alerts",
            "targets",
            fingerprint(mine),
            "test",
            method="POST",
            body="{}",
        )
        await eventually(lambda: len(http_receiver.at("/mine")) == 1, 20)
        (trial,) = http_receiver.at("/mine")
        assert trial["kind"] == "test"
        # the admin's target can be neither tested nor removed, and a bad URL is refused
        # without being echoed
        admin_id = fingerprint(f"webhook://127.0.0.1:9/admin?token={ADMIN_SECRET}")
        for method, path in (("POST", [admin_id, "test"]), ("DELETE", [admin_id])):
            with pytest.raises(HTTPClientError) as e:
                await jp_fetch(
                    "gpucost",
                    "api",
                    "alerts",
                    "targets",
                    *path,
                    method=method,
                    **({"body": "{}"} if method == "POST" else {}),
                )
            assert e.value.code == 404
        with pytest.raises(HTTPClientError) as e:
            await jp_fetch(
                "gpucost",
                "api",
                "alerts",
                "targets",
                method="POST",
                body=json.dumps({"url": "nosuch://leaked-secret@x"}),
            )
        assert e.value.code == 400
        assert e.value.response is not None
        assert "leaked-secret" not in e.value.response.body.decode()
        answer = await jp_fetch(
            "gpucost", "api", "alerts", "targets", fingerprint(mine), method="DELETE"
        )
        assert json.loads(answer.body)["yours"] == []

    async def test_a_cookie_request_without_xsrf_cannot_add_a_target(
        self, jp_fetch: Any, http_server_client: Any, jp_base_url: str, jp_serverapp: Any
    ) -> None:
        # a page of another site making the user's browser post: the cookie without the
        # XSRF token is refused
        token = jp_serverapp.identity_provider.token
        login = await http_server_client.fetch(
            f"{jp_base_url}?token={token}", follow_redirects=False, raise_error=False
        )
        cookies = "; ".join(
            c.split(";", 1)[0] for c in login.headers.get_list("Set-Cookie") if "=" in c
        )
        assert cookies
        url = f"{jp_base_url}gpucost/api/alerts"
        ok = await http_server_client.fetch(url, headers={"Cookie": cookies}, raise_error=False)
        assert ok.code == 200
        response = await http_server_client.fetch(
            f"{url}/targets",
            method="POST",
            body=json.dumps({"url": "webhook://attacker.example/steal"}),
            headers={"Cookie": cookies},
            raise_error=False,
        )
        assert response.code == 403
        listing = json.loads((await jp_fetch("gpucost", "api", "alerts")).body)
        assert listing["yours"] == []


def test_todays_spend_above_three_usual_days_is_alerted_once() -> None:
    from datetime import date

    from jupyter_gpucost.alerts import AlertDispatcher, DispatchSettings
    from jupyter_gpucost.alerts.model import Alert, Context
    from jupyter_gpucost.alerts.targets import Target, parse_targets
    from jupyter_gpucost.server.notify.alerter import ServerAlerts
    from jupyter_gpucost.server.notify.user_targets import UserTargets

    sent: list[str] = []

    def record(alert: Alert, _target: Target, _timeout_s: float) -> None:
        sent.append(alert.message)

    alerts = ServerAlerts(
        parse_targets(["webhook://127.0.0.1:9/pi"], "c.GpuCost.notify"),
        UserTargets(None),
        AlertDispatcher(DispatchSettings(), send=record),
        Context(user="alice"),
        (50, 80, 100),
    )
    today = date(2026, 11, 27)
    # what Ledger.days answers: spend per local day, oldest first, days with spend only
    usual = [(date(2026, 11, d), 1_000_000) for d in (20, 22, 23, 25)]
    assert not alerts.check_spike([*usual, (today, 2_900_000)], 3, today)
    assert alerts.check_spike([*usual, (today, 3_100_000)], 3, today)
    assert not alerts.check_spike([*usual, (today, 9_000_000)], 3, today)
    # too little history: nothing to compare with
    assert not alerts.check_spike([*usual[:2], (today, 9_000_000)], 3, date(2026, 11, 28))
    assert alerts.dispatcher.wait_idle(10)
    assert sent == ["alice has spent $3.10 on 2026-11-27, more than 3 times the usual $1.00 a day."]
