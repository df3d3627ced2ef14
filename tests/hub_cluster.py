"""A cluster's GPU monitoring for the hub tests that need one: a stand-in dcgm-exporter on
a GPU node, scraped by a real Prometheus as a cluster's would (the exporter's own pod as
the scrape target's labels, ``honor_labels: false``, so its series carry
``exported_pod``/``exported_namespace``), and the service settings that point at it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dcgm_exporter_standin import Exporter, Gpu
from prometheus_server import Prometheus

#: the namespace of the users' pods
NAMESPACE = "jhub"
#: the exporter's own pod, which Prometheus adds to every series it scrapes from it
EXPORTER_POD = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7xkq2"}


@contextmanager
def gpu_cluster(
    gpus: list[Gpu], *, hostname_label: str = "Hostname"
) -> Iterator[tuple[Prometheus, Exporter]]:
    """A node with ``gpus`` and a Prometheus that has scraped each of them once."""
    node = Exporter("gpu-node-1", gpus, hostname_label=hostname_label)
    prometheus = Prometheus(
        [
            {
                "job_name": "dcgm",
                "honor_labels": False,
                "static_configs": [{"targets": [f"127.0.0.1:{node.port}"], "labels": EXPORTER_POD}],
            }
        ]
    )
    try:
        prometheus.wait_for("DCGM_FI_DEV_GPU_UTIL", len(gpus))
        yield prometheus, node
    finally:
        prometheus.stop()
        node.stop()


def service_settings(prometheus: Prometheus) -> str:
    """The gpucost service's config lines that read the cluster's Prometheus every 5 s."""
    return (
        f'c.GpuCostHub.prometheus_url = "{prometheus.url}"\n'
        f'c.GpuCostHub.prometheus_namespace = "{NAMESPACE}"\n'
        "c.GpuCostHub.prometheus_interval_s = 5\n"
        "c.GpuCostHub.prometheus_timeout_s = 2\n"
    )
