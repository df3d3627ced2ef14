"""The service configuration docs/jupyterhub.md shows is one the service accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jupyter_gpucost.hub.app import GpuCostHub
from jupyter_gpucost.hub.model import ServerInfo

DOC = Path(__file__).parent.parent / "docs" / "jupyterhub.md"


def documented_service_config() -> str:
    text = DOC.read_text()
    section = text.split("### `gpucost_hub_config.py`", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/jupyterhub.md has no gpucost_hub_config.py example"
    return match.group(1)


def test_the_documented_service_config_starts_and_prices_its_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gpucost_hub_config.py").write_text(documented_service_config())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "a-token")
    app = GpuCostHub()
    app.initialize([])
    parts = app.validate()
    try:
        from datetime import UTC, datetime

        started = datetime(2026, 11, 24, 9, tzinfo=UTC)
        a100 = parts.service.rate_for(ServerInfo("ann", "", started, True, profile="a100"))
        # the documented override: 2 A100-80GB at $3.20 each
        assert a100.allocation.count == 2
        assert a100.usd_per_hour == 2 * a100.usd_per_gpu_hour
        assert str(a100.usd_per_gpu_hour) == "3.20"
        other = parts.service.rate_for(ServerInfo("ann", "", started, True, profile="x"))
        assert other.allocation.model == "T4"
    finally:
        parts.service.ledger.close()
