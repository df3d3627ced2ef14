"""The panel tells the user about the ledger: a damaged ledger moved aside, named with what
it held, in a banner a person reads."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_gpucost.server.ledger import Ledger, Pending, minute_of

from .conftest import screenshot
from .test_panel import PANEL, open_panel

pytestmark = pytest.mark.browser


def damaged_ledger(folder: Path) -> Path:
    """A ledger with one earlier session, its pages then overwritten (its header intact)."""
    path = folder / "ledger.sqlite"
    ledger = Ledger(f"sqlite:///{path}")
    now = datetime.now(UTC)
    ledger.start_session("earlier", now, None)
    p = Pending(cost_micro=370_000, last_unix_s=now.timestamp())
    p.spend[minute_of(now.timestamp())] = [370_000, 0, 1]
    ledger.flush("earlier", p)
    ledger.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    for at in range(4096, len(data), 4096):
        data[at : at + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    return path


def test_a_damaged_ledger_is_named_in_the_panel(
    lab_factory: Any, page: Any, tmp_path: Path
) -> None:
    path = damaged_ledger(tmp_path)
    lab = lab_factory("--GpuCost.telemetry=simulated", f"--GpuCost.ledger_url=sqlite:///{path}")
    page.goto(f"{lab.url}/lab?token={lab.token}", timeout=60_000)
    panel = open_panel(page)
    banner = panel.locator(".jp-gpucost-panel-banner[data-state='ledger-reset']")
    expect(banner).to_be_visible(timeout=30_000)
    expect(banner).to_contain_text("The ledger was damaged and was moved to")
    expect(banner).to_contain_text(f"{path.name}.broken-")
    screenshot(page, "panel-ledger-reset.png")
    assert page.locator(PANEL).is_visible()
