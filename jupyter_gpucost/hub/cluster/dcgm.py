"""What the cluster's dcgm-exporter says each server's GPUs did: the queries the service
asks Prometheus, joining their series to the Hub's servers by pod name, the used/idle
split of a server's allocation over a window, and where a server's own report disagrees.

dcgm-exporter writes one series per GPU (labels ``gpu``, ``UUID``, ``device``,
``modelName``, ``Hostname`` — ``hostname`` since 2026 — and, when the kubelet's
pod-resources API maps the GPU to a container that requests ``nvidia.com/gpu``, ``pod``,
``namespace`` and ``container``; ``pod_name``/``pod_namespace`` with
``--use-old-namespace``). A Prometheus scraping with ``honor_labels: false`` (a
ServiceMonitor's default) renames the scraped ``pod``/``namespace`` that clash with the
target's own to ``exported_pod``/``exported_namespace``. All these shapes are read.

Pure: no I/O, no tornado.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from ...core.meter import apportion
from ..activity import IDLE_UTIL_PCT, GpuActivity, UserServer
from .promanswer import Vector

UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"

#: the most a GPU draws (W): past it a value is not a reading (DCGM's "blank" values are
#: about 9.2 × 10^18)
MAX_POWER_W = 5_000.0
#: a Kubernetes namespace
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

#: the labels a series' pod and namespace may be under, in the order they are believed:
#: a renamed label first (the target's own ``pod``/``namespace`` are then the exporter's;
#: Prometheus renames only the labels the target also has), then the old names
POD_LABELS = ("exported_pod", "pod_name", "pod")
NAMESPACE_LABELS = ("exported_namespace", "pod_namespace", "namespace")


def window_text(window_s: float) -> str:
    return f"{max(1, round(window_s))}s"


def queries(namespace: str, window_s: float) -> dict[str, str]:
    """The four PromQL instant queries of one poll, each over ``window_s`` seconds, only
    for pods in ``namespace`` (every namespace when it is empty)."""
    w = window_text(window_s)

    def over(function: str, metric: str) -> str:
        if not namespace:
            return f"{function}({metric}[{w}])"
        return " or ".join(
            f'{function}({metric}{{{label}="{namespace}"}}[{w}])' for label in NAMESPACE_LABELS
        )

    return {
        UTIL: over("avg_over_time", UTIL),
        GR_ACTIVE: over("avg_over_time", GR_ACTIVE),
        POWER: over("last_over_time", POWER),
        ENERGY: over("increase", ENERGY),
    }


def pod_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(namespace, pod) a series belongs to, or None for a GPU no pod holds."""
    pod = next((labels[k] for k in POD_LABELS if labels.get(k)), "")
    if not pod:
        return None
    return next((labels[k] for k in NAMESPACE_LABELS if labels.get(k)), ""), pod


def gpu_of(labels: Mapping[str, str]) -> str:
    """The GPU (or MIG instance) a series is about."""
    gpu = labels.get("UUID") or labels.get("uuid") or labels.get("gpu", "?")
    host = labels.get("Hostname") or labels.get("hostname") or ""
    instance = labels.get("GPU_I_ID", "")
    return f"{host}/{gpu}/{instance}"


@dataclass(frozen=True)
class Seen:
    """What DCGM said of one server's GPUs in one poll (shown to admins)."""

    activity: GpuActivity
    nodes: tuple[str, ...] = ()
    models: tuple[str, ...] = ()


@dataclass
class _Gpu:
    util_pct: float | None = None
    active_pct: float | None = None
    power_w: float | None = None
    energy_j: float | None = None
    node: str = ""
    model: str = ""


def _checked(metric: str, value: float, window_s: float) -> float | None:
    """The value in the metric's units, or None when no GPU could have read it."""
    if metric == UTIL:
        return value if 0 <= value <= 100 else None
    if metric == GR_ACTIVE:
        return value * 100 if 0 <= value <= 1 else None
    if metric == POWER:
        return value if 0 <= value <= MAX_POWER_W else None
    # mJ over the window; increase() extrapolates a little past the samples
    joules = value / 1000
    return joules if 0 <= joules <= MAX_POWER_W * 2 * max(window_s, 1) else None


