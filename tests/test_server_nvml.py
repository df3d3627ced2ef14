"""The NVML path end to end: a stubbed driver -> sampler -> meter -> the status API."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from nvml_stub import DRIVER_550, FakeNvml, a100_80gb, h100_80gb, tesla_k80

from jupyter_gpucost.core.catalog import load_catalog


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    nvml = FakeNvml([a100_80gb(), h100_80gb(), tesla_k80()], DRIVER_550)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    return nvml


@pytest.fixture
def gpucost_config(fake_nvml: FakeNvml) -> dict[str, object]:
    return {
        "telemetry": "nvml",
        "sample_interval_s": 0.1,
        "minimum_charge_s": 0,
        "price_region": "us-east-1",
    }


async def status(jp_fetch: Any) -> dict[str, Any]:
    return json.loads((await jp_fetch("gpucost", "api", "status")).body)


async def test_nvml_readings_priced_and_served(jp_fetch: Any, fake_nvml: FakeNvml) -> None:
    first = await status(jp_fetch)
    assert first["telemetry"]["source"] == "nvml"
    assert first["telemetry"]["simulated"] is False
    assert first["telemetry"]["available"] is True
    assert first["telemetry"]["detail"]["driver_version"] == "550.54.15"
    a100, h100, k80 = first["gpus"]
    assert (a100["model"], a100["price_usd_per_hour"]) == ("A100-80GB", 3.431)
    assert (h100["model"], h100["price_usd_per_hour"]) == ("H100-80GB", 6.88)
    assert a100["utilization_pct"] == 97.0
    assert a100["power_w"] == 391.2
    # an old board: no price in the catalog, no energy counter; said, not hidden: it is
    # priced at the dearest GPU of the catalog, an upper bound, labelled
    assert k80["name"] == "Tesla K80"
    assert k80["price_basis"] == "upper-bound"
    dearest = max(r.per_gpu_hour for r in load_catalog().rows if r.currency == "USD")
    assert k80["price_usd_per_hour"] == float(dearest)
    assert k80["unavailable"]["energy_j"] == "not supported"
    assert [w["code"] for w in first["warnings"]] == ["price-upper-bound"]
    assert first["rate_usd_per_hour"] == pytest.approx(3.431 + 6.88 + float(dearest))

    # the H100 falls off the bus: still rented, still billed, shown as lost
    fake_nvml.gpus[1].lost = True
    await asyncio.sleep(1.5)  # billing is per second: cross a second
    later = await status(jp_fetch)
    h100_later = later["gpus"][1]
    assert h100_later["lost"] is True
    assert h100_later["utilization_pct"] is None
    assert h100_later["cost_usd"] > h100["cost_usd"]
    assert later["unobserved_cost_usd"] > 0
    assert "gpu-lost" in [w["code"] for w in later["warnings"]]
    assert later["cost_usd"] > first["cost_usd"]
