"""``python -m jupyter_gpucost.hub export-focus`` on what a real JupyterHub's gpucost service
wrote to its PostgreSQL ledger: two users in two groups (as the Hub lists them), each
user's total in the export equal to the ledger's, their groups in ``x_Group``, and the
ledger's credentials nowhere in the file."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from focus_schema import read_focus
from hub_service_fixture import NO_EXTENSION, Hub, running_hub, spawn
from postgres import Postgres

from jupyter_gpucost.hub.focus_export import main


@pytest.fixture(scope="module")
def ledger(postgres: Postgres) -> str:
    return postgres.new_database()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, ledger: str) -> Iterator[Hub]:
    root = tmp_path_factory.mktemp("hubfocus")
    with running_hub(
        root,
        budgets={},
        users=("ann", "bob"),
        groups={"ml": ["ann"], "vision": ["bob"]},
        group_budgets={},
        user_configs={"ann": NO_EXTENSION, "bob": NO_EXTENSION},
        flush_s=1.0,
        service_extra=f"c.GpuCostHub.ledger_url = {ledger!r}\n",
    ) as hub:
        yield hub


def ledger_rows(url: str, sql: str) -> list[tuple[object, ...]] | None:
    """The rows of ``sql`` in the ledger; ``None`` while it cannot be read (a wait's
    "not yet")."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    except sa.exc.SQLAlchemyError:
        return None
    finally:
        engine.dispose()


def test_the_hubs_ledger_exports_per_user_and_group(
    hub: Hub, ledger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for user in ("ann", "bob"):
        spawn(hub, user)
    billed = "SELECT user_name, sum(billed_micro_usd) FROM hub_daily GROUP BY user_name"
    hub.wait("both servers billed", lambda: len(ledger_rows(ledger, billed) or []) == 2, 60)
    for user in ("ann", "bob"):
        hub.call("DELETE", f"/users/{user}/server")
    stopped = "SELECT count(*) FROM hub_servers WHERE stopped_us IS NOT NULL"
    hub.wait("both servers closed", lambda: (ledger_rows(ledger, stopped) or [(0,)])[0][0] == 2, 90)
    totals = {str(u): int(str(v)) for u, v in ledger_rows(ledger, billed) or []}
    assert all(totals.values())

    out = tmp_path / "hub.parquet"
    assert main([str(out), "--config", str(hub.root / "gpucost_hub_config.py")]) == 0
    rows = read_focus(out)
    by_user: dict[str, Decimal] = {}
    for row in rows:
        user = str(row["x_User"])
        by_user[user] = by_user.get(user, Decimal(0)) + Decimal(str(row["BilledCost"]))
    assert {u: int(v * 1_000_000) for u, v in by_user.items()} == totals
    assert {(r["x_User"], r["x_Group"]) for r in rows} == {("ann", "ml"), ("bob", "vision")}
    parsed = sa.engine.make_url(ledger)
    text = out.read_bytes()
    for secret in (ledger, parsed.password, parsed.username, parsed.database):
        assert not secret or str(secret).encode() not in text
