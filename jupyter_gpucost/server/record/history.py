"""Spend and readings over time: a one-second ring for the last hour, the ledger before.

``GET /gpucost/api/history?window=1h&step=5s`` is answered from the ring when the window
fits in it, else from the ledger's per-minute rollups (then the step is at least a
minute). Points are at the end of each step; a step with no reading has ``null`` GPU
values (the chart draws a gap) and the spend rate in force. A point's cost is the
session's billed cost at its time, as the status reported it then, in every window.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ...core.i18n import _
from ...core.money import json_amount
from ...core.refusal import Refusal
from ...core.wire import HistoryPoint, PointGpu
from ..inputs import shown
from ..ledger import Ledger

WINDOWS_S = {"15m": 900, "1h": 3600, "6h": 21600, "24h": 86400, "7d": 604800, "30d": 2592000}
STEPS_S = {"1s": 1, "5s": 5, "10s": 10, "1m": 60, "5m": 300, "1h": 3600}
MAX_POINTS = 2000
DEFAULT_POINTS = 720
RING_S = 3600


@dataclass(frozen=True)
class GpuPoint:
    index: int
    utilization_pct: float | None
    memory_used_bytes: int | None
    power_w: float | None


@dataclass(frozen=True)
class Point:
    unix_s: float
    cost_micro: int
    rate_micro_per_hour: int
    gpus: tuple[GpuPoint, ...]


_DURATION = re.compile(r"^(\d+)(s|m|h|d)$")


def parse_window(value: str | None) -> int:
    if value is None or value == "":
        return WINDOWS_S["1h"]
    if value in WINDOWS_S:
        return WINDOWS_S[value]
    raise Refusal(
        _("window={value} is not one of {allowed}").format(
            value=shown(value), allowed=", ".join(WINDOWS_S)
        )
    )


def parse_step(value: str | None, window_s: int) -> int:
    if value is None or value == "":
        step = window_s / DEFAULT_POINTS
        if window_s > RING_S:
            step = max(step, 60)
        for candidate in sorted(STEPS_S.values()):
            if candidate >= step:
                return candidate
        return max(STEPS_S.values())
    if value not in STEPS_S:
        raise Refusal(
            _("step={value} is not one of {allowed}").format(
                value=shown(value), allowed=", ".join(STEPS_S)
            )
        )
    step_s = STEPS_S[value]
    if step_s > window_s:
        raise Refusal(_("step={value} is longer than the window").format(value=value))
    if window_s > RING_S and step_s < 60:
        text = _(
            "step={value} is too fine for a window over 1h: readings older than an hour "
            "are kept per minute; use step=1m or more"
        )
        raise Refusal(text.format(value=value))
    if window_s // step_s > MAX_POINTS:
        text = _("window/step gives {n} points, more than {most}: use a coarser step")
        raise Refusal(text.format(n=window_s // step_s, most=MAX_POINTS))
    return step_s


class HistoryRing:
    """The last hour of samples (thread-safe: the sampler appends, handlers read)."""

    def __init__(self, seconds: int = RING_S) -> None:
        self._points: deque[Point] = deque(maxlen=seconds + 60)
        self._lock = threading.Lock()

    def append(self, point: Point) -> None:
        with self._lock:
            self._points.append(point)

    def since(self, unix_s: float) -> list[Point]:
        with self._lock:
            return [p for p in self._points if p.unix_s >= unix_s]

    def oldest(self) -> float | None:
        with self._lock:
            return self._points[0].unix_s if self._points else None


def _iso(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).isoformat()


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def from_ring(
    points: list[Point], start_s: float, end_s: float, step_s: int, gpu_indexes: list[int]
) -> list[HistoryPoint]:
    """Fold one-second points into steps: mean utilisation and power, max memory."""
    out: list[HistoryPoint] = []
    buckets: dict[int, list[Point]] = {}
    for p in points:
        if start_s <= p.unix_s <= end_s:
            buckets.setdefault(int((p.unix_s - start_s) // step_s), []).append(p)
    for n in sorted(buckets):
        group = buckets[n]
        last = group[-1]
        gpus: list[PointGpu] = []
        for index in gpu_indexes:
            readings = [g for p in group for g in p.gpus if g.index == index]
            util = [g.utilization_pct for g in readings if g.utilization_pct is not None]
            power = [g.power_w for g in readings if g.power_w is not None]
            memory = [g.memory_used_bytes for g in readings if g.memory_used_bytes is not None]
            gpus.append(
                {
                    "index": index,
                    "utilization_pct": _mean(util),
                    "memory_used_bytes": max(memory) if memory else None,
                    "power_w": _mean(power),
                }
            )
        # the session's billed cost then, as the status said it at that time
        out.append(_point(_iso(last.unix_s), last.cost_micro, last.rate_micro_per_hour, gpus))
    return out


@dataclass
class _GpuSums:
    """One GPU's minutes in a step: utilisation and power summed over samples, peak memory."""

    util: float = 0.0
    power: float = 0.0
    samples: int = 0
    memory: int | None = None


