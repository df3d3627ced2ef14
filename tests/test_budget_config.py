"""Invalid budget settings, from the command line or the spawner's environment, stop the
server at start-up with a message naming the setting: an admin's budget must never be
silently unenforced."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pytest
from test_config import start_server


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ["--GpuCost.hard_budget_usd=-3"],
            {},
            "c.GpuCost.hard_budget_usd = -3.0 must be more than 0",
        ),
        (
            ["--GpuCost.budget_action=explode"],
            {},
            "c.GpuCost.budget_action = 'explode' is not valid: use one of interrupt, "
            "shutdown, stop-server, stop-instance, terminate-instance.",
        ),
        (
            ["--GpuCost.hard_budget_scope=week"],
            {},
            "c.GpuCost.hard_budget_scope = 'week' must be one of session, day, month",
        ),
        (
            ["--GpuCost.budget_grace_s=-1"],
            {},
            "c.GpuCost.budget_grace_s = -1.0 is not valid: use a number from 0 to 86400",
        ),
        (
            [
                "--GpuCost.hard_budget_usd=5",
                "--GpuCost.hard_budget_scope=day",
                "--GpuCost.ledger_url=none",
            ],
            {},
            "c.GpuCost.hard_budget_scope = 'day' needs the ledger",
        ),
        (
            [],
            {"GPUCOST_BUDGET_USD": "lots"},
            "GPUCOST_BUDGET_USD='lots' is not valid (c.GpuCost.hard_budget_usd = 'lots' is "
            "not valid: use an amount in the session's currency (0 for none).)",
        ),
        (
            [],
            {"GPUCOST_BUDGET_USD": "5", "GPUCOST_BUDGET_ACTION": "nuke"},
            "GPUCOST_BUDGET_ACTION='nuke' is not valid (c.GpuCost.budget_action = 'nuke' is "
            "not valid: use one of interrupt, shutdown, stop-server, stop-instance, terminate-instance.",
        ),
        (
            ["--GpuCost.ledger_url=none"],
            {"GPUCOST_BUDGET_USD": "5", "GPUCOST_BUDGET_SCOPE": "Month"},
            "c.GpuCost.hard_budget_scope = 'month' needs the ledger",
        ),
    ],
)
def test_invalid_budget_setting_stops_the_server(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    with mock.patch.dict(os.environ, env):
        result = start_server(tmp_path, *args, "--GpuCost.telemetry=none")
    assert result.returncode != 0
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
