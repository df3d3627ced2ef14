"""What the tests of one provider each (``test_cloud_*.py``) share beside their stand-in
(:mod:`cloud_standins`): a loopback address nothing answers, the connections a test's code
opened, a block run in another language, and the whole server's test catalog and settings
for a budget that stops the machine."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpucost.core import i18n

_PRICE = """
[[price]]
provider = "{provider}"
model = "H100-80GB"
usd_per_gpu_hour = "{usd}"
market = "on-demand"
"""

_INSTANCE = """
[[instance]]
provider = "{provider}"
instance = "{instance}"
gpu_model = "{gpu_model}"
gpus = 1
usd_per_hour = "{usd}"
market = "on-demand"
region = "{region}"
source = "test catalog"
as_of = "2026-11-27"
confidence = "unverified"
"""


def closed_url() -> str:
    """A loopback URL nothing listens on (a port bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The addresses every socket connects to from now on, in order (each connection
    still goes through)."""
    seen: list[object] = []
    real = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        seen.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


@contextmanager
def in_language(language: str) -> Iterator[None]:
    """The server's messages in ``language`` for the block, then in English again."""
    i18n.set_language(language)
    try:
        yield
    finally:
        i18n.set_language("en")


def write_catalog(
    tmp_path: Path,
    provider: str,
    usd_per_gpu_hour: str,
    *,
    instance: str = "",
    gpu_model: str = "",
    usd_per_hour: str = "",
    region: str = "",
) -> str:
    """A test catalog in ``tmp_path``: the H100's on-demand price at ``provider`` beside
    AWS's, and, where ``instance`` is named, that one-GPU instance type's whole price."""
    text = _PRICE.format(provider="aws", usd="6.88") + _PRICE.format(
        provider=provider, usd=usd_per_gpu_hour
    )
    if instance:
        text += _INSTANCE.format(
            provider=provider,
            instance=instance,
            gpu_model=gpu_model,
            usd=usd_per_hour,
            region=region,
        )
    path = tmp_path / "prices.toml"
    path.write_text(text)
    return str(path)


def stop_instance_config(
    tmp_path: Path, catalog: str, hard_budget_usd: float, **machine: object
) -> dict[str, object]:
    """The whole server's settings: the simulated H100 priced from ``catalog``, a hard
    budget of ``hard_budget_usd`` whose action is ``stop-instance`` (no grace, no ledger),
    and the ``machine``'s own settings (how it is detected, where its cloud answers)."""
    return {
        "telemetry": "simulated",
        "simulated_trace": "h100-live",
        "sample_interval_s": 0.2,
        "minimum_charge_s": 0,
        "price_catalog_path": catalog,
        "hard_budget_usd": hard_budget_usd,
        "budget_grace_s": 0,
        "budget_save_timeout_s": 1,
        "budget_action": "stop-instance",
        "budget_state_path": str(tmp_path / "budget.json"),
        "ledger_url": "none",
        **machine,
    }
