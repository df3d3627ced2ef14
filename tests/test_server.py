"""The status API on a real Jupyter server (pytest-jupyter), as the status bar and curl see it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpucost.core.catalog import load_catalog
from jupyter_gpucost.server.routes import route_table
from jupyter_gpucost.server.web import GpuCostHandler

pytestmark = pytest.mark.usefixtures("jp_serverapp")


async def get_status(jp_fetch: Any) -> dict[str, Any]:
    response = await jp_fetch("gpucost", "api", "status")
    assert response.code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    return json.loads(response.body)


async def test_status_reports_a_rising_simulated_session_cost(jp_fetch: Any) -> None:
    first = await get_status(jp_fetch)
    assert first["telemetry"]["source"] == "simulated"
    assert first["telemetry"]["simulated"] is True
    assert first["telemetry"]["available"] is True
    assert [g["model"] for g in first["gpus"]] == ["A100-80GB", "A100-80GB"]
    assert [g["price_usd_per_hour"] for g in first["gpus"]] == [3.431, 3.431]
    assert first["rate_usd_per_hour"] == 6.862
    assert first["prices"] == {
        "provider": "aws",
        "market": "on-demand",
        "instance": None,
        "as_of": "2026-01-21",
        "catalog_date": "2026-11-29",
        "overridden_models": [],
    }
    assert first["billing"] == {"granularity_s": 1, "minimum_charge_s": 60}
    # the 60 s minimum charge is billed from the start: 2 x 3.431 $/h x 60 s
    assert first["cost_usd"] == pytest.approx(0.114367, abs=1e-6)
    await asyncio.sleep(1.5)
    later = await get_status(jp_fetch)
    assert later["elapsed_s"] > first["elapsed_s"] + 1
    assert later["cost_usd"] >= first["cost_usd"]
    assert later["session_started"] == first["session_started"]
    assert later["samples"] > first["samples"]
    for status in (first, later):
        parts = (
            status["used_cost_usd"]
            + status["idle_cost_usd"]
            + status["unobserved_cost_usd"]
            + status["billing_adjustment_usd"]
        )
        assert parts == pytest.approx(status["gpu_cost_usd"], abs=1e-9)
        assert status["cost_usd"] == pytest.approx(
            status["gpu_cost_usd"] + status["base_cost_usd"], abs=1e-9
        )


async def test_status_has_every_documented_field(jp_fetch: Any) -> None:
    status = await get_status(jp_fetch)
    for key in (
        "cost_usd",
        "rate_usd_per_hour",
        "session_started",
        "elapsed_s",
        "idle_cost_usd",
        "base_price_usd_per_hour",
        "gpus",
        "telemetry",
        "prices",
        "warnings",
        "currency",
        "currency_symbol",
    ):
        assert key in status, key
    gpu = status["gpus"][0]
    for key in (
        "index",
        "name",
        "model",
        "price_usd_per_hour",
        "price_provider",
        "price_market",
        "price_region",
        "utilization_pct",
        "memory_used_bytes",
        "memory_total_bytes",
        "power_w",
    ):
        assert key in gpu, key
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["memory_total_bytes"] == 85_899_345_920
    assert 0 <= gpu["utilization_pct"] <= 100
    assert gpu["power_w"] > 0
    assert status["session_started"].endswith("+00:00")


#: a value for each route parameter, so that every route can be called
ROUTE_SAMPLES = {
    "([^/]+)": "0123456789ab",
    "([A-Za-z0-9_-]{1,64})": "probe-0123",
    "([0-9a-f]{6})": "a1b2c3",
}


def extension_routes(app: Any) -> list[tuple[str, type]]:
    """Every route on the server whose handler belongs to this extension."""
    found = []

    def walk(rules: Any) -> None:
        for rule in rules:
            target = rule.target
            if hasattr(target, "rules"):
                walk(target.rules)
            elif isinstance(target, type) and issubclass(target, GpuCostHandler):
                found.append((rule.matcher.regex.pattern, target))

    walk(app.default_router.rules)
    walk(app.wildcard_router.rules)
    return found


async def test_every_route_refuses_requests_without_credentials(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str
) -> None:
    routes = extension_routes(jp_serverapp.web_app)
    assert routes, "the extension registered no route"
    for pattern, handler in routes:
        path = pattern.rstrip("$")
        for group, sample in ROUTE_SAMPLES.items():
            path = path.replace(group, sample)
        assert "(" not in path, f"route {pattern} needs a sample path in this test"
        methods = [
            m for m in ("GET", "POST", "PUT", "PATCH", "DELETE") if m.lower() in vars(handler)
        ]
        assert methods, handler
        for method in methods:
            with pytest.raises(HTTPClientError) as e:
                await http_server_client.fetch(
                    path, method=method, body=b"{}" if method in ("POST", "PUT", "PATCH") else None
                )
            assert e.value.code == 403, (method, path)


async def test_a_wrong_token_is_refused(http_server_client: Any, jp_base_url: str) -> None:
    with pytest.raises(HTTPClientError) as e:
        await http_server_client.fetch(
            jp_base_url + "gpucost/api/status", headers={"Authorization": "token not-the-token"}
        )
    assert e.value.code == 403


class TestNoTelemetry:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {"telemetry": "none", "base_price_usd_per_hour": 0.5}

    async def test_base_price_only_and_a_reason(self, jp_fetch: Any) -> None:
        status = await get_status(jp_fetch)
        assert status["gpus"] == []
        assert status["telemetry"]["available"] is False
        assert "turned off" in status["telemetry"]["reason"]
        assert status["rate_usd_per_hour"] == 0.5
        assert status["base_cost_usd"] == pytest.approx(0.008333, abs=1e-6)  # 60 s minimum
        assert status["cost_usd"] == status["base_cost_usd"]


class TestAutoWithoutNvidiaDriver:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {"telemetry": "auto"}

    async def test_falls_back_to_no_telemetry_and_says_why(self, jp_fetch: Any) -> None:
        status = await get_status(jp_fetch)
        assert status["telemetry"]["source"] == "none"
        assert status["telemetry"]["available"] is False
        assert status["telemetry"]["reason"].startswith("no NVIDIA GPU telemetry: ")
        assert status["gpus"] == []


class TestExplicitNvmlWithoutDriver:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {"telemetry": "nvml"}

    async def test_is_shown_as_unavailable_with_the_reason(self, jp_fetch: Any) -> None:
        status = await get_status(jp_fetch)
        assert status["telemetry"]["available"] is False
        assert status["telemetry"]["reason"]


class TestPriceOverride:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        return {
            "telemetry": "simulated",
            "price_overrides": {"A100-80GB": "2.10"},
            "minimum_charge_s": 0,
        }

    async def test_override_is_in_force_and_shown(self, jp_fetch: Any) -> None:
        status = await get_status(jp_fetch)
        assert [g["price_usd_per_hour"] for g in status["gpus"]] == [2.1, 2.1]
        assert status["rate_usd_per_hour"] == 4.2
        assert status["prices"]["overridden_models"] == ["A100-80GB"]
        assert "admin override" in status["gpus"][0]["price_source"]
        assert status["billing"]["minimum_charge_s"] == 0


class TestUnpricedGpu:
    @pytest.fixture
    def gpucost_config(self) -> dict[str, object]:
        # the catalog has no AWS spot price for an A100-80GB (a spot instance's price is
        # read from its zone): its on-demand price bounds it
        return {
            "telemetry": "simulated",
            "price_provider": "aws",
            "price_market": "spot",
            "price_region": "us-east-1",
        }

    async def test_unpriced_is_an_upper_bound_never_zero(self, jp_fetch: Any) -> None:
        status = await get_status(jp_fetch)
        # AWS's on-demand A100-80GB price, the most a spot one can cost, labelled
        row = load_catalog().find(
            provider="aws", market="on-demand", model="A100-80GB", region="us-east-1"
        )
        assert row is not None
        dearest = row.per_gpu_hour
        assert [g["priced"] for g in status["gpus"]] == [True, True]
        assert [g["price_usd_per_hour"] for g in status["gpus"]] == [float(dearest)] * 2
        assert [g["price_basis"] for g in status["gpus"]] == ["upper-bound"] * 2
        codes = [w["code"] for w in status["warnings"]]
        assert codes == ["price-upper-bound", "price-upper-bound"]
        assert "spot: priced at on-demand, the most it can cost" in status["warnings"][0]["message"]
        assert "price_overrides" in status["warnings"][0]["message"]
        assert status["rate_usd_per_hour"] == float(2 * dearest)


async def test_the_server_serves_exactly_the_assembled_route_table(jp_serverapp: Any) -> None:
    """The credentials test above covers the route table as it is assembled: every route of
    ``route_table()`` is registered, and nothing else of the extension is."""
    served = sorted(
        (pattern, handler) for pattern, handler in extension_routes(jp_serverapp.web_app)
    )
    base = jp_serverapp.base_url.rstrip("/")
    assert served == sorted((f"{base}{p}$", h) for p, h in route_table())


async def test_the_cells_route_names_its_currency(jp_fetch: Any) -> None:
    """The badges write the currency as the UI's language does (¥ for yuan in Chinese):
    they need its code, not only the English symbol."""
    response = await jp_fetch("gpucost", "api", "cells", params={"limit": "1"})
    body = json.loads(response.body)
    status = await get_status(jp_fetch)
    assert body["currency"] == status["currency"] == "USD"
    assert body["currency_symbol"] == status["currency_symbol"] == "$"


async def test_the_cells_route_gives_each_amount_its_currency_neutral_name(
    jp_fetch: Any, jp_serverapp: Any
) -> None:
    """Each listed cell's ``cost`` and ``rate_per_hour`` beside the ``_usd`` names the record
    keeps, with the same values (docs/api.md, "Money keys"): this server's cells and an
    earlier session's, read from the ledger, alike; the record as kept is not changed."""
    record = {
        "cell_id": "now",
        "started": "2026-11-29T08:00:00+00:00",
        "ended": "2026-11-29T08:00:02+00:00",
        "wall_s": 2.0,
        "cost_usd": 0.003812,
        "rate_usd_per_hour": 6.862,
    }
    posted = await jp_fetch("gpucost", "api", "cells", method="POST", body=json.dumps(record))
    assert "cost" not in json.loads(posted.body)  # the record as kept: its saved names
    service = jp_serverapp.web_app.settings["gpucost_service"]
    earlier = {**record, "cell_id": "before", "cost_usd": 0.5, "rate_usd_per_hour": None}
    await asyncio.to_thread(service.ledger.add_cell, "an-earlier-session", earlier)
    response = await jp_fetch("gpucost", "api", "cells", params={"limit": "5"})
    cells = {c["cell_id"]: c for c in json.loads(response.body)["cells"]}
    assert set(cells) == {"now", "before"}
    assert cells["now"]["cost"] == cells["now"]["cost_usd"] == 0.003812
    assert cells["now"]["rate_per_hour"] == cells["now"]["rate_usd_per_hour"] == 6.862
    assert cells["before"]["cost"] == cells["before"]["cost_usd"] == 0.5
    assert cells["before"]["rate_per_hour"] is cells["before"]["rate_usd_per_hour"] is None
    # what the server keeps (memory, the ledger) keeps the record's own names
    assert "cost" not in service.cells.in_memory(1)[0]
    assert all("cost" not in c for c in service.ledger.recent_cells(5))
