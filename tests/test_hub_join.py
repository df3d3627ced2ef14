"""The hub service's two sources of GPU activity, joined end to end: a real JupyterHub, a
real Prometheus scraping a stand-in for dcgm-exporter, the servers' own reports, and an
idle policy of seconds.

* hana's server reports her simulated GPUs 100 % busy while DCGM sees her pod's GPUs idle:
  the admin summary and page flag the disagreement (her policy: never reclaimed);
* alice's and bob's servers report nothing (the extension off): DCGM sees alice's GPUs
  idle, and the service warns, then stops her server through the Hub API; it sees bob's
  busy, and spares him;
* gina's server reports a kernel busy (a long cell) while DCGM sees her GPUs idle: the
  admin page marks her "kept by a busy kernel", until her policy's ``busy_idle_max_min``
  has passed; then she is treated as idle, and warned.

The fixture's servers are not pods: their pod names are KubeSpawner 7's for the same user
and server (``jupyter-<user>``), as in ``test_hub_service_prometheus.py``.
"""

from __future__ import annotations

import asyncio
import csv
import io
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from dcgm_exporter_standin import Exporter, Gpu
from hub_cluster import NAMESPACE, gpu_cluster, service_settings
from hub_service_fixture import NO_EXTENSION, Hub, running_hub, spawn
from prometheus_server import Prometheus
from test_hub_idle import server_url, start_long_cell, write_trace

#: idle 6 s, warned; stopped 30 s later; gina's reported busy kernel spares DCGM-idle GPUs 12 s
GINA_CAP_MIN = 0.2
POLICY = (
    "def idle_policy(server):\n"
    "    if server.user == 'hana':\n"
    "        return None\n"
    "    rule = {'after_min': 0.1, 'warn_min': 0.5}\n"
    "    if server.user == 'gina':\n"
    f"        rule.update(busy_idle_max_min={GINA_CAP_MIN})\n"
    "    return rule\n"
    "c.GpuCostHub.idle_policy = idle_policy\n"
)
USERS = ("alice", "bob", "hana", "gina")


def gpus(user: str, first: int, util_pct: int) -> list[Gpu]:
    """The 2 A100s of ``user``'s pod, as the kubelet maps them."""
    return [
        Gpu(
            first + i,
            f"GPU-{user}-{i}",
            util_pct=util_pct,
            gr_active=util_pct / 100,
            power_w=300.0 if util_pct else 60.0,
            pod=(NAMESPACE, f"jupyter-{user}", "notebook"),
        )
        for i in (0, 1)
    ]


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Prometheus, Exporter]]:
    # gina's GPUs are busy until her cell runs (so that nothing is idle before it)
    node_gpus = gpus("alice", 0, 0) + gpus("bob", 2, 93) + gpus("hana", 4, 0) + gpus("gina", 6, 80)
    with gpu_cluster(node_gpus, hostname_label="hostname") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory, cluster: tuple[Prometheus, Exporter]
) -> Iterator[Hub]:
    prometheus, _ = cluster
    root = tmp_path_factory.mktemp("hubjoin")
    busy = write_trace(root / "busy.jsonl", busy_s=900)
    idle = write_trace(root / "idle.jsonl", busy_s=0)
    extra = service_settings(prometheus) + POLICY
    with running_hub(
        root,
        budgets={},
        users=USERS,
        groups={},
        group_budgets={},
        user_configs={
            "alice": NO_EXTENSION,
            "bob": NO_EXTENSION,
            "hana": f"c.GpuCost.simulated_trace = {busy!r}\n",
            "gina": f"c.GpuCost.simulated_trace = {idle!r}\n",
        },
        service_extra=extra,
        # the driver reads the proxy's routes to reach gina's server (no proxy process)
        hub_extra='c.JupyterHub.load_roles[0]["scopes"].append("proxy")\n',
    ) as hub:
        yield hub


def summary(hub: Hub) -> dict[str, Any]:
    code, body = hub.svc("GET", "api/admin/summary", hub.tokens["prometheus"])
    assert code == 200, body
    assert isinstance(body, dict)
    return body


def server(hub: Hub, user: str) -> dict[str, Any] | None:
    """``user``'s running server in the admin summary, or None (also while the summary does
    not list ``user`` yet: the service lists a user from its first poll after the spawn)."""
    entries = [u for u in summary(hub)["users"] if u["user"] == user]
    assert len(entries) <= 1, entries
    return entries[0]["running"][0] if entries and entries[0]["running"] else None


def page(hub: Hub) -> str:
    code, text = hub.svc("GET", "admin", hub.tokens["prometheus"])
    assert code == 200, text
    assert isinstance(text, str)
    return text


def row_of(text: str, user: str) -> str:
    """The admin page's table row of ``user``."""
    start = text.index(f'data-user="{user}"')
    return text[start : text.index("</tr>", start)]


