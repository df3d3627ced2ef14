"""``python -m jupyter_gpucost.hub export-focus``: the hub ledger (on PostgreSQL and SQLite)
as a FOCUS 1.2 dataset, through the single server's writer, checked against the
specification by ``focus_schema``."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from focus_schema import read_focus

from jupyter_gpucost.core.hub_protocol import SpendReport
from jupyter_gpucost.hub.focus_export import main
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo

PARIS = ZoneInfo("Europe/Paris")
T = datetime(2026, 11, 23, 22, 0, tzinfo=PARIS)
A100 = Rate(GpuAllocation("A100", 2), Decimal("3.1"), "catalog: aws p4d.24xlarge us-east-1")
T4 = Rate(GpuAllocation("T4", 1), Decimal("0.52"), "config: c.GpuCostHub.gpu_prices")


def config(tmp_path: Path, url: str, *more: str) -> str:
    path = tmp_path / "gpucost_config.py"
    lines = [f"c.GpuCostHub.ledger_url = {url!r}", "c.GpuCostHub.timezone = 'Europe/Paris'"]
    lines += more
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def hub_ledger(url: str) -> dict[str, int]:
    """ann (group ml) on two A100 over midnight, bob (group vision) on a T4 twice; the
    ledger's month totals per user."""
    ledger = HubLedger(url, tz=PARIS)
    ann = ledger.open_server(ServerInfo("ann", "", T, True, "a100x2", groups=("ml",)), A100)
    bob = ledger.open_server(ServerInfo("bob", "gpu", T, True, "t4", groups=("vision",)), T4)
    # ann's server reports its own session (what its own export calls it)
    spent = SpendReport(
        session_id="20261123T210000-ann",
        server_name="",
        started=T,
        sent=T + timedelta(hours=1),
        cost_micro_usd=1_000_000,
        idle_micro_usd=0,
        rate_micro_usd_per_s=1000,
        energy_wh=1.5,
        cells=3,
    )
    ledger.add_report(ann.server_id, spent, T + timedelta(hours=1))
    ledger.flush(T + timedelta(hours=1))
    ledger.close_server(bob.server_id, T + timedelta(hours=1, minutes=30))
    later = T + timedelta(hours=3)
    # bob joined a second group before his second server (and names no column can hold
    # never keep a server from being billed)
    again = ledger.open_server(
        ServerInfo("bob", "gpu", later, True, "t4", groups=("vision", "ml", "x" * 256, "nul\x00")),
        T4,
    )
    ledger.flush(T + timedelta(hours=4))
    ledger.close_server(ann.server_id, T + timedelta(hours=5))
    ledger.close_server(again.server_id, T + timedelta(hours=5))
    ledger.flush(T + timedelta(hours=5))
    totals = {u: t.month_micro_usd for u, t in ledger.all_totals(T + timedelta(hours=5)).items()}
    ledger.close()
    return totals


@pytest.mark.parametrize("name", ["hub.csv", "hub.parquet"])
def test_the_hub_ledger_is_focus_and_adds_up_per_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ledger_url: str, name: str
) -> None:
    totals = hub_ledger(ledger_url)
    assert set(totals) == {"ann", "bob"}
    assert all(totals.values())
    out = tmp_path / "out" / name
    assert main([str(out), "--config", config(tmp_path, ledger_url)]) == 0
    said = capsys.readouterr().out
    rows = read_focus(out)
    assert f"{len(rows)} FOCUS rows written" in said
    by_user: dict[str, Decimal] = {}
    for row in rows:
        by_user[str(row["x_User"])] = by_user.get(str(row["x_User"]), Decimal(0)) + Decimal(
            str(row["BilledCost"])
        )
    assert {u: v * 1_000_000 for u, v in by_user.items()} == totals
    # ann's server crossed midnight in Paris: two days, each cut at Paris's midnight
    ann = sorted(
        (r for r in rows if r["x_User"] == "ann"), key=lambda r: str(r["ChargePeriodStart"])
    )
    starts = [str(r["ChargePeriodStart"]) for r in ann]
    assert starts[0].startswith("2026-11-22 23:00:00") or starts[0] == "2026-11-22T23:00:00Z"
    assert {r["x_Profile"] for r in ann} == {"a100x2"}
    assert {r["x_SessionId"] for r in ann} == {"20261123T210000-ann"}
    assert {r["x_Kernel"] or None for r in rows} == {None}  # the hub sees no kernels
    assert {r["x_Profile"] for r in rows if r["x_User"] == "bob"} == {"t4"}
    assert {r["BillingCurrency"] for r in rows} == {"USD"}  # the service's currency
    assert all("p4d.24xlarge" in str(r["x_PriceBasis"]) for r in ann)
    assert json.loads(str(ann[0]["Tags"]))["x_Profile"] == "a100x2"
    # the groups each user was in when each server started, as the Hub listed them
    assert {r["x_Group"] for r in ann} == {"ml"}
    assert {r["x_Group"] for r in rows if r["x_User"] == "bob"} == {"vision", "ml,vision"}
    assert {json.loads(str(r["Tags"]))["x_Group"] for r in rows} == {"ml", "vision", "ml,vision"}
    # the ledger's credentials never leave it
    text = out.read_bytes()
    parsed = sa.engine.make_url(ledger_url)
    secrets = [ledger_url, parsed.password, parsed.username, parsed.host, parsed.database]
    assert not [s for s in secrets if s and str(s).encode() in text]


