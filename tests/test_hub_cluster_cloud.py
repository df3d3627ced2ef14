"""The cluster as the hub's second signal of its cloud: a real Prometheus (Debian's, on
loopback) scraping a stand-in for kube-state-metrics that serves its documented node
metrics (``kube_node_info`` with ``provider_id``; ``kube_node_labels`` with
``label_topology_kubernetes_io_region``, exported where the admin allow-lists the label),
read by ``check-profiles`` through the hub's Prometheus client.

The providerIDs are the node controllers' shapes: ``gce://<project>/<zone>/<instance>``,
``aws:///<zone>/<instance-id>``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_server import Prometheus as PrometheusProcess
from prometheus_server import free_port
from test_hub_cloud import LEAP, config
from test_hub_profiles import row, run_check

GKE_NODE = "gke-leap-nb-gpu-t4-3c1e6b2a-x7k2"
GKE = (
    "# HELP kube_node_info [STABLE] Information about a cluster node.\n"
    "# TYPE kube_node_info gauge\n"
    f'kube_node_info{{node="{GKE_NODE}",kernel_version="6.1.100+",'
    'os_image="Container-Optimized OS from Google",'
    'container_runtime_version="containerd://1.7.22",kubelet_version="v1.30.5-gke.1014001",'
    'kubeproxy_version="deprecated",'
    f'provider_id="gce://leap-pangeo/us-central1-b/{GKE_NODE}",pod_cidr="10.4.3.0/24",'
    'system_uuid="6b1e4c52-9a3e-5f0e-8c7d-2e1f3a4b5c6d",internal_ip="10.128.0.45"} 1\n'
    "# HELP kube_node_labels [STABLE] Kubernetes labels converted to Prometheus labels.\n"
    "# TYPE kube_node_labels gauge\n"
    f'kube_node_labels{{node="{GKE_NODE}",label_topology_kubernetes_io_region="us-central1"}} 1\n'
)
EKS_NODE = "ip-192-168-12-34.us-west-2.compute.internal"
EKS = (
    "# HELP kube_node_info [STABLE] Information about a cluster node.\n"
    "# TYPE kube_node_info gauge\n"
    f'kube_node_info{{node="{EKS_NODE}",kernel_version="5.10.225-213.878.amzn2.x86_64",'
    'os_image="Amazon Linux 2",container_runtime_version="containerd://1.7.22",'
    'kubelet_version="v1.30.4-eks-a737599",kubeproxy_version="deprecated",'
    'provider_id="aws:///us-west-2a/i-0a1b2c3d4e5f67890",pod_cidr="",'
    'system_uuid="ec2f1c3e-7d6b-4b8a-9e0f-1a2b3c4d5e6f",internal_ip="192.168.12.34"} 1\n'
)


class KubeStateMetrics:
    """Serves the metric text the test sets, as kube-state-metrics' /metrics does."""

    def __init__(self) -> None:
        self.text = ""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                body = owner.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[PrometheusProcess, KubeStateMetrics]]:
    ksm = KubeStateMetrics()
    prometheus = PrometheusProcess(
        [
            {
                "job_name": "kube-state-metrics",
                "static_configs": [{"targets": [f"127.0.0.1:{ksm.port}"]}],
            }
        ]
    )
    try:
        yield prometheus, ksm
    finally:
        prometheus.stop()
        ksm.stop()


def serving(cluster: tuple[PrometheusProcess, KubeStateMetrics], text: str, nodes: set[str]) -> str:
    """Serve ``text`` and wait (bounded) until Prometheus's latest scrape has exactly these
    nodes; the service's config pointing at that Prometheus."""
    prometheus, ksm = cluster
    ksm.text = text
    deadline = time.monotonic() + 30
    while {str(s["metric"]["node"]) for s in prometheus.query("kube_node_info")} != nodes:  # type: ignore[index]
        assert time.monotonic() < deadline, f"Prometheus did not scrape {nodes}"
        time.sleep(0.3)
    return f"c.GpuCostHub.prometheus_url = {prometheus.url!r}\n"


def test_a_gke_cluster_agrees_with_leaps_profiles_and_gives_the_region(
    cluster: tuple[PrometheusProcess, KubeStateMetrics], tmp_path: Path
) -> None:
    extra = serving(cluster, GKE, {GKE_NODE})
    code, out, err = run_check(tmp_path, config(LEAP, extra))
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("prices of gcp: "))
    assert "detected from the profiles" in line
    assert f"the cluster agrees (node {GKE_NODE}: providerID gce://leap-pangeo/" in line
    assert f"region us-central1 (node {GKE_NODE}: topology.kubernetes.io/region)" in line
    gpu = row(out, "gpu", "image=pytorch")
    assert gpu[3] == "$0.729998/h"
    # the cluster's region selects the rows: us-central1's own, not a labelled bound
    assert "gcp on-demand us-central1 (nvidia-tesla-t4)" in gpu[4]
    assert "upper bound" not in gpu[4]
    assert "region not known" not in gpu[4]


def test_an_eks_cluster_under_leaps_gke_profiles_is_refused_by_name(
    cluster: tuple[PrometheusProcess, KubeStateMetrics], tmp_path: Path
) -> None:
    extra = serving(cluster, EKS, {EKS_NODE})
    code, _out, err = run_check(tmp_path, config(LEAP, extra))
    assert code == 2
    assert "prices of gcp (detected from the profiles" in err
    assert f"but the cluster's nodes run on aws (node {EKS_NODE}: providerID aws:///" in err
    assert "nothing is priced at another cloud's rates" in err


def test_the_cluster_decides_where_the_profiles_name_no_cloud(
    cluster: tuple[PrometheusProcess, KubeStateMetrics], tmp_path: Path
) -> None:
    values = tmp_path / "plain.yaml"
    values.write_text(
        "singleuser:\n  profileList:\n    - display_name: T4\n      slug: t4\n"
        "      kubespawner_override:\n"
        "        node_selector: {nvidia.com/gpu.product: Tesla-T4}\n"
        "        extra_resource_limits: {nvidia.com/gpu: 1}\n"
    )
    extra = serving(cluster, GKE, {GKE_NODE})
    code, out, err = run_check(tmp_path, config(values, extra))
    assert code == 0, err
    assert f"prices of gcp: detected from the cluster: node {GKE_NODE}: providerID gce://" in out
    t4 = row(out, "t4", "-")
    assert t4[2:4] == ["1 × T4", "$0.35/h"]  # GCP's T4 in us-central1, not AWS's g4dn


def test_nodes_of_two_clouds_are_refused_by_name(
    cluster: tuple[PrometheusProcess, KubeStateMetrics], tmp_path: Path
) -> None:
    eks_info = EKS.split("\n")[2]
    extra = serving(cluster, GKE + eks_info + "\n", {GKE_NODE, EKS_NODE})
    code, _out, err = run_check(tmp_path, config(LEAP, extra))
    assert code == 2
    assert "the cluster's nodes run on several clouds: aws (node " in err
    assert f"gcp (node {GKE_NODE}" in err


def test_a_prometheus_that_does_not_answer_is_said_not_refused(tmp_path: Path) -> None:
    down = f"c.GpuCostHub.prometheus_url = 'http://127.0.0.1:{free_port()}'\n"
    down += "c.GpuCostHub.prometheus_timeout_s = 1\n"
    code, out, err = run_check(tmp_path, config(LEAP, down))
    assert code == 0, err
    assert "prices of gcp: detected from the profiles" in out
    assert "the cluster's nodes not read: " in out