@dataclass
class _Step:
    """A step's minutes: each session's spend, the rate of its last minute, each GPU's."""

    spend: list[tuple[int, str, int]] = field(default_factory=list)
    rate_minute: int | None = None
    rate_total: int = 0
    gpus: dict[int, _GpuSums] = field(default_factory=dict)


def from_ledger(
    ledger: Ledger,
    start_s: float,
    end_s: float,
    step_s: int,
    gpu_indexes: list[int],
    session_id: str | None = None,
) -> list[HistoryPoint]:
    """Fold per-minute rollups of every session into steps.

    A point's cost is the billed cost so far of the session live at its time (the one
    with the latest minute in the step; ``session_id``, this server's, on a tie): what the
    status said then. The rate is that of every session in the step's last minute.
    """
    spend = ledger.session_spend_between(start_s, end_s)
    gpu_rows = ledger.gpu_minutes_between(start_s, end_s)
    # each session's spend before the window, so that its points carry its whole cost
    cumulative = ledger.sessions_spend_before((row[1] for row in spend), start_s)
    buckets: dict[int, _Step] = {}

    def bucket(minute: int) -> _Step:
        return buckets.setdefault(int((minute - start_s) // step_s), _Step())

    for minute, sid, cost, rate in spend:
        b = bucket(minute)
        b.spend.append((minute, sid, cost))
        if b.rate_minute != minute:
            b.rate_minute = minute
            b.rate_total = 0
        b.rate_total += rate
    indexes = set(gpu_indexes)
    for minute, index, util_sum, power_sum, samples, memory in gpu_rows:
        indexes.add(index)
        g = bucket(minute).gpus.setdefault(index, _GpuSums())
        g.util += util_sum
        g.power += power_sum
        g.samples += samples
        if memory is not None:
            g.memory = memory if g.memory is None else max(g.memory, memory)
    out: list[HistoryPoint] = []
    shown = 0
    for n in sorted(buckets):
        b = buckets[n]
        latest: tuple[int, bool, str] | None = None
        for minute, sid, cost in b.spend:
            cumulative[sid] += cost
            key = (minute, sid == session_id, sid)
            if latest is None or key > latest:
                latest = key
        if latest is not None:
            shown = cumulative[latest[2]]
        t = min(start_s + (n + 1) * step_s, end_s)
        gpus: list[PointGpu] = []
        for index in sorted(indexes):
            g = b.gpus.get(index, _GpuSums())
            gpus.append(
                {
                    "index": index,
                    "utilization_pct": g.util / g.samples if g.samples else None,
                    "memory_used_bytes": g.memory,
                    "power_w": g.power / g.samples if g.samples else None,
                }
            )
        out.append(_point(_iso(t), shown, b.rate_total, gpus))
    return out


def _point(t: str, cost_micro: int, rate_micro_per_hour: int, gpus: list[PointGpu]) -> HistoryPoint:
    """One point: the cost and the rate in the session's currency, each under its name and
    its deprecated ``_usd`` twin (docs/api.md, "Money keys")."""
    cost, rate = json_amount(cost_micro), json_amount(rate_micro_per_hour)
    return {
        "t": t,
        "cost": cost,
        "rate_per_hour": rate,
        "cost_usd": cost,
        "rate_usd_per_hour": rate,
        "gpus": gpus,
    }
