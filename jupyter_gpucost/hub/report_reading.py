"""A server's spend reports as readings of its GPUs: each report, with the one before it
of the same session, says each GPU's utilisation over the time between them, and whether
a kernel is busy. The service keeps the newest as ``service.activity[key]["report"]`` (the
idle policy's and the disagreement with DCGM's), whether an idle policy runs or not.

Pure: no I/O, no tornado.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..core.hub_protocol import GpuTime, SpendReport
from .activity import ActivitySource, GpuActivity, ServerKey
from .idle import STALE_S


@dataclass(frozen=True)
class LastReport:
    session_id: str
    received: datetime
    gpu_time: tuple[GpuTime, ...]
    util: tuple[float, ...]


def report_activity(
    last: LastReport | None, report: SpendReport, now: datetime
) -> tuple[GpuActivity, LastReport]:
    """The window since the server's previous report, as a reading of its GPUs: each GPU's
    utilisation is its used time over its observed time in the window (the difference of
    the two reports' cumulative figures). The first report of a session, a GPU list that
    changed or a figure that went back says nothing of the GPUs."""
    busy = None if report.kernels_busy is None else report.kernels_busy > 0

    def reading(util: tuple[float, ...], window_s: float) -> GpuActivity:
        return GpuActivity("report", now, window_s, gpu_util_pct=util, kernel_busy=busy)

    fresh_start = LastReport(report.session_id, now, report.gpu_time, ())
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
    return reading(util, window_s), LastReport(report.session_id, now, report.gpu_time, util)


class ReportReadings:
    """Each running server's last report, and its reading published on the activity map."""

    def __init__(self) -> None:
        self._last: dict[ServerKey, LastReport] = {}

    def take(
        self,
        activity: dict[ServerKey, dict[ActivitySource, GpuActivity]],
        key: ServerKey,
        report: SpendReport,
        now: datetime,
    ) -> None:
        reading, self._last[key] = report_activity(self._last.get(key), report, now)
        sources = activity.setdefault(key, {})
        before = sources.get("report")
        if before is None or reading.at >= before.at:
            sources["report"] = reading

    def forget(self, key: ServerKey) -> None:
        self._last.pop(key, None)
