"""GPU use per server from a real Prometheus (Debian's, on loopback) scraping stand-ins for
dcgm-exporter on two nodes: one scraped with ``honor_labels: true`` (the series keep
``pod``/``namespace``), one with ``honor_labels: false`` (Prometheus renames them
``exported_pod``/``exported_namespace``, the target's own ``pod`` being the exporter's).

The hub service's core (its ledger on SQLite, the allocation's rates) is wired to that
Prometheus as the service wires it; the Hub's servers are given to it as the Hub's API
lists them. Then: the used/idle split of each server's allocation, the energy, the flag
where a server's own report disagrees, and what happens when Prometheus is down, hangs or
answers garbage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from dcgm_exporter_standin import Exporter, Gpu
from hub_admin_page import admin_page
from prometheus_server import Prometheus as PrometheusProcess

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.hub.accounting import allocated_micro_usd
from jupyter_gpucost.hub.activity import GpuActivity
from jupyter_gpucost.hub.budgets import HubBudgetPolicy
from jupyter_gpucost.hub.cluster.prometheus import Prometheus, PrometheusAuth
from jupyter_gpucost.hub.cluster.settings import ClusterSettings
from jupyter_gpucost.hub.cluster.usage import ClusterUsage
from jupyter_gpucost.hub.enforcer import HubEnforcer
from jupyter_gpucost.hub.ledger import HubLedger
from jupyter_gpucost.hub.ledger.usage import UsageLedger
from jupyter_gpucost.hub.model import GpuAllocation, Rate, ServerInfo
from jupyter_gpucost.hub.profiles.podname import PodNames
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import views

NS = "jhub"
A100 = Rate(GpuAllocation("A100-80GB", 1), Decimal("3.6"), "test price")
T4X2 = Rate(GpuAllocation("T4", 2), Decimal("0.72"), "test price")
RATES = {"a100": A100, "t4x2": T4X2}
#: no minimum charge: each window's cost is exactly its seconds' worth
BILLING = BillingRule(1, 0)
#: KubeSpawner 7's pod names: alice's default server, bob's server "gpu", carol's default
ALICE, BOB, CAROL = "jupyter-alice", "jupyter-bob--gpu", "jupyter-carol"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[PrometheusProcess, Exporter, Exporter]]:
    # node 1: alice's A100 busy at 87 % (GR_ENGINE_ACTIVE 0.87), a GPU no pod holds
    node1 = Exporter(
        "gpu-node-1",
        [
            Gpu(
                0,
                "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
                util_pct=87,
                gr_active=0.87,
                power_w=250.0,
                pod=(NS, ALICE, "notebook"),
            ),
            Gpu(1, "GPU-0c1f3a57-2b5e-4c7e-9a0d-5f1e8e6c9b21", empty_pod_labels=True),
        ],
    )
    # node 2 (a newer exporter, "hostname"): bob's two T4s idle, no DCP metrics
    node2 = Exporter(
        "gpu-node-2",
        [
            Gpu(
                0,
                "GPU-8d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6",
                model="Tesla T4",
                util_pct=0,
                power_w=28.0,
                pod=(NS, BOB, "notebook"),
            ),
            Gpu(
                1,
                "GPU-9e2f3a4b-5c6d-7e8f-90a1-b2c3d4e5f6a7",
                model="Tesla T4",
                util_pct=0,
                power_w=27.0,
                pod=(NS, BOB, "notebook"),
            ),
            Gpu(
                2,
                "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                model="Tesla T4",
                util_pct=99,
                power_w=70.0,
                pod=("other-hub", BOB, "notebook"),
            ),
        ],
        hostname_label="hostname",
    )
    # what a ServiceMonitor's relabelling gives each target: the exporter's own pod
    target = {
        "namespace": "gpu-operator",
        "pod": "nvidia-dcgm-exporter-7xkq2",
        "container": "nvidia-dcgm-exporter",
    }
    prometheus = PrometheusProcess(
        [
            {
                "job_name": "dcgm-honor",
                "honor_labels": True,
                "static_configs": [{"targets": [f"127.0.0.1:{node1.port}"], "labels": target}],
            },
            {
                "job_name": "dcgm-rename",
                "honor_labels": False,
                "static_configs": [{"targets": [f"127.0.0.1:{node2.port}"], "labels": target}],
            },
        ]
    )
    try:
        # a few scrapes of each before the tests query windows over them (bounded)
        prometheus.wait_for("count_over_time(DCGM_FI_DEV_GPU_UTIL[1m]) >= 3", 5)
        yield prometheus, node1, node2
    finally:
        prometheus.stop()
        node1.stop()
        node2.stop()


def test_both_label_shapes_reach_prometheus_as_a_real_scrape_writes_them(
    cluster: tuple[PrometheusProcess, Exporter, Exporter],
) -> None:
    prometheus, _, _ = cluster
    kept = prometheus.query(f'DCGM_FI_DEV_GPU_UTIL{{pod="{ALICE}"}}')
    assert [s["metric"]["namespace"] for s in kept] == [NS]  # type: ignore[index]
    renamed = prometheus.query(f'DCGM_FI_DEV_GPU_UTIL{{exported_pod="{BOB}"}}')
    assert len(renamed) == 3
    for series in renamed:
        labels = series["metric"]
        assert labels["pod"] == "nvidia-dcgm-exporter-7xkq2"  # type: ignore[index]
        assert labels["hostname"] == "gpu-node-2"  # type: ignore[index]


def server(user: str, name: str, profile: str, age_s: float) -> ServerInfo:
    return ServerInfo(user, name, datetime.now(UTC) - timedelta(seconds=age_s), True, profile)


def make_service(tmp_path: Path) -> HubService:
    ledger = HubLedger(f"sqlite:///{tmp_path / 'hub.sqlite'}", billing=BILLING)
    return HubService(ledger, lambda s: RATES[s.profile or ""], HubBudgetPolicy(), HubEnforcer(300))


def settings(url: str, **changes: object) -> ClusterSettings:
    base = ClusterSettings(
        url=url,
        namespace=NS,
        interval_s=10,
        timeout_s=2,
        auth=PrometheusAuth(),
        tolerance_pct=30,
        pods=PodNames(),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def cluster_usage(service: HubService, config: ClusterSettings) -> ClusterUsage:
    ledger = service.ledger
    assert isinstance(ledger, HubLedger)
    client = Prometheus(config.url, timeout_s=config.timeout_s, auth=config.auth)
    usage = ClusterUsage(
        config, client, UsageLedger(ledger.engine), billing=BILLING, tz=UTC, max_gpus=8
    )
    service.cluster = usage
    return usage


def poll(service: HubService, usage: ClusterUsage, *, until: Callable[[], bool]) -> None:
    """Poll as the service does, until ``until`` holds (bounded)."""

    async def run() -> None:
        deadline = time.monotonic() + 30
        while True:
            service.sync(list(service.servers.values()), datetime.now(UTC))
            await usage.poll(service, datetime.now(UTC))
            if until() or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.5)

    asyncio.run(run())


def test_used_and_idle_split_of_servers_that_report_nothing(
    cluster: tuple[PrometheusProcess, Exporter, Exporter], tmp_path: Path
) -> None:
    prometheus, _, _ = cluster
    service = make_service(tmp_path)
    now = datetime.now(UTC)
    service.sync(
        [
            server("alice", "", "a100", 40),
            server("bob", "gpu", "t4x2", 40),
            server("carol", "", "a100", 40),
        ],
        now,
    )
    usage = cluster_usage(service, settings(prometheus.url))
    poll(service, usage, until=lambda: len(service.activity) >= 2)

    alice = service.activity[("alice", "")]["dcgm"]
    # GR_ENGINE_ACTIVE (0..1) preferred to GPU_UTIL, as a percentage
    assert alice.gpu_util_pct == (87.0,)
    assert alice.power_w == pytest.approx(250.0)
    assert alice.energy_j is not None
    assert alice.energy_j > 0
    bob = service.activity[("bob", "gpu")]["dcgm"]
    # exported_pod / exported_namespace; the T4 of the same pod name in another
    # namespace is not his
    assert bob.gpu_util_pct == (0.0, 0.0)
    assert bob.all_idle is True
    assert bob.power_w == pytest.approx(55.0)
    # carol's pod has no GPU series (the pod label is only on GPUs a pod requested)
    assert ("carol", "") not in service.activity

    summary = views.admin_summary(service, datetime.now(UTC), datetime.now(UTC).date())
    gpu_use = summary["gpu_use"]
    assert gpu_use["down_since"] is None
    assert gpu_use["ok_at"]
    figures = {u["user"]: u["gpu_use"] for u in summary["users"]}
    a, b, c = figures["alice"], figures["bob"], figures["carol"]
    for f in (a, b, c):
        whole = f["used_micro_usd"] + f["idle_micro_usd"] + f["unknown_micro_usd"]
        assert whole > 0
    # alice: 87 % of her A100's cost used, the rest idle, to the micro-dollar
    whole = a["used_micro_usd"] + a["idle_micro_usd"]
    assert a["unknown_micro_usd"] == 0
    assert abs(a["used_micro_usd"] - whole * 87 / 100) <= 1
    # bob: both T4s idle the whole time, and the energy they drew while idle
    assert b["used_micro_usd"] == 0
    assert b["unknown_micro_usd"] == 0
    assert b["idle_micro_usd"] > 0
    assert b["idle_energy_wh"] == b["energy_wh"] > 0
    # carol: billed all the same, her use unknown
    assert c["used_micro_usd"] == c["idle_micro_usd"] == 0
    assert c["unknown_micro_usd"] > 0
    # what is split is the allocation: it never exceeds what each is billed
    totals = service.ledger.all_totals(datetime.now(UTC))
    for user, f in figures.items():
        split = f["used_micro_usd"] + f["idle_micro_usd"] + f["unknown_micro_usd"]
        assert split <= totals[user].today_micro_usd
    running = {s["server_name"]: s for u in summary["users"] for s in u["running"]}
    assert running["gpu"]["gpu_use"]["nodes"] == ["gpu-node-2"]
    assert running["gpu"]["gpu_use"]["models"] == ["Tesla T4"]


def test_a_report_that_disagrees_with_dcgm_is_flagged(
    cluster: tuple[PrometheusProcess, Exporter, Exporter], tmp_path: Path
) -> None:
    prometheus, _, _ = cluster
    service = make_service(tmp_path)
    service.sync(
        [server("alice", "", "a100", 30), server("bob", "gpu", "t4x2", 30)], datetime.now(UTC)
    )
    usage = cluster_usage(service, settings(prometheus.url))
    # alice's server says its GPU idled (5 %) while DCGM sees it at 87 %; bob's says what
    # DCGM sees
    now = datetime.now(UTC)
    service.activity[("alice", "")] = {
        "report": GpuActivity("report", at=now, window_s=10, gpu_util_pct=(5.0,))
    }
    service.activity[("bob", "gpu")] = {
        "report": GpuActivity("report", at=now, window_s=10, gpu_util_pct=(1.0, 0.0))
    }

    def flagged() -> bool:
        return any(t.flag is not None for t in usage.tracked.values())

    poll(service, usage, until=flagged)
    summary = views.admin_summary(service, datetime.now(UTC), datetime.now(UTC).date())
    running = {(u["user"], s["server_name"]): s for u in summary["users"] for s in u["running"]}
    flag = running[("alice", "")]["gpu_use"]["flag"]
    assert flag == {"at": flag["at"], "report_pct": 5.0, "dcgm_pct": 87.0}
    assert running[("bob", "gpu")]["gpu_use"]["flag"] is None
    users = {u["user"]: u["gpu_use"] for u in summary["users"]}
    assert users["alice"]["disagreements"] >= 1
    assert users["bob"]["disagreements"] == 0
    page = admin_page(service)
    assert "its report says 5.0 % busy, DCGM 87.0 %" in page
    assert "DCGM: 87 % busy, 250 W" in page
    assert "DCGM: 0 / 0 % busy, 55 W" in page
    assert "GPU use from dcgm-exporter through" in page


def test_one_poll_of_disagreement_is_not_flagged(
    cluster: tuple[PrometheusProcess, Exporter, Exporter], tmp_path: Path
) -> None:
    """A burst that began within the window: the report saw it, DCGM's mean not yet."""
    prometheus, _, _ = cluster
    service = make_service(tmp_path)
    service.sync([server("alice", "", "a100", 30)], datetime.now(UTC))
    usage = cluster_usage(service, settings(prometheus.url))
    key = ("alice", "")

    def report(pct: float) -> None:
        activity = GpuActivity("report", at=datetime.now(UTC), window_s=10, gpu_util_pct=(pct,))
        service.activity.setdefault(key, {})["report"] = activity

    report(5.0)
    poll(service, usage, until=lambda: "dcgm" in service.activity.get(key, {}))
    (tracked,) = usage.tracked.values()
    assert tracked.streak == 1
    report(87.0)
    asyncio.run(usage.poll(service, datetime.now(UTC)))
    assert tracked.streak == 0
    assert tracked.flag is None
    summary = views.admin_summary(service, datetime.now(UTC), datetime.now(UTC).date())
    assert summary["users"][0]["gpu_use"]["disagreements"] == 0


