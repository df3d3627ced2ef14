"""A stand-in for NVIDIA's dcgm-exporter on loopback (no GPU, no Kubernetes here): the
metrics a real one serves at ``/metrics``, in its exact text.

Copied from dcgm-exporter's own sources, not invented:

* the names, types and HELP lines of ``etc/default-counters.csv`` and
  ``etc/dcp-metrics-included.csv`` (``DCGM_FI_DEV_GPU_UTIL``, gauge, "GPU utilization (in
  %)."; ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, gauge, "Ratio of time the graphics engine is
  active."; ``DCGM_FI_DEV_POWER_USAGE``, gauge, "Power draw (in W)."; and
  ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, counter, "Total energy consumption since boot
  (in mJ).");
* each line as ``internal/pkg/rendermetrics/render_metrics.go`` writes it:
  ``gpu, UUID, pci_bus_id, device, modelName``, then ``Hostname`` (``hostname`` since the
  exporter's 2026 releases), then the extra labels (``DCGM_FI_DRIVER_VERSION``) and the pod
  attributes (``container, namespace, pod``), each group in sorted order, values as the
  exporter formats them (whole numbers for integer fields, ``%f`` for floats);
* ``internal/pkg/transformation/kubernetes.go``: ``pod``/``namespace``/``container`` are
  added only to GPUs the kubelet's pod-resources API maps to a container requesting
  ``nvidia.com/gpu``; a GPU no pod holds has none of them (older exporters wrote them
  empty, as in the README's sample: ``container="",namespace="",pod=""``).

The test sets what each GPU does; the energy counter grows with the GPU's power.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": (
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
}


@dataclass
class Gpu:
    index: int
    uuid: str
    model: str = "NVIDIA A100-SXM4-80GB"
    util_pct: int = 0
    #: None: a GPU without DCP (profiling) metrics, e.g. a T4 without the DCP module
    gr_active: float | None = None
    power_w: float = 60.0
    #: (namespace, pod, container) the kubelet maps this GPU to, or None
    pod: tuple[str, str, str] | None = None
    #: write empty pod labels for an unassigned GPU (older exporters)
    empty_pod_labels: bool = False
    energy_mj: float = 5_000_000_000.0


class Exporter:
    """``/metrics`` on 127.0.0.1 (a free port), for one node's GPUs."""

    def __init__(self, node: str, gpus: list[Gpu], *, hostname_label: str = "Hostname") -> None:
        self.node = node
        self.gpus = gpus
        self.hostname_label = hostname_label
        self.lock = threading.Lock()
        self._last = time.monotonic()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, uuid: str, **values: object) -> None:
        with self.lock:
            for gpu in self.gpus:
                if gpu.uuid == uuid:
                    for name, value in values.items():
                        setattr(gpu, name, value)

    def _labels(self, gpu: Gpu) -> str:
        labels = (
            f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="00000000:{0x10 + gpu.index:02X}:00.0",'
            f'device="nvidia{gpu.index}",modelName="{gpu.model}",'
            f'{self.hostname_label}="{self.node}",DCGM_FI_DRIVER_VERSION="550.54.15"'
        )
        if gpu.pod is not None:
            namespace, pod, container = gpu.pod
            labels += f',container="{container}",namespace="{namespace}",pod="{pod}"'
        elif gpu.empty_pod_labels:
            labels += ',container="",namespace="",pod=""'
        return labels

    def render(self) -> str:
        with self.lock:
            now = time.monotonic()
            for gpu in self.gpus:
                gpu.energy_mj += gpu.power_w * (now - self._last) * 1000
            self._last = now
            blocks = []
            for name, (kind, help_text) in HELP.items():
                lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
                for gpu in self.gpus:
                    if name == "DCGM_FI_DEV_GPU_UTIL":
                        value = str(gpu.util_pct)
                    elif name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
                        if gpu.gr_active is None:
                            continue
                        value = f"{gpu.gr_active:f}"
                    elif name == "DCGM_FI_DEV_POWER_USAGE":
                        value = f"{gpu.power_w:f}"
                    else:
                        value = str(int(gpu.energy_mj))
                    lines.append(f"{name}{{{self._labels(gpu)}}} {value}")
                blocks.append("\n".join(lines) + "\n")
            return "\n".join(blocks)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
