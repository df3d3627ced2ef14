"""The gpucost service through an outage of its PostgreSQL ledger, on a real JupyterHub:
a budget spent while the ledger is down is acted on then (the server is stopped from the
service's memory), ``api/me`` answers from memory with a warning, and after the service is
SIGKILLed during the outage the server that stopped meanwhile is billed up to when the Hub
says it stopped, not to the ledger's last flush before the outage."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from hub_service_fixture import NO_EXTENSION, USD_PER_S, Hub, running_hub, service_pid, spawn
from postgres import Postgres

#: about 26 s of 2 A100s
BUDGET_USD = 0.05
FLUSH_S = 1.0


@pytest.fixture(scope="module")
def ledger(postgres: Postgres) -> str:
    return postgres.new_database()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, ledger: str) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("huboutage")
    with running_hub(
        root,
        budgets={"gina": {"day": BUDGET_USD}},
        users=("gina", "fin"),
        # fin is an admin of the service (c.GpuCostHub.admin_groups)
        groups={"finance": ["fin"]},
        group_budgets={},
        user_configs={"gina": NO_EXTENSION},
        flush_s=FLUSH_S,
        service_extra=f"c.GpuCostHub.ledger_url = {ledger!r}\n",
    ) as hub:
        yield hub


def me(hub: Hub) -> dict[str, Any] | None:
    try:
        code, body = hub.svc("GET", "api/me", hub.token_for("gina"))
    except OSError:
        return None
    return body if code == 200 else None  # type: ignore[no-any-return]


def billed_micro_usd(url: str, user: str) -> int | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            value = conn.execute(
                sa.text("SELECT sum(billed_micro_usd) FROM hub_daily WHERE user_name = :u"),
                {"u": user},
            ).scalar()
            return None if value is None else int(value)
    except sa.exc.SQLAlchemyError:
        return None
    finally:
        engine.dispose()


def test_the_service_enforces_through_an_outage_and_bills_to_the_hubs_stop_time(
    hub: Hub, postgres: Postgres, ledger: str
) -> None:
    spawn(hub, "gina")
    hub.wait("gina's server in the ledger", lambda: billed_micro_usd(ledger, "gina"), 30)
    postgres.crash()
    try:
        # the budget is spent while the ledger is down: the service stops the server
        warned: list[dict[str, Any]] = []

        def told() -> bool:
            mine = me(hub)
            if mine and mine.get("warning"):
                warned.append(mine)
            return bool(warned)

        hub.wait("api/me to answer from memory with a warning", told, 30)
        assert warned[0]["warning"]["code"] == "ledger-unreachable"
        assert warned[0]["today_usd"] > 0
        # a server's report is still taken, and its reply says the ledger is away
        now = datetime.now(UTC).isoformat()
        code, reply = hub.svc(
            "POST",
            "api/report",
            hub.token_for("gina"),
            {
                "version": 1,
                "session_id": "s-1",
                "server_name": "",
                "started": now,
                "sent": now,
                "cost_micro_usd": 1000,
                "idle_micro_usd": 0,
                "rate_micro_usd_per_s": 1900,
            },
        )
        assert code == 200, reply
        assert reply["ledger_unreachable_since"] is not None
        # a page that must read the ledger answers 503 with a sentence, never 500
        code, body = hub.svc("GET", "api/admin/summary", hub.token_for("fin"))
        assert code == 503, body
        assert body["message"].startswith("The hub's ledger cannot be reached just now")
        hub.wait("the service to stop gina's server", lambda: hub.server("gina") is None, 90)
        code, model = hub.call("GET", "/users/gina?include_stopped_servers=1")
        assert code == 200, model
        server = model["servers"][""]
        assert server["stopped"]
        stopped = datetime.fromisoformat(server["last_activity"].replace("Z", "+00:00"))
        # killed before the ledger is back: what it held in memory is gone
        os.kill(service_pid(hub), signal.SIGKILL)
    finally:
        postgres.restart()
    (started_row,) = _started(ledger, "gina")
    hub.wait("the hub to restart the service", lambda: me(hub) is not None, 90)

    def closed() -> bool:
        return not _running(ledger, "gina")

    hub.wait("gina's session closed after the restart", closed, 30)
    billed = billed_micro_usd(ledger, "gina")
    assert billed is not None
    expected = (stopped - started_row).total_seconds() * USD_PER_S * 1_000_000
    # to the Hub's own stop time, within a poll and a flush: never the pre-outage flush
    assert abs(billed - expected) <= (FLUSH_S + 2.0) * USD_PER_S * 1_000_000, (billed, expected)
    assert billed >= BUDGET_USD * 1_000_000


def _started(url: str, user: str) -> list[datetime]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [
                datetime.fromtimestamp(us / 1_000_000, UTC)
                for (us,) in conn.execute(
                    sa.text("SELECT started_us FROM hub_servers WHERE user_name = :u"), {"u": user}
                )
            ]
    finally:
        engine.dispose()


def _running(url: str, user: str) -> bool:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return bool(
                conn.execute(
                    sa.text(
                        "SELECT count(*) FROM hub_servers WHERE user_name = :u "
                        "AND stopped_us IS NULL"
                    ),
                    {"u": user},
                ).scalar()
            )
    except sa.exc.SQLAlchemyError:
        return True
    finally:
        engine.dispose()
