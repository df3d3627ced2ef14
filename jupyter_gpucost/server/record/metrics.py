"""Prometheus metrics, updated by the sampler after every sample (never on a scrape).

They are registered in prometheus_client's default registry, which jupyter_server serves
at ``/metrics`` (authenticated unless ``c.ServerApp.authenticate_prometheus = False``).
Names follow dcgm-exporter's and OpenCost's vocabulary where they overlap; every series
carries ``user`` (``JUPYTERHUB_USER``, empty outside JupyterHub) so that one Prometheus
can sum a whole hub. See docs/prometheus.md.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ..gpu_use.attribution import Attribution
from ..sampler import Published

_GPU = ("user", "gpu", "UUID", "modelName")
_lock = threading.Lock()
_metrics: _Families | None = None


class MicroCounters(Collector):
    """Counters of money kept in exact integer micro-dollars and exported as dollars on a
    scrape, so that they read ``1.482954``: a float counter that adds a sample's dollars
    at a time drifts (``1.4829539999999874``)."""

    def __init__(self, families: dict[str, tuple[str, str]]) -> None:
        #: key -> (metric name, help)
        self.families = families
        self._totals: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def inc(self, key: str, user: str, micro: int) -> None:
        if micro <= 0:
            return
        with self._lock:
            self._totals[(key, user)] = self._totals.get((key, user), 0) + micro

    def value(self, key: str, user: str) -> int:
        with self._lock:
            return self._totals.get((key, user), 0)

    def collect(self) -> Iterator[CounterMetricFamily]:
        with self._lock:
            totals = dict(self._totals)
        for key, (name, documentation) in self.families.items():
            family = CounterMetricFamily(name, documentation, labels=["user"])
            for (k, user), micro in sorted(totals.items()):
                if k == key:
                    family.add_metric([user], micro / 1_000_000)
            yield family


@dataclass(frozen=True)
class _Families:
    """The process's metric families, created once (the default registry refuses
    duplicates)."""

    money: MicroCounters
    rate: Gauge
    session: Gauge
    gpu_hourly: Gauge
    util: Gauge
    memory: Gauge
    power: Gauge
    energy: Counter
    kernel: Gauge
    currency: Gauge
    unattributed: Gauge


def _create() -> _Families:
    """Create the metrics once per process (the default registry refuses duplicates)."""
    global _metrics
    with _lock:
        if _metrics is None:
            _metrics = _Families(
                money=MicroCounters(
                    {
                        "cost": (
                            "jupyter_gpucost_cost_usd",
                            "Billed cost of the server's sessions (GPUs and base price), "
                            "in the currency.",
                        ),
                        "idle": (
                            "jupyter_gpucost_idle_cost_usd",
                            "Cost of GPU time paid while the GPUs were idle, in the currency.",
                        ),
                    }
                ),
                rate=Gauge(
                    "jupyter_gpucost_cost_rate_usd_per_hour",
                    "What the server's GPUs and base price cost per hour now, in the currency.",
                    ["user"],
                ),
                session=Gauge(
                    "jupyter_gpucost_session_cost_usd",
                    "Billed cost of the running session so far, in the currency.",
                    ["user", "session_id"],
                ),
                gpu_hourly=Gauge(
                    "jupyter_gpucost_gpu_hourly_cost_usd",
                    "Price in force for one GPU per hour (OpenCost: node_gpu_hourly_cost).",
                    list(_GPU),
                ),
                util=Gauge(
                    "jupyter_gpucost_gpu_utilization_percent",
                    "GPU utilisation in percent (dcgm-exporter: DCGM_FI_DEV_GPU_UTIL).",
                    list(_GPU),
                ),
                memory=Gauge(
                    "jupyter_gpucost_gpu_memory_used_bytes",
                    "GPU memory used, in bytes (dcgm-exporter: DCGM_FI_DEV_FB_USED, in MiB).",
                    list(_GPU),
                ),
                power=Gauge(
                    "jupyter_gpucost_gpu_power_watts",
                    "GPU power draw in watts (dcgm-exporter: DCGM_FI_DEV_POWER_USAGE).",
                    list(_GPU),
                ),
                energy=Counter(
                    "jupyter_gpucost_gpu_energy_joules",
                    "GPU energy drawn while this server ran, in joules "
                    "(dcgm-exporter: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, in mJ).",
                    list(_GPU),
                ),
                kernel=Gauge(
                    "jupyter_gpucost_kernel_cost_usd",
                    "GPU cost attributed to each kernel of the running session, in the currency.",
                    ["user", "kernel_id", "notebook"],
                ),
                currency=Gauge(
                    "jupyter_gpucost_currency_info",
                    "The currency of every amount (ISO 4217 code in the label), always 1.",
                    ["user", "currency"],
                ),
                unattributed=Gauge(
                    "jupyter_gpucost_unattributed_cost_usd",
                    "GPU cost of the running session attributed to no kernel, in the currency.",
                    ["user"],
                ),
            )
            REGISTRY.register(_metrics.money)
        return _metrics


class Metrics:
    """Feeds the metrics from one service's samples."""

    def __init__(self, session_id: str, user: str | None = None, *, currency: str = "USD") -> None:
        self.m = _create()
        self.user = user if user is not None else os.environ.get("JUPYTERHUB_USER", "")
        self.m.currency.labels(self.user, currency).set(1)
        self.session_id = session_id
        self._last_energy: dict[int, float] = {}
        self._kernel_labels: set[tuple[str, str]] = set()

    def on_sample(self, published: Published, attribution: Attribution | None) -> None:
        snap = published.snapshot
        user = self.user
        m = self.m
        # a counter never goes down: the idle part's rounding may move it by -1
        m.money.inc("cost", user, snap.cost_delta_micro)
        m.money.inc("idle", user, snap.idle_delta_micro)
        m.rate.labels(user).set(float(snap.rate_per_hour))
        m.session.labels(user, self.session_id).set(snap.cost_micro / 1e6)
        for g in snap.gpus:
            labels = (user, str(g.index), g.uuid, g.model or g.name)
            if g.price is not None:
                m.gpu_hourly.labels(*labels).set(float(g.price.per_gpu_hour))
            r = g.reading
            if r is None:
                continue
            if r.utilization_pct is not None:
                m.util.labels(*labels).set(r.utilization_pct)
            if r.memory_used_bytes is not None:
                m.memory.labels(*labels).set(r.memory_used_bytes)
            if r.power_w is not None:
                m.power.labels(*labels).set(r.power_w)
            if g.energy_j is not None:
                previous = self._last_energy.get(g.index, 0.0)
                m.energy.labels(*labels).inc(max(g.energy_j - previous, 0.0))
                self._last_energy[g.index] = g.energy_j
        if attribution is not None:
            live: set[tuple[str, str]] = set()
            for k in attribution.kernels:
                key = (k.info.id, k.info.notebook_path or "")
                if k.ended:
                    continue
                live.add(key)
                m.kernel.labels(user, *key).set(k.cost_micro / 1e6)
            # a kernel that is gone leaves no series behind (bounded cardinality)
            for key in self._kernel_labels - live:
                with contextlib.suppress(KeyError):
                    m.kernel.remove(user, *key)
            self._kernel_labels = live
            m.unattributed.labels(user).set(attribution.unattributed_micro / 1e6)
