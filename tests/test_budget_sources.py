"""The spawner's budget (``GPUCOST_BUDGET_*`` in the environment) is a floor the user's own
config and command line cannot lift: with both, the stricter is in force, and the budget
says which source set it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpucost.server.budget.policy import Budget
from jupyter_gpucost.server.budget.sources import (
    CONFIG_LABEL,
    SPAWNER_LABEL,
    Setting,
    resolve,
)

ROOT = Path(__file__).resolve().parents[1]


async def budget(jp_fetch: Any) -> dict[str, Any]:
    return dict(json.loads((await jp_fetch("gpucost", "api", "budget")).body))


def test_the_lower_amount_in_the_spawners_scope_is_in_force() -> None:
    def hard(env: int | None, trait: int, trait_scope: str = "session") -> Budget | None:
        return resolve(
            Setting(env, trait),
            Setting("session" if env else None, trait_scope),  # type: ignore[arg-type]
            Setting(None, 120.0),
            Setting(None, "shutdown"),
        ).hard

    assert hard(2_500_000, 10**12) == Budget("hard", 2_500_000, "session", SPAWNER_LABEL)
    assert hard(2_500_000, 0) == Budget("hard", 2_500_000, "session", SPAWNER_LABEL)
    assert hard(2_500_000, 1_000_000) == Budget("hard", 1_000_000, "session", CONFIG_LABEL)
    # a lower amount in another scope is not stricter: the spawner's budget holds
    assert hard(2_500_000, 1_000_000, "month") == Budget(
        "hard", 2_500_000, "session", SPAWNER_LABEL
    )
    assert hard(None, 1_000_000, "day") == Budget("hard", 1_000_000, "day", CONFIG_LABEL)
    assert hard(None, 0) is None


def test_grace_and_action_cannot_be_weakened() -> None:
    def settings(grace: float, action: str) -> tuple[float, str, int]:
        r = resolve(
            Setting(None, 0),
            Setting(None, "session"),
            Setting(30.0, grace),
            Setting("shutdown", action),
        )
        return r.grace_s, r.action, len(r.overruled)

    assert settings(86_400.0, "interrupt") == (30.0, "shutdown", 2)
    assert settings(5.0, "stop-server") == (5.0, "stop-server", 0)


class TestConfigAboveTheSpawner:
    """The user's config asks for a million dollars, a day of grace and interrupts only."""

    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
        monkeypatch.setenv("GPUCOST_BUDGET_USD", "2.5")
        monkeypatch.setenv("GPUCOST_BUDGET_GRACE_S", "30")
        monkeypatch.setenv("GPUCOST_BUDGET_ACTION", "shutdown")
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "budget_state_path": str(tmp_path / "budget.json"),
            "hard_budget_usd": 1000000.0,
            "budget_grace_s": 86400.0,
            "budget_action": "interrupt",
        }

    async def test_the_spawners_budget_grace_and_action_hold(self, jp_fetch: Any) -> None:
        body = await budget(jp_fetch)
        assert body["hard"]["amount_usd"] == 2.5
        assert body["hard"]["locked"] is True
        assert body["hard"]["source"] == SPAWNER_LABEL
        assert body["grace_s"] == 30
        assert body["action"] == "shutdown"


class TestConfigBelowTheSpawner:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
        monkeypatch.setenv("GPUCOST_BUDGET_USD", "2.5")
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "budget_state_path": str(tmp_path / "budget.json"),
            "hard_budget_usd": 1.0,
        }

    async def test_the_lower_config_amount_is_in_force_and_named(self, jp_fetch: Any) -> None:
        body = await budget(jp_fetch)
        assert body["hard"]["amount_usd"] == 1.0
        assert body["hard"]["source"] == CONFIG_LABEL
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["budget"]["hard"]["source"] == CONFIG_LABEL


class TestConfigAlone:
    @pytest.fixture
    def gpucost_config(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
        monkeypatch.delenv("GPUCOST_BUDGET_USD", raising=False)
        return {
            "telemetry": "simulated",
            "sample_interval_s": 0.2,
            "budget_state_path": str(tmp_path / "budget.json"),
            "hard_budget_usd": 4.0,
        }

    async def test_outside_a_hub_the_config_sets_it(self, jp_fetch: Any) -> None:
        body = await budget(jp_fetch)
        assert body["hard"]["amount_usd"] == 4.0
        assert body["hard"]["source"] == CONFIG_LABEL


def test_a_users_config_file_and_command_line_cannot_lift_the_spawners_budget(
    tmp_path: Path,
) -> None:
    """The attack as a hub user would try it: their own jupyter_server_config.py and
    their own command line, against the spawner's GPUCOST_BUDGET_USD=2.5."""
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.py").write_text(
        "c.GpuCost.hard_budget_usd = 1000000.0\nc.GpuCost.budget_grace_s = 86400\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "GPUCOST_BUDGET_USD": "2.5",
        "GPUCOST_BUDGET_GRACE_S": "60",
    }
    server = subprocess.Popen(
        [
            sys.executable, "-m", "jupyter_server",
            "--ServerApp.jpserver_extensions={'jupyter_gpucost': True}",
            "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0",
            "--ServerApp.open_browser=False", "--allow-root",
            f"--ServerApp.root_dir={tmp_path}",
            "--GpuCost.telemetry=none",
            # no metadata service is ever asked, whatever machine runs the tests
            "--GpuCost.detect_machine=False",
            "--GpuCost.hard_budget_usd=999999",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        log = []
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line:
                break
            log.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+/)\S*\?token=(\w+)", line)
            if found:
                url = found.group(1), found.group(2)
        assert url is not None, "".join(log)
        text = "".join(log)
        assert "hard session budget $2.50 (set by the spawner (GPUCOST_BUDGET_USD))" in text
        assert "is not stricter than the spawner's GPUCOST_BUDGET_USD" in text
        request = urllib.request.Request(
            f"{url[0]}gpucost/api/budget", headers={"Authorization": f"token {url[1]}"}
        )
        assert server.poll() is None, "".join(log) + (server.stderr.read() or "")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        body = None
        while body is None:
            try:
                with opener.open(request, timeout=10) as response:
                    body = json.loads(response.read())
            except OSError:
                # the URL is logged as the server starts to listen
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert body["hard"]["amount_usd"] == 2.5
        assert body["hard"]["source"] == SPAWNER_LABEL
        assert body["grace_s"] == 60
    finally:
        server.terminate()
        server.wait(30)
