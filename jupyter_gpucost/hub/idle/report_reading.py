"""A server's spend reports as readings of its GPUs: each report, with the one before it
of the same session, says each GPU's utilisation over the time between them, and whether
a kernel is busy. The service keeps the newest as ``service.activity[key]["report"]`` (the
idle policy's and the disagreement with DCGM's), whether an idle policy runs or not.

Pure: no I/O, no tornado.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime

from ...core.hub_protocol import GpuTime, SpendReport
from ..activity import ActivitySource, GpuActivity, UserServer
from .policy import STALE_S


@dataclass(frozen=True)
class ReportReading:
    session_id: str
    received: datetime
    gpu_time: tuple[GpuTime, ...]
    util: tuple[float, ...]


def report_activity(
    last: ReportReading | None, report: SpendReport, now: datetime
) -> tuple[GpuActivity, ReportReading]:
    """The window since the server's previous report, as a reading of its GPUs: each GPU's
    utilisation is its used time over its observed time in the window (the difference of
    the two reports' cumulative figures). The first report of a session, a GPU list that
    changed or a figure that went back says nothing of the GPUs."""
    busy = None if report.kernels_busy is None else report.kernels_busy > 0

    def reading(util: tuple[float, ...], window_s: float) -> GpuActivity:
        return GpuActivity("report", now, window_s, gpu_util_pct=util, kernel_busy=busy)

    fresh_start = ReportReading(report.session_id, now, report.gpu_time, ())
    if (
        last is None
        or last.session_id != report.session_id
        or len(last.gpu_time) != len(report.gpu_time)
        or not report.gpu_time
        or now < last.received
    ):
        return reading((), 0.0), fresh_start
    window_s = (now - last.received).total_seconds()
    deltas = [
        (g.used_us - p.used_us, g.idle_us - p.idle_us)
        for g, p in zip(report.gpu_time, last.gpu_time, strict=True)
    ]
    if any(used < 0 or idle < 0 for used, idle in deltas):
        return reading((), 0.0), fresh_start
    if any(used + idle == 0 for used, idle in deltas):
        # no sample of some GPU between the two reports: wait for one, from the same
        # baseline; the last window's figures hold meanwhile, but not for long (a meter
        # that samples nothing any more says nothing)
        return reading(last.util if window_s <= STALE_S else (), window_s), last
    util = tuple(100.0 * used / (used + idle) for used, idle in deltas)
    return reading(util, window_s), ReportReading(report.session_id, now, report.gpu_time, util)


#: reports of one server kept to read its GPUs over a Prometheus poll's window (a report
#: every 10 s over the longest window, 15 minutes, is 90; the rate limit bounds the rest)
MAX_POINTS = 256


@dataclass(frozen=True)
class _Point:
    received: datetime
    session_id: str
    gpu_time: tuple[GpuTime, ...]


class ReportReadings:
    """Each running server's last report, and its reading published on the activity map;
    and its recent reports, to read its GPUs over another source's window (:meth:`over`)."""

    def __init__(self) -> None:
        self._last: dict[UserServer, ReportReading] = {}
        self._points: dict[UserServer, deque[_Point]] = {}

    def take(
        self,
        activity: dict[UserServer, dict[ActivitySource, GpuActivity]],
        key: UserServer,
        report: SpendReport,
        now: datetime,
    ) -> None:
        reading, self._last[key] = report_activity(self._last.get(key), report, now)
        points = self._points.setdefault(key, deque(maxlen=MAX_POINTS))
        if report.gpu_time and (not points or now >= points[-1].received):
            points.append(_Point(now, report.session_id, report.gpu_time))
        sources = activity.setdefault(key, {})
        before = sources.get("report")
        if before is None or reading.at >= before.at:
            sources["report"] = reading

    def forget(self, key: UserServer) -> None:
        self._last.pop(key, None)
        self._points.pop(key, None)

    def knows(self, key: UserServer) -> bool:
        """Whether the server has sent a report naming its GPUs."""
        return bool(self._points.get(key))

    def over(self, key: UserServer, start: datetime, end: datetime) -> GpuActivity | None:
        """The server's GPUs from its reports over ``start``..``end`` (the reports of its
        latest session nearest inside those bounds): what another source's window is
        compared with, never a window of another length. ``None`` when its reports do not
        cover at least half of it, or their figures go back."""
        points = [p for p in self._points.get(key, ()) if p.received <= end]
        if not points:
            return None
        last = points[-1]
        mine = [p for p in points if p.session_id == last.session_id]
        before = [p for p in mine if p.received <= start]
        first = before[-1] if before else mine[0]
        covered_s = (last.received - max(first.received, start)).total_seconds()
        if first is last or covered_s < (end - start).total_seconds() / 2:
            return None
        if len(first.gpu_time) != len(last.gpu_time):
            return None
        deltas = [
            (g.used_us - p.used_us, g.idle_us - p.idle_us)
            for g, p in zip(last.gpu_time, first.gpu_time, strict=True)
        ]
        if any(used < 0 or idle < 0 or used + idle == 0 for used, idle in deltas):
            return None
        util = tuple(100.0 * used / (used + idle) for used, idle in deltas)
        window_s = (last.received - first.received).total_seconds()
        return GpuActivity("report", last.received, window_s, gpu_util_pct=util)
