"""The hub service, started by a real JupyterHub, reading GPU use from a real Prometheus
that scrapes a stand-in for dcgm-exporter: alice's server reports nothing (the extension
is off in her own config) and her GPU's use reaches the admin's summary and page, split
into used, idle and unknown; then Prometheus stops, and the service goes on billing her
allocation and says since when Prometheus is unreachable — no error page, no stalled poll.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from dcgm_exporter_standin import Exporter, Gpu
from hub_cluster import NAMESPACE, gpu_cluster, service_settings
from hub_service_fixture import Hub, running_hub, spawn
from prometheus_server import Prometheus


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Prometheus, Exporter]]:
    # KubeSpawner 7's pod name for alice's default server: jupyter-alice
    alice = Gpu(
        0,
        "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
        util_pct=87,
        gr_active=0.87,
        power_w=250.0,
        pod=(NAMESPACE, "jupyter-alice", "notebook"),
    )
    with gpu_cluster([alice]) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory, cluster: tuple[Prometheus, Exporter]
) -> Iterator[Hub]:
    prometheus, _ = cluster
    root = tmp_path_factory.mktemp("hubprom")
    extra = service_settings(prometheus)
    with running_hub(
        root, budgets={}, service_extra=extra, users=("alice",), groups={}, group_budgets={}
    ) as hub:
        yield hub


def summary(hub: Hub) -> dict[str, Any]:
    code, body = hub.svc("GET", "api/admin/summary", hub.tokens["prometheus"])
    assert code == 200, body
    assert isinstance(body, dict)
    return body


def alice(body: dict[str, Any]) -> dict[str, Any]:
    found = [u for u in body["users"] if u["user"] == "alice"]
    return found[0] if found else {"running": [], "gpu_use": {}, "today_usd": 0}


def test_gpu_use_of_a_silent_server_then_prometheus_down(
    hub: Hub, cluster: tuple[Prometheus, Exporter]
) -> None:
    prometheus, _ = cluster
    code, body = spawn(hub, "alice")
    assert code in (201, 202), body

    def seen() -> bool:
        body = summary(hub)
        running = alice(body)["running"]
        return bool(running) and bool((running[0].get("gpu_use") or {}).get("seen"))

    hub.wait("DCGM's view of alice's GPU in the summary", seen, 40)
    body = summary(hub)
    server = alice(body)["running"][0]
    assert server["gpu_use"]["gpu_util_pct"] == [87.0]
    assert server["gpu_use"]["nodes"] == ["gpu-node-1"]
    assert body["gpu_use"]["down_since"] is None
    # her allocation is 2 A100s; DCGM sees one of them, 87 % busy: 43.5 % used, 6.5 %
    # idle, the unseen GPU's half unknown
    hub.wait(
        "a split of alice's allocation",
        lambda: alice(summary(hub))["gpu_use"].get("used_micro_usd"),
        20,
    )
    use = alice(summary(hub))["gpu_use"]
    whole = use["used_micro_usd"] + use["idle_micro_usd"] + use["unknown_micro_usd"]
    assert whole > 0
    # of the GPU DCGM sees, 87 % was used; the other GPU's half is unknown (each poll's
    # split rounds once, to at most a micro-dollar, and a few polls ran)
    observed = use["used_micro_usd"] + use["idle_micro_usd"]
    assert abs(use["used_micro_usd"] - observed * 0.87) <= 4
    assert abs(use["unknown_micro_usd"] - observed) <= 4
    code, page = hub.svc("GET", "admin", hub.tokens["prometheus"])
    assert code == 200
    assert "DCGM: 87 % busy, 250 W" in page

    # Prometheus goes away: the bill goes on, the summary and the page say so
    before = alice(summary(hub))["today_usd"]
    prometheus.stop()

    def down() -> bool:
        return summary(hub)["gpu_use"]["down_since"] is not None

    hub.wait("the service to see Prometheus down", down, 30)
    started = time.monotonic()
    body = summary(hub)
    assert time.monotonic() - started < 2
    assert "unreachable" in body["gpu_use"]["error"]
    assert not alice(body)["running"][0]["gpu_use"]["seen"]
    assert alice(body)["today_usd"] > before
    code, page = hub.svc("GET", "admin", hub.tokens["prometheus"])
    assert code == 200
    assert "Prometheus unreachable since" in page
    # the Hub's poll and the bill are not held up by the cluster's Prometheus
    later = alice(summary(hub))["today_usd"]
    hub.wait("alice's bill to go on", lambda: alice(summary(hub))["today_usd"] > later, 10)