def test_since_and_until_keep_those_days(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    hub_ledger(url)
    out = tmp_path / "day.csv"
    argv = [str(out), "--config", config(tmp_path, url), "--since", "2026-11-24"]
    assert main([*argv, "--until", "2026-11-24"]) == 0
    assert {str(r["ChargePeriodStart"]) for r in read_focus(out)} == {"2026-11-23T23:00:00Z"}
    with pytest.raises(SystemExit) as wrong:
        main([*argv, "--until", "2026-11-01"])
    assert wrong.value.code == 2
    assert "--until is before --since" in capsys.readouterr().err


def test_an_empty_or_missing_hub_ledger_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "hub.csv"
    missing = f"sqlite:///{tmp_path / 'none.sqlite'}"
    assert main([str(out), "--config", config(tmp_path, missing)]) == 5
    assert "no hub ledger at" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()
    empty = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    HubLedger(empty, tz=PARIS).close()
    assert main([str(out), "--config", config(tmp_path, empty)]) == 5
    assert "no days billed yet" in capsys.readouterr().err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hub.csv")]


def test_a_wrong_out_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    hub_ledger(url)
    before = (tmp_path / "hub.sqlite").read_bytes()
    assert main([str(tmp_path / "hub.json"), "--config", config(tmp_path, url)]) == 4
    assert ".csv or .parquet" in capsys.readouterr().err
    assert (tmp_path / "hub.sqlite").read_bytes() == before


def test_the_command_is_wired(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    hub_ledger(url)
    out = tmp_path / "hub.parquet"
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "jupyter_gpucost.hub", "export-focus", str(out)),
            *("--config", config(tmp_path, url)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert read_focus(out)


def test_the_currency_is_the_services(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a hub priced from a provider whose catalog rows are in yuan bills in yuan
    url = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    hub_ledger(url)
    out = tmp_path / "hub.csv"
    more = "c.GpuCostHub.price_provider = 'autodl'"
    assert main([str(out), "--config", config(tmp_path, url, more)]) == 0
    assert {r["BillingCurrency"] for r in read_focus(out)} == {"CNY"}


def test_a_ledger_from_before_groups_were_kept_exports_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    totals = hub_ledger(url)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE hub_server_groups"))
    engine.dispose()
    out = tmp_path / "hub.csv"
    assert main([str(out), "--config", config(tmp_path, url)]) == 0
    rows = read_focus(out)
    assert {r["x_Group"] for r in rows} == {None}
    assert sum(Decimal(str(r["BilledCost"])) for r in rows) * 1_000_000 == sum(totals.values())
    # the export only reads: the table is not made behind the admin's back
    assert not sa.inspect(sa.create_engine(url)).has_table("hub_server_groups")


def test_a_ledger_that_cannot_be_reached_is_said_without_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://gpucost:s3cret-pw@127.0.0.1:{port}/gpucost"
    out = tmp_path / "hub.csv"
    assert main([str(out), "--config", config(tmp_path, url)]) == 6
    said = capsys.readouterr().err
    assert "cannot be read" in said
    assert "s3cret-pw" not in said
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".csv", ".part"))]