def test_a_restarted_service_goes_on_where_it_left_the_split(
    cluster: tuple[PrometheusProcess, Exporter, Exporter], tmp_path: Path
) -> None:
    prometheus, _, _ = cluster
    first = make_service(tmp_path)
    first.sync([server("alice", "", "a100", 20)], datetime.now(UTC))
    usage = cluster_usage(first, settings(prometheus.url))
    poll(first, usage, until=lambda: bool(first.activity))
    (row,) = first.rows.values()
    before = usage.ledger.by_server([row.server_id])[row.server_id]
    until = usage.tracked[row.server_id].until
    first.close(datetime.now(UTC))

    second = make_service(tmp_path)
    second.sync(list(first.servers.values()), datetime.now(UTC))
    again = cluster_usage(second, settings(prometheus.url))

    def moved_on() -> bool:
        tracked = again.tracked.get(row.server_id)
        return tracked is not None and (tracked.until - until).total_seconds() > 2

    poll(second, again, until=moved_on)
    after = again.ledger.by_server([row.server_id])[row.server_id]
    # the second process split only what came after the first one's last poll, exactly
    later = again.tracked[row.server_id].until
    added = (after.used_micro_usd + after.idle_micro_usd + after.unknown_micro_usd) - (
        before.used_micro_usd + before.idle_micro_usd + before.unknown_micro_usd
    )
    expected = allocated_micro_usd(A100, BILLING, row.started, later) - allocated_micro_usd(
        A100, BILLING, row.started, until
    )
    assert added == expected > 0
    assert after.unknown_micro_usd == before.unknown_micro_usd == 0


