"""The panel puts the bill beside the estimate once `jupyter gpucost reconcile` has read
this machine's bill, and prices the machine at its billed rate, named as such."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cloud_standins import Cloud, StandIn, serve, write_dmi
from focus_bills import StandIn as BilledMachine
from focus_bills import hourly_rows, write_csv
from playwright.sync_api import expect

from jupyter_gpucost.core.machine import Machine
from jupyter_gpucost.reconcile.cli import main as reconcile
from jupyter_gpucost.server.ledger import Ledger

from .conftest import screenshot
from .test_panel import open_panel

pytestmark = pytest.mark.browser


@pytest.fixture
def imds() -> Iterator[StandIn]:
    yield from serve(Cloud())


def reconciled(folder: Path) -> str:
    """A ledger with an earlier session on this machine and its bill reconciled."""
    url = f"sqlite:///{folder / 'ledger.sqlite'}"
    ledger = Ledger(url)
    start = datetime(2026, 11, 24, 10, tzinfo=UTC)
    spend = [(int(start.timestamp()) + 60 * m, 917_333, 0, 0) for m in range(60)]
    ledger.add_run("earlier", start, start + timedelta(hours=1), None, spend, [])
    machine = Machine("aws", instance_type="p5.48xlarge", instance_id="i-0123456789abcdef0")
    ledger.record_machine("earlier", machine, "USD")
    ledger.close()
    # the EC2 stand-in's machine, billed at 0.72 × list
    p5 = BilledMachine(
        "AWS", "i-0123456789abcdef0", "p5.48xlarge", "us-east-1", Decimal("55.04"), Decimal("0.72")
    )
    day = datetime(2026, 11, 24, tzinfo=UTC)
    write_csv(folder / "bill" / "focus.csv", hourly_rows(p5, day, 24))
    assert reconcile([str(folder / "bill"), "--ledger", url]) == 0
    return url


def test_the_panel_shows_the_bill_beside_the_estimate(
    lab_factory: Any, page: Any, tmp_path: Path, imds: StandIn
) -> None:
    url = reconciled(tmp_path)
    lab = lab_factory(
        "--GpuCost.telemetry=simulated",
        f"--GpuCost.ledger_url={url}",
        f"--GpuCost.dmi_path={write_dmi(tmp_path / 'dmi', 'aws')}",
        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url},
    )
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    panel = open_panel(page)
    bill = panel.locator(".jp-gpucost-panel-bill")
    expect(bill).to_be_visible(timeout=30_000)
    # an hour at 55.04/h estimated; 24 hours at 0.72 × 55.04 billed, to 2026-11-24
    expect(bill).to_have_text("estimated $55.04 · billed $951.09 (your bill to 2026-11-24)")
    screenshot(page, "panel-bill.png")
    # this machine is now priced at its billed rate (c.GpuCost.use_billed_rate), and says so
    expect(panel).to_contain_text(
        "p5.48xlarge: $39.63 per instance-hour — your billed rate, us-east-1, 2026-11-24",
        timeout=30_000,
    )
