"""The gpucost hub service against a real JupyterHub on loopback, three users.

alice has a day budget and has disabled the extension in her own Jupyter config: the
service stops her server from outside and refuses her next spawn. bob has no budget. carol
(group ``finance``, an admin group of the service) reports her spend with her own token.
The tests run in order on one hub (start-up and spawns take seconds).
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hub_service_fixture import (
    SERVICE_SCOPES,
    USD_PER_S,
    Hub,
    dig,
    running_hub,
    service_pid,
    spawn,
)

#: alice's day budget: spent about 16 s after her spawn begins
ALICE_DAY_USD = 0.03
FLUSH_S = 2.0


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubsvc")
    with running_hub(root, budgets={"alice": {"day": ALICE_DAY_USD}}, flush_s=FLUSH_S) as hub:
        yield hub


def report(cost_usd: float, server_name: str = "", **extra: Any) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat()
    return {
        "version": 1,
        "session_id": "s-1",
        "server_name": server_name,
        "started": now,
        "sent": now,
        "cost_micro_usd": round(cost_usd * 1_000_000),
        "idle_micro_usd": 0,
        "rate_micro_usd_per_s": 1900,
        **extra,
    }


def allocated_so_far_usd(hub: Hub, user: str) -> float:
    """What ``user``'s running server has been allocated since the Hub started it: a report
    may raise the bill up to about 8 times this (8 GPUs at the dearest price, against 2)."""
    (running,) = me(hub, user)["running"]
    started = datetime.fromisoformat(running["started"])
    return (datetime.now(UTC) - started).total_seconds() * USD_PER_S


def me(hub: Hub, user: str) -> dict[str, Any]:
    code, body = hub.svc("GET", "api/me", hub.token_for(user))
    assert code == 200, body
    return body  # type: ignore[no-any-return]


def summary(hub: Hub, user: str = "carol") -> dict[str, Any]:
    code, body = hub.svc("GET", "api/admin/summary", hub.token_for(user))
    assert code == 200, body
    return body  # type: ignore[no-any-return]


def test_the_service_has_only_the_least_scopes(hub: Hub) -> None:
    code, body = hub.call("GET", "/user", token=hub.service_token)
    assert code == 200, body
    assert body["kind"] == "service"
    assert body["name"] == "gpucost"
    # these four (read:users:groups implies read:users:name), nothing that creates users,
    # reads their tokens or starts servers; the tests below show that they suffice
    assert sorted(body["scopes"]) == sorted([*SERVICE_SCOPES, "read:users:name"])


def test_a_user_over_budget_is_stopped_with_the_extension_disabled(hub: Hub) -> None:
    code, body = spawn(hub, "alice")
    assert code in (201, 202), body
    # the extension never ran in alice's server (her own config turned it off)
    assert not (hub.root / "data" / "alice" / "gpucost").exists()
    hub.wait("the service to stop alice's server", lambda: hub.server("alice") is None, 90)
    assert "DELETE /hub/api/users/alice/server (gpucost@127.0.0.1)" in hub.log.read_text()
    hub.wait(
        "the service to close alice's session",
        lambda: dig(me(hub, "alice"), "sessions", 0, "stopped"),
        10,
    )
    mine = me(hub, "alice")
    print(mine["sessions"])
    assert mine["today_usd"] >= ALICE_DAY_USD
    assert mine["running"] == []


def test_a_spawn_over_a_day_budget_is_refused_with_its_message(hub: Hub) -> None:
    code, body = hub.call("POST", "/users/alice/server")
    assert code == 403, body
    assert body["message"].startswith("Your server cannot start. Your day budget of $0.03")
    assert "(set by your hub admin) is spent" in body["message"]
    assert hub.server("alice") is None
    # asked for by a browser set to Chinese: the Hub hands the hook its request
    chinese = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
    code, body = hub.call("POST", "/users/alice/server", headers=chinese)
    assert code == 403, body
    assert body["message"].startswith("您的服务器无法启动。您的每日预算 US$0.03")
    assert "（由您的 Hub 管理员设置）已用完" in body["message"]  # noqa: RUF001
    assert hub.server("alice") is None


def test_one_users_totals_never_include_anothers(hub: Hub) -> None:
    alice_before = me(hub, "alice")["today_usd"]
    begun = time.monotonic()
    spawn(hub, "bob")
    spawn(hub, "carol")
    time.sleep(3)
    bob = me(hub, "bob")
    assert bob["user"] == "bob"
    assert {s["server_name"] for s in bob["running"]} == {""}
    # bob's bill is his own server's time at most, never alice's spend
    assert 0 < bob["today_usd"] <= (time.monotonic() - begun + 2) * USD_PER_S
    assert all(s["user"] == "bob" for s in bob["sessions"] if "user" in s)
    assert len(bob["sessions"]) == 1
    assert me(hub, "alice")["today_usd"] == pytest.approx(alice_before)
    # bob's own server reports to the service with its own token (simulated GPUs)
    hub.wait(
        "bob's server to report its spend",
        lambda: (dig(me(hub, "bob"), "sessions", 0, "reported_usd") or 0) > 0,
        20,
    )
    users = {u["user"]: u for u in summary(hub)["users"]}
    assert set(users) == {"alice", "bob", "carol"}
    assert users["alice"]["today_usd"] == pytest.approx(alice_before)


def test_reports_are_checked_and_tied_to_the_tokens_user(hub: Hub) -> None:
    carol = hub.token_for("carol")
    assert hub.svc("POST", "api/report", None, report(0))[0] == 401
    assert hub.svc("POST", "api/report", "not-a-token", report(0))[0] == 401
    # a service's token is not a user's server
    assert hub.svc("POST", "api/report", hub.token, report(0))[0] == 403
    code, body = hub.svc("POST", "api/report", carol, report(0, cost_micro_usd="lots"))
    assert code == 400
    assert body["message"].startswith("cost_micro_usd:")
    code, body = hub.svc("POST", "api/report", carol, b"x" * 70_000)
    assert code == 413
    # alice's server is stopped: carol's token cannot report into anyone else's server
    code, body = hub.svc("POST", "api/report", carol, report(0, server_name="gpu2"))
    assert code == 409
    assert "carol has no running server 'gpu2'" in body["message"]


def test_a_report_lower_than_the_allocation_does_not_lower_the_bill(hub: Hub) -> None:
    carol = hub.token_for("carol")
    before = me(hub, "carol")["today_usd"]
    assert before > 0
    code, reply = hub.svc("POST", "api/report", carol, report(0))
    assert code == 200, reply
    assert reply["user"] == "carol"
    time.sleep(2.5)
    assert me(hub, "carol")["today_usd"] >= before
    # a higher report (within what her server's GPUs could cost) raises carol's bill, and
    # only hers
    bob_before = me(hub, "bob")["today_usd"]
    higher = round(4 * allocated_so_far_usd(hub, "carol"), 6)  # whole micro-dollars
    code, reply = hub.svc("POST", "api/report", carol, report(higher))
    assert code == 200, reply
    hub.wait("carol's bill to take the report", lambda: me(hub, "carol")["today_usd"] >= higher, 10)
    assert me(hub, "bob")["today_usd"] < bob_before + higher


def test_the_admin_data_is_for_admins_only(hub: Hub) -> None:
    bob = hub.token_for("bob")
    for path in ("api/admin/summary", "api/admin/users.csv", "metrics"):
        code, body = hub.svc("GET", path, bob)
        assert code == 403, (path, body)
        assert hub.svc("GET", path, None)[0] == 401
    # what bob reads, in his browser's language
    code, body = hub.svc("GET", "api/admin/summary", bob, headers={"Accept-Language": "zh-CN"})
    assert (code, body["message"]) == (403, "bob 不是 GPU 费用服务的管理员。")
    code, body = hub.svc("GET", "api/admin/summary", bob)
    assert (code, body["message"]) == (403, "bob is not an admin of the GPU cost service.")
    data = summary(hub, "carol")
    assert {u["user"] for u in data["users"]} == {"alice", "bob", "carol"}
    assert data["near_budget"] == ["alice"]
    assert {g["group"]: g["members"] for g in data["groups"]} == {"finance": ["carol"]}
    running = {u["user"]: u["running"] for u in data["users"]}
    month = {u["user"]: u["month_usd"] for u in data["users"]}
    # the group's budget pools its members' spend (the service lists every user's groups)
    (finance,) = [b for b in running["carol"][0]["budgets"] if b["source"] == "group:finance"]
    assert finance["scope"] == "month"
    assert finance["spent_usd"] == pytest.approx(month["carol"], abs=0.05)
    assert running["bob"][0]["gpus"] == "2 × A100-80GB"
    assert running["bob"][0]["usd_per_hour"] == pytest.approx(6.862)
    code, csv_text = hub.svc("GET", "api/admin/users.csv", hub.token_for("carol"))
    assert code == 200
    assert csv_text.splitlines()[0].startswith("user,groups,today_usd,month_usd")
    assert len(csv_text.splitlines()) == 4
    code, text = hub.svc("GET", "metrics", hub.token_for("carol"))
    assert code == 200
    assert 'gpucost_hub_user_month_usd{user="bob"}' in text
    assert "gpucost_hub_running_servers 2" in text
    # a Prometheus service with the custom:gpucost:admin scope may scrape it
    code, text = hub.svc("GET", "metrics", hub.tokens["prometheus"])
    assert code == 200, text
    assert "# TYPE gpucost_hub_user_today_usd gauge" in text


def test_sigkill_and_restart_lose_at_most_one_flush_period(hub: Hub) -> None:
    carol = hub.token_for("carol")
    reported = round(5 * allocated_so_far_usd(hub, "carol"), 6)
    code, reply = hub.svc("POST", "api/report", carol, report(reported))
    assert code == 200, reply
    # a flush period (and a poll) later, the report is in the ledger
    time.sleep(FLUSH_S + 1.5)
    carol_before = me(hub, "carol")["today_usd"]
    assert carol_before >= reported
    bob_before = me(hub, "bob")["today_usd"]
    pid = service_pid(hub)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()

    def back() -> bool:
        try:
            return hub.svc("GET", "api/me", carol)[0] == 200 and service_pid(hub) != pid
        except (OSError, AssertionError):
            return False

    # the hub restarts a managed service that exits (it polls it every 30 s)
    hub.wait("the hub to restart the gpucost service", back, 90)
    assert "Service gpucost exited with status -9" in hub.log.read_text()
    # what was flushed before the kill is all there: carol's server reports every second,
    # so at most a flush period of its reports (at its allocation's rate) can be lost
    assert me(hub, "carol")["today_usd"] >= carol_before - (FLUSH_S + 1) * USD_PER_S
    # bob's server ran on while the service was down: billed for that time too
    bob_after = me(hub, "bob")["today_usd"]
    down_s = time.monotonic() - killed
    assert bob_after >= bob_before + (down_s - FLUSH_S - 2) * USD_PER_S


def test_a_clean_shutdown_flushes(hub: Hub, tmp_path: Path) -> None:
    carol = hub.token_for("carol")
    # more than anything she reported before (a report counts only past the highest)
    reported = round(6 * allocated_so_far_usd(hub, "carol"), 6)
    code, _ = hub.svc("POST", "api/report", carol, report(reported, session_id="s-2"))
    assert code == 200
    # SIGTERM: the service flushes before it exits, whatever the flush period
    pid = service_pid(hub)
    os.kill(pid, signal.SIGTERM)

    def back() -> bool:
        try:
            return hub.svc("GET", "api/me", carol)[0] == 200 and service_pid(hub) != pid
        except (OSError, AssertionError):
            return False

    hub.wait("the hub to restart the gpucost service", back, 90)
    assert me(hub, "carol")["today_usd"] >= reported - 1e-6


# -- without a hub: the settings and the spawn hook's behaviour when the service is down ----


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "gpucost-hub: c.GpuCostHub.default_gpu is not set"),
        (["--GpuCostHub.grace_s=-1"], "c.GpuCostHub.grace_s = -1.0 is not valid: use seconds"),
        (["--GpuCostHub.timezone=Mars/Base"], "c.GpuCostHub.timezone = 'Mars/Base' is not valid"),
        (
            ["--GpuCostHub.default_gpu=Z9000"],
            "c.GpuCostHub.default_gpu: no price for GPU model 'Z9000'",
        ),
        (["--GpuCostHub.bind_url=localhost:80"], "c.GpuCostHub.bind_url = 'localhost:80' is not"),
        (["--config=missing.py"], "c.GpuCostHub.config_file = 'missing.py': no such file"),
        # nothing names the cloud: no price is assumed (the AWS default is gone)
        (
            ["--GpuCostHub.price_provider="],
            "c.GpuCostHub.price_provider is not set and nothing in the profiles names a cloud",
        ),
        (
            ["--GpuCostHub.price_provider=ibm"],
            "c.GpuCostHub.price_provider = 'ibm' is not valid: use one of aws, gcp",
        ),
    ],
)
def test_a_setting_that_cannot_be_used_stops_the_service_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    import subprocess
    import sys

    env = {**os.environ, "JUPYTERHUB_API_TOKEN": "x", "PYTHONPATH": str(Path.cwd())}
    if args and not any(a.startswith("--GpuCostHub.default_gpu") for a in args):
        args = [*args, "--GpuCostHub.default_gpu=T4"]
    if not any(a.startswith("--GpuCostHub.price_provider") for a in args):
        args = [*args, "--GpuCostHub.price_provider=aws"]
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_gpucost.hub", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert message in line
    assert "Traceback" not in done.stderr


def test_a_budget_setting_is_checked_at_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "gpucost_hub_config.py").write_text(
        "c.GpuCostHub.default_gpu = 'T4'\nc.GpuCostHub.user_budgets = {'ann': {'week': 3}}\n"
        "c.GpuCostHub.price_provider = 'aws'\n"
    )
    env = {**os.environ, "JUPYTERHUB_API_TOKEN": "x", "PYTHONPATH": str(Path.cwd())}
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_gpucost.hub"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("gpucost-hub: c.GpuCostHub.user_budgets")
    assert len(done.stderr.strip().splitlines()) == 1


class _User:
    name = "ann"
    groups: list[Any] = []


class _Spawner:
    user = _User()


@pytest.mark.parametrize("fail_open", [False, True])
def test_the_spawn_hook_when_the_service_is_down(fail_open: bool) -> None:
    import asyncio
    import socket

    from jupyter_gpucost.hub.spawn_hook import SpawnRefused, refuse_over_budget

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hook = refuse_over_budget(
        f"http://127.0.0.1:{port}/services/gpucost", "token", fail_open=fail_open, timeout_s=2
    )
    if fail_open:
        assert asyncio.run(hook(_Spawner())) is None
    else:
        with pytest.raises(SpawnRefused) as refused:
            asyncio.run(hook(_Spawner()))
        assert refused.value.status_code == 503
        assert "budget service is unavailable" in refused.value.jupyterhub_message


def test_metrics_name_the_top_spenders_and_pool_the_rest(tmp_path: Path) -> None:
    from datetime import timedelta

    from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
    from jupyter_gpucost.hub.allocation import AllocationPolicy
    from jupyter_gpucost.hub.budgets import HubBudgetPolicy
    from jupyter_gpucost.hub.enforcer import HubEnforcer
    from jupyter_gpucost.hub.ledger import HubLedger
    from jupyter_gpucost.hub.model import ServerInfo
    from jupyter_gpucost.hub.service import HubService
    from jupyter_gpucost.hub.web import metrics_view

    ledger = HubLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    allocation = AllocationPolicy(None, "T4", PricePolicy(load_catalog()))
    service = HubService(ledger, allocation.rate_for, HubBudgetPolicy(), HubEnforcer(60))
    now = datetime.now(UTC)
    # 120 users, user i started i minutes ago: user119 spent the most
    servers = [
        ServerInfo(f"user{i:03d}", "", now - timedelta(minutes=i + 1), True, groups=(f"g{i % 30}",))
        for i in range(120)
    ]
    service.sync(servers, now)
    text = metrics_view.metrics(service)
    users = [line for line in text.splitlines() if line.startswith("gpucost_hub_user_month_usd{")]
    assert len(users) == metrics_view.METRICS_TOP_USERS + 1
    assert users[0].startswith('gpucost_hub_user_month_usd{user="user119"}')
    assert users[-1].startswith('gpucost_hub_user_month_usd{user="other"}')
    groups = [line for line in text.splitlines() if line.startswith("gpucost_hub_group_month_usd{")]
    assert len(groups) == metrics_view.METRICS_TOP_GROUPS + 1
    assert "gpucost_hub_running_servers 120" in text
    ledger.close()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def anonymous(hub: Hub, method: str, path: str) -> tuple[int, str]:
    """A request with no token and no cookie; a redirect is returned, not followed."""
    request = urllib.request.Request(
        f"{hub.service}{path}", method=method, data=b"{}" if method == "POST" else None
    )
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=15) as response:
            return response.status, response.headers.get("Location", "")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", "")


def test_every_route_of_the_service_needs_the_hubs_word(hub: Hub) -> None:
    from jupyter_gpucost.hub.web.handlers import make_app

    anonymous_answers = {
        # pages: off to the Hub's login (OAuth), nothing of anyone's spend
        ("GET", ""): 302,
        ("GET", "admin"): 302,
        # the OAuth callback without the Hub's code and state
        ("GET", "oauth_callback"): 400,
        ("POST", "api/report"): 401,
        ("GET", "api/me"): 401,
        ("GET", "api/admin/summary"): 401,
        ("GET", "api/admin/users.csv"): 401,
        ("GET", "api/users/bob/allowance"): 401,
        ("GET", "api/users/bob/profiles"): 401,
        ("GET", "api/allowance/requests"): 401,
        ("POST", "api/allowance/requests/1"): 401,
        # the user page's forms: refused before anything, no XSRF token (and no login)
        ("POST", "ask"): 403,
        ("POST", "decide/1"): 403,
        ("GET", "metrics"): 401,
    }
    # the list above covers every route the service serves (besides static files)
    from types import SimpleNamespace

    context = SimpleNamespace(hub_auth=SimpleNamespace(login_url="/hub/login"))
    app = make_app(context, "/services/gpucost/", b"x" * 32)  # type: ignore[arg-type]
    patterns = {
        rule.matcher.regex.pattern
        for rule in app.wildcard_router.rules
        # tornado's own static routes (static/, favicon.ico, robots.txt) serve files
        if rule.matcher.regex.pattern.startswith("/services/gpucost/")
        and "static" not in rule.matcher.regex.pattern
    }
    assert len(patterns) == len(anonymous_answers), patterns
    for (method, path), expected in anonymous_answers.items():
        code, location = anonymous(hub, method, path)
        assert code == expected, (method, path, code)
        if code == 302:
            assert "/hub/api/oauth2/authorize" in location or "/hub/login" in location
    # the report route takes only a POST
    assert anonymous(hub, "GET", "api/report")[0] == 405
    # a user's token opens neither another user's allowance nor the admin data
    bob = hub.token_for("bob")
    assert hub.svc("GET", "api/users/alice/allowance", bob)[0] == 403
    assert hub.svc("GET", "api/users/alice/profiles", bob)[0] == 403