def activities(
    answers: Mapping[str, Vector],
    pods: Mapping[tuple[str, str], UserServer],
    *,
    at: datetime,
    window_s: float,
    max_gpus: int,
) -> tuple[dict[UserServer, Seen], int]:
    """Each server's GPU activity from the answers to :func:`queries`, joined by
    ``pods`` ((namespace, pod name) → server; a namespace of ``""`` matches any); and how
    many series were refused (out of range, or past ``max_gpus`` GPUs for one pod)."""
    by_name = {pod: key for (ns, pod), key in pods.items() if ns == ""}
    gpus: dict[UserServer, dict[str, _Gpu]] = {}
    refused = 0
    for metric in (UTIL, GR_ACTIVE, POWER, ENERGY):
        vector = answers.get(metric)
        if vector is None:
            continue
        refused += vector.refused
        for sample in sorted(vector.samples, key=lambda s: sorted(s.labels.items())):
            found = pod_of(sample.labels)
            if found is None:
                continue
            key = pods.get(found) or by_name.get(found[1])
            if key is None:
                continue
            value = _checked(metric, sample.value, window_s)
            if value is None:
                refused += 1
                continue
            mine = gpus.setdefault(key, {})
            gpu_id = gpu_of(sample.labels)
            gpu = mine.get(gpu_id)
            if gpu is None:
                if len(mine) >= max_gpus:
                    refused += 1
                    continue
                gpu = mine[gpu_id] = _Gpu()
            gpu.node = (
                gpu.node or sample.labels.get("Hostname") or sample.labels.get("hostname", "")
            )
            gpu.model = gpu.model or sample.labels.get("modelName", "")
            if metric == UTIL and gpu.util_pct is None:
                gpu.util_pct = value
            elif metric == GR_ACTIVE and gpu.active_pct is None:
                gpu.active_pct = value
            elif metric == POWER and gpu.power_w is None:
                gpu.power_w = value
            elif metric == ENERGY and gpu.energy_j is None:
                gpu.energy_j = value
    seen: dict[UserServer, Seen] = {}
    for key, mine in gpus.items():
        ordered = [mine[g] for g in sorted(mine)]
        util = tuple(
            round(pct, 2)
            for pct in (g.active_pct if g.active_pct is not None else g.util_pct for g in ordered)
            if pct is not None
        )
        powers = [g.power_w for g in ordered if g.power_w is not None]
        energies = [g.energy_j for g in ordered if g.energy_j is not None]
        activity = GpuActivity(
            source="dcgm",
            at=at,
            window_s=window_s,
            gpu_util_pct=util,
            power_w=sum(powers) if powers else None,
            energy_j=sum(energies) if energies else None,
        )
        seen[key] = Seen(
            activity,
            tuple(sorted({g.node for g in ordered if g.node})),
            tuple(sorted({g.model for g in ordered if g.model})),
        )
    return seen, refused


@dataclass(frozen=True)
class Split:
    """An allocation's cost over one window, in micro-dollars: ``used + idle + unknown``
    is the cost exactly."""

    used: int = 0
    idle: int = 0
    unknown: int = 0


def split(cost_micro_usd: int, activity: GpuActivity | None, gpus: int) -> Split:
    """Split what a server's allocation cost over a window by what DCGM saw: each GPU's
    share (the cost over ``max(gpus, GPUs seen)``) is used × its utilisation and idle for
    the rest; a GPU DCGM did not see, or a window with no answer, is unknown."""
    if cost_micro_usd <= 0:
        return Split()
    util = activity.gpu_util_pct if activity is not None else ()
    n = max(gpus, len(util))
    if n == 0 or not util:
        return Split(unknown=cost_micro_usd)
    # hundredths of a percent: the split is exact arithmetic on whole numbers
    busy = [min(max(round(u * 100), 0), 10_000) for u in util]
    whole = Fraction(cost_micro_usd, 10_000 * n)
    used, idle, unknown = apportion(
        [
            whole * sum(busy),
            whole * sum(10_000 - b for b in busy),
            whole * 10_000 * (n - len(util)),
        ]
    )
    return Split(used, idle, unknown)


@dataclass(frozen=True)
class Disagreement:
    """A server's report and DCGM told different stories of the same window."""

    at: datetime
    report_pct: float
    dcgm_pct: float


def mean(values: tuple[float, ...]) -> float:
    return sum(values) / len(values)


def disagreement(
    dcgm: GpuActivity, report: GpuActivity | None, tolerance_pct: float
) -> Disagreement | None:
    """The two mean utilisations when they differ by more than ``tolerance_pct`` points
    over overlapping windows (a report from long ago, or naming no GPU, says nothing)."""
    if report is None or not dcgm.gpu_util_pct or not report.gpu_util_pct:
        return None
    apart_s = abs((report.at - dcgm.at).total_seconds())
    if apart_s > dcgm.window_s + report.window_s:
        return None
    mine, theirs = mean(dcgm.gpu_util_pct), mean(report.gpu_util_pct)
    if abs(mine - theirs) <= tolerance_pct:
        return None
    return Disagreement(dcgm.at, round(theirs, 1), round(mine, 1))


def idle_energy_j(activity: GpuActivity) -> float:
    """The window's energy when every GPU was idle (what a server left on burned)."""
    if activity.energy_j is None or activity.all_idle is not True:
        return 0.0
    return activity.energy_j


__all__ = [
    "ENERGY",
    "GR_ACTIVE",
    "IDLE_UTIL_PCT",
    "POWER",
    "UTIL",
    "Disagreement",
    "Seen",
    "Split",
    "activities",
    "disagreement",
    "queries",
    "split",
]