def test_prometheus_down_bills_the_allocation_and_says_since_when(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    # the poll's times are the test's, not the machine's speed: a busy machine changes nothing
    started_at = datetime.now(UTC)
    service.sync([server("alice", "", "a100", 30)], started_at)
    # a port nothing listens on
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    usage = cluster_usage(service, settings(f"http://127.0.0.1:{closed}", max_window_s=5))
    service.activity[("alice", "")] = {}
    started = time.monotonic()
    asyncio.run(usage.poll(service, started_at))
    assert time.monotonic() - started < 5
    assert usage.status.down_since is not None
    assert f"127.0.0.1:{closed} is unreachable" in (usage.status.error or "")
    summary = views.admin_summary(service, datetime.now(UTC), datetime.now(UTC).date())
    assert summary["gpu_use"]["down_since"] == usage.status.down_since.isoformat()
    assert "Prometheus unreachable since" in admin_page(service)
    assert "起无法连接 Prometheus" in admin_page(service, "zh_CN")
    # the bill is the allocation, as always
    (row,) = service.rows.values()
    billed = service.ledger.all_totals(datetime.now(UTC))["alice"].today_micro_usd
    assert billed >= 30 * 1000
    # past the longest window a later answer could cover, the time is unknown for good
    later = started_at + timedelta(seconds=20)
    asyncio.run(usage.poll(service, later))
    figures = usage.ledger.by_server([row.server_id])[row.server_id]
    assert figures.used_micro_usd == figures.idle_micro_usd == 0
    assert figures.unknown_micro_usd == pytest.approx(45 * 1000, abs=1_500)
    assert usage.status.down_since < later


class Answers:
    """A loopback HTTP server that answers each request with the bytes of ``reply``
    (after ``delay_s``), or never answers when ``hang``."""

    def __init__(self, reply: bytes = b"", *, hang: bool = False) -> None:
        self.reply = reply
        self.hang = hang
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.open.append(conn)
            if not self.hang:
                self._read_request(conn)
                conn.sendall(self.reply)
                conn.shutdown(socket.SHUT_WR)
                conn.close()

    @staticmethod
    def _read_request(conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            body += chunk

    def close(self) -> None:
        self.sock.close()
        for conn in self.open:
            conn.close()


def http(body: bytes, status: str = "200 OK") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\nConnection: close\r\n\r\n" + body


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (http(b"<html>502 Bad Gateway</html>", "502 Bad Gateway"), "not JSON"),
        (
            http(
                b'{"status":"error","errorType":"bad_data","error":"parse error"}',
                "400 Bad Request",
            ),
            "Prometheus says bad_data: parse error",
        ),
        (
            http(b'{"status":"success","data":{"resultType":"matrix","result":[]}}'),
            "not an instant vector",
        ),
        (
            http(
                b'{"status":"success","data":{"resultType":"vector","result":['
                + b",".join([b'{"metric":{"pod":"p"},"value":[1,"1"]}'] * 20_001)
                + b"]}}"
            ),
            "more than 20000",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n" + b"x" * 1000,
            "answered more than 16777216 bytes",
        ),
    ],
    ids=["html", "error", "matrix", "too-many-series", "too-large"],
)
def test_garbage_answers_are_refused_with_a_reason(reply: bytes, said: str, tmp_path: Path) -> None:
    server_ = Answers(reply)
    try:
        service = make_service(tmp_path)
        service.sync([server("alice", "", "a100", 30)], datetime.now(UTC))
        usage = cluster_usage(service, settings(f"http://127.0.0.1:{server_.port}"))
        asyncio.run(usage.poll(service, datetime.now(UTC)))
        assert usage.status.down_since is not None
        assert said in (usage.status.error or "")
        assert "dcgm" not in service.activity.get(("alice", ""), {})
    finally:
        server_.close()


