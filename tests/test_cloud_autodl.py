"""AutoDL: the container known from the variables AutoDL sets (``AutoDLContainerUUID``,
``AutoDLRegion``) or from ``c.GpuCost.machine_provider``; ``stop-instance`` runs
``shutdown`` in the container, which powers the instance off. No test runs a real
``shutdown``: the command is a setting, and here a script that records that it ran."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cloud_server import connections, in_language, stop_instance_config, write_catalog
from test_budget_api import budget, wait_for

from jupyter_gpucost.cloud.detect import DetectSettings, Endpoints, identify
from jupyter_gpucost.cloud.stop import StopSettings, stop_instance
from jupyter_gpucost.core.machine import STILL_AUTODL, Machine

UUID = "7c1a9e21-3b2f-4a44-9d0e-5f6a7b8c9d0e"
ENVIRON = {"AutoDLContainerUUID": UUID, "AutoDLRegion": "west-B"}


def recorder(tmp_path: Path, exit_code: int = 0, output: str = "") -> tuple[list[str], Path]:
    """A stand-in for ``shutdown``: it writes its arguments to a file, prints, exits."""
    marker = tmp_path / "shutdown-ran"
    script = tmp_path / "fake_shutdown.py"
    script.write_text(
        "import sys, pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text(' '.join(sys.argv[1:]) or 'ran')\n"
        f"print({output!r}, file=sys.stderr)\n"
        f"sys.exit({exit_code})\n"
    )
    return [sys.executable, str(script)], marker


def autodl() -> Machine:
    return Machine("autodl", region="west-B", instance_id=UUID, source="environment")


def test_the_container_is_known_from_its_variables_without_a_packet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = connections(monkeypatch)
    assert identify(DetectSettings(dmi_path=str(tmp_path)), ENVIRON) == autodl()
    # no variable: the admin names it
    named = identify(DetectSettings(dmi_path=str(tmp_path), provider="autodl"), {})
    assert named == Machine("autodl", source="setting")
    assert named.stoppable
    assert seen == []


def test_stop_instance_runs_shutdown_in_the_container(tmp_path: Path) -> None:
    command, marker = recorder(tmp_path)
    result = stop_instance(
        autodl(), StopSettings(autodl_shutdown_command=(*command, "now")), Endpoints(), {}
    )
    assert result.ok, result.message
    assert result.via == "autodl"
    assert marker.read_text() == "now"
    assert result.message == f"AutoDL is powering the instance off ({' '.join(command)} now)"
    assert result.still_bills == STILL_AUTODL


def test_the_default_is_the_shutdown_command_autodl_documents() -> None:
    assert StopSettings().autodl_shutdown_command == ("shutdown",)


def test_a_shutdown_that_is_refused_says_to_run_it_as_root(tmp_path: Path) -> None:
    command, _ = recorder(tmp_path, 1, "Failed to talk to init daemon: must be root")
    result = stop_instance(
        autodl(), StopSettings(autodl_shutdown_command=tuple(command)), Endpoints(), {}
    )
    assert not result.ok
    assert "exited with 1 (Failed to talk to init daemon: must be root)" in result.message
    assert "shutdown must run as root" in result.message
    missing = stop_instance(
        autodl(),
        StopSettings(autodl_shutdown_command=(str(tmp_path / "no-such-shutdown"),)),
        Endpoints(),
        {},
    )
    assert not missing.ok
    assert "could not run" in missing.message
    with in_language("zh_CN"):
        chinese = stop_instance(
            autodl(), StopSettings(autodl_shutdown_command=tuple(command)), Endpoints(), {}
        )
    assert "root" in chinese.message
    assert "退出" in chinese.message


# -- the whole server ---------------------------------------------------------------------


class TestASpentBudgetPowersTheContainerOff:
    @pytest.fixture
    def marker(self, tmp_path: Path) -> tuple[list[str], Path]:
        return recorder(tmp_path)

    @pytest.fixture
    def gpucost_config(
        self, tmp_path: Path, marker: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
    ) -> dict[str, object]:
        for name, value in ENVIRON.items():
            monkeypatch.setenv(name, value)
        # AutoDL prices per GPU (no instance types), in dollars here
        catalog = write_catalog(tmp_path, "autodl", "2.50")
        return stop_instance_config(
            tmp_path,
            catalog,
            0.002,
            dmi_path=str(tmp_path / "no-dmi"),
            autodl_shutdown_command=marker[0],
        )

    async def test_shutdown_runs_and_the_record_says_what_may_still_bill(
        self, jp_fetch: Any, marker: tuple[list[str], Path]
    ) -> None:
        status = json.loads((await jp_fetch("gpucost", "api", "status")).body)
        assert status["machine"]["provider"] == "autodl"
        assert status["machine"]["stoppable"] is True
        assert status["prices"]["provider"] == "autodl"
        assert status["gpus"][0]["price_usd_per_hour"] == 2.5

        async def acted() -> bool:
            return (await budget(jp_fetch))["state"] == "acted"

        await wait_for(acted, 60, "the stop-instance action")
        assert marker[1].read_text() == "ran"
        last = (await budget(jp_fetch))["last_action"]
        assert last["result"] == "done"
        assert last["via"] == "autodl"
        assert "machine stopping (AutoDL is powering the instance off" in last["message"]
        assert last["message"].endswith(
            "storage it keeps (file storage, an expanded data disk) may still bill"
        )