def test_reports_and_dcgm_joined(hub: Hub, cluster: tuple[Prometheus, Exporter]) -> None:
    _, node = cluster
    for user in ("gina", "bob", "alice", "hana"):
        code, body = spawn(hub, user)
        assert code in (201, 202), body
    # gina's kernel runs a long cell (her GPUs stay busy by DCGM until part c)
    asyncio.run(start_long_cell(server_url(hub, "gina"), hub.token_for("gina"), 600))

    # b. alice reports nothing; DCGM sees her GPUs idle: warned, then stopped by the service
    def alice_warned() -> bool:
        idle = (server(hub, "alice") or {}).get("idle") or {}
        return idle.get("stop_at") is not None

    hub.wait("alice's silent server to be warned (DCGM idle)", alice_warned, 60)
    alice = server(hub, "alice")
    assert alice is not None
    assert alice["idle"]["gpu_source"] == "dcgm"
    assert alice["idle"]["kernel_busy"] is False

    # a. hana's report (100 % busy) and DCGM (idle) disagree: flagged on the summary and page
    def flagged() -> bool:
        use = (server(hub, "hana") or {}).get("gpu_use") or {}
        return use.get("flag") is not None

    hub.wait("hana's report and DCGM to be flagged", flagged, 60)
    hana = server(hub, "hana")
    assert hana is not None
    assert hana["gpu_use"]["flag"]["report_pct"] == pytest.approx(100, abs=1)
    assert hana["gpu_use"]["flag"]["dcgm_pct"] == 0
    assert hana["idle"]["policy"] is None
    assert "its report says 100" in row_of(page(hub), "hana")

    hub.wait("alice's server to be stopped", lambda: hub.server("alice") is None, 60)
    assert "stopping alice: its GPUs are idle" in hub.log.read_text()
    # her entries went with her server
    hub.wait("alice gone from the summary", lambda: server(hub, "alice") is None, 10)

    # ... bob reports nothing either, but DCGM sees his GPUs busy: spared
    bob = server(hub, "bob")
    assert bob is not None
    assert bob["idle"]["state"] == "busy"
    assert bob["idle"]["gpu_source"] == "dcgm"
    assert bob["idle"]["stop_at"] is None
    assert hub.server("bob") is not None
    assert bob["gpu_use"]["flag"] is None  # nothing to disagree with

    # c. gina's kernel is busy while DCGM sees her GPUs idle: kept, and the page says so
    for gpu in gpus("gina", 6, 0):
        node.set(gpu.uuid, util_pct=0, gr_active=0.0, power_w=60.0)

    def gina_kept() -> bool:
        idle = (server(hub, "gina") or {}).get("idle") or {}
        return bool(idle.get("spared_by_kernel"))

    hub.wait("gina to be kept by her busy kernel", gina_kept, 60)
    gina = server(hub, "gina")
    assert gina is not None
    assert gina["idle"]["kernel_busy"] is True
    assert gina["idle"]["stop_at"] is None
    assert "kept by a busy kernel" in row_of(page(hub), "gina")
    kept_since = time.monotonic()

    # ... until DCGM has seen her GPUs idle busy_idle_max_min: then she is idle, and warned
    def gina_warned() -> bool:
        idle = (server(hub, "gina") or {}).get("idle") or {}
        return idle.get("stop_at") is not None

    hub.wait("gina to be warned after busy_idle_max_min", gina_warned, 90)
    # not before the bound (the kept phase began at most a poll before it was seen)
    assert time.monotonic() - kept_since >= GINA_CAP_MIN * 60 - 6
    gina = server(hub, "gina")
    assert gina is not None
    assert gina["idle"]["state"] == "idle"
    assert not gina["idle"]["spared_by_kernel"]
    assert gina["idle"]["dcgm_idle_min"] >= GINA_CAP_MIN
    assert "idle: stops" in row_of(page(hub), "gina")
    # bob is still spared; hana was never reclaimed
    assert (server(hub, "bob") or {}).get("idle", {}).get("stop_at") is None
    assert hub.server("hana") is not None

    # the CSV and /metrics say what the admin page says: alice's month (her server is gone,
    # so her figures no longer move), split by DCGM; the idle GPU-hours and her reclaim
    def figures() -> tuple[dict[str, Any], dict[str, str], dict[str, float]]:
        body = summary(hub)
        code, text = hub.svc("GET", "api/admin/users.csv", hub.tokens["prometheus"])
        assert code == 200, text
        rows = {r["user"]: r for r in csv.DictReader(io.StringIO(text))}
        code, metrics = hub.svc("GET", "metrics", hub.tokens["prometheus"])
        assert code == 200, metrics
        check = subprocess.run(
            [promtool(), "check", "metrics"], input=metrics.encode(), capture_output=True
        )
        assert check.returncode == 0, check.stdout + check.stderr
        samples = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line and not line.startswith("#")
        }
        return body, rows["alice"], samples

    body, row, samples = figures()
    (mine,) = [u for u in body["users"] if u["user"] == "alice"]
    use = mine["gpu_use"]
    assert use["idle_micro_usd"] > 0
    assert use["used_micro_usd"] == 0  # DCGM saw her GPUs idle throughout
    for kind in ("used", "idle", "unknown"):
        usd = use[f"{kind}_micro_usd"] / 1_000_000
        assert row[f"gpu_{kind}_usd"] == f"{usd:.6f}"
        assert samples[f'gpucost_hub_user_month_gpu_usd{{user="alice",use="{kind}"}}'] == (
            pytest.approx(usd, abs=1e-6)
        )
    assert row["gpu_energy_wh"] == f"{use['energy_wh']:.3f}"
    assert samples["gpucost_hub_prometheus_up"] == 1
    assert samples["gpucost_hub_reclaimed_servers"] == body["idle"]["reclaimed"] >= 1
    # alice's 2 GPUs idle at least her policy's minutes before her warning
    assert samples["gpucost_hub_idle_gpu_seconds"] >= 2 * 0.1 * 60
    assert samples["gpucost_hub_reclaim_saved_usd"] > 0


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        raise RuntimeError("promtool is not installed: run `make prometheus`")
    return found