def test_a_prometheus_that_never_answers_does_not_stall_the_poll(tmp_path: Path) -> None:
    hanging = Answers(hang=True)
    try:
        service = make_service(tmp_path)
        service.sync([server("alice", "", "a100", 30)], datetime.now(UTC))
        usage = cluster_usage(service, settings(f"http://127.0.0.1:{hanging.port}", timeout_s=1))

        async def run() -> float:
            # the event loop keeps turning while the query waits
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.05)

            ticker = asyncio.create_task(tick())
            started = time.monotonic()
            await usage.poll(service, datetime.now(UTC))
            ticker.cancel()
            assert ticks >= 10
            return time.monotonic() - started

        took = asyncio.run(run())
        assert took < 3
        assert "no answer in 1 s" in (usage.status.error or "") or "unreachable" in (
            usage.status.error or ""
        )
    finally:
        hanging.close()


def bcrypt(password: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))


def test_basic_auth_to_a_prometheus_that_requires_it(tmp_path: Path) -> None:
    password = "pr0m-" + "s3cret"
    prometheus = PrometheusProcess([], basic_auth=("gpucost", password, bcrypt(password)))
    try:
        (tmp_path / "password").write_text(password + "\n")
        (tmp_path / "wrong").write_text("not-it\n")
        for file, ok in (("password", True), ("wrong", False)):
            (tmp_path / f"db-{file}").mkdir()
            service = make_service(tmp_path / f"db-{file}")
            service.sync([server("alice", "", "a100", 30)], datetime.now(UTC))
            auth = PrometheusAuth(username="gpucost", password_file=str(tmp_path / file))
            usage = cluster_usage(service, settings(prometheus.url, auth=auth))
            asyncio.run(usage.poll(service, datetime.now(UTC)))
            if ok:
                assert usage.status.down_since is None, usage.status.error
                assert usage.status.ok_at is not None
            else:
                assert "refused the service's credentials (401)" in (usage.status.error or "")
            assert password not in (usage.status.error or "")
    finally:
        prometheus.stop()


def test_a_bearer_token_is_read_again_at_each_query(tmp_path: Path) -> None:
    """Kubernetes rotates projected tokens: the file is read at each query."""
    seen: list[str] = []
    empty = b'{"status":"success","data":{"resultType":"vector","result":[]}}'

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            seen.append(self.headers.get("Authorization", ""))
            ok = self.headers.get("Authorization") == f"Bearer {token.read_text().strip()}"
            body = empty if ok else b'{"status":"error","errorType":"unauthorized","error":"no"}'
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    token = tmp_path / "token"
    token.write_text("first-token\n")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        service = make_service(tmp_path)
        service.sync([server("alice", "", "a100", 30)], datetime.now(UTC))
        auth = PrometheusAuth(bearer_token_file=str(token))
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        usage = cluster_usage(service, settings(url, auth=auth))
        asyncio.run(usage.poll(service, datetime.now(UTC)))
        assert usage.status.down_since is None, usage.status.error
        token.write_text("second-token\n")
        asyncio.run(usage.poll(service, datetime.now(UTC)))
        assert usage.status.down_since is None, usage.status.error
        assert set(seen) == {"Bearer first-token", "Bearer second-token"}
    finally:
        httpd.shutdown()
        httpd.server_close()
