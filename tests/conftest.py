"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension enabled."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytest_jupyter.jupyter_server",)

from postgres import ledger_url, postgres, postgres_url  # noqa: E402, F401 - fixtures
from s3_server import s3_endpoint  # noqa: E402, F401 - a session fixture


@pytest.fixture
def gpucost_config() -> dict[str, object]:
    """The GpuCost traits for the server under test; tests override this fixture."""
    return {"telemetry": "simulated", "sample_interval_s": 0.2}


@pytest.fixture
def jp_server_config(gpucost_config: dict[str, object]) -> dict[str, object]:
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_gpucost": True}},
        "GpuCost": gpucost_config,
    }
