"""What a server's GPUs did lately, as the hub service learns it: the contract between the
sources of GPU activity (the cluster's Prometheus fed by dcgm-exporter, and the servers' own
spend reports) and what reads them (the used/idle split, the idle policy, the admin page).

Pure: no I/O, no tornado.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple


class UserServer(NamedTuple):
    """A user's server, as the service keys what it knows of it while it runs (its
    activity, its row, its state): one per (user, server name) at a time, whichever start
    of it is running. :class:`..enforcer.ServerRun` names one start of it."""

    user: str
    #: ``""``: the user's default server
    server_name: str


ActivitySource = Literal["dcgm", "report"]

#: a GPU whose utilisation stays under this over a window did nothing (percent)
IDLE_UTIL_PCT = 1.0


@dataclass(frozen=True)
class GpuActivity:
    """One server's GPUs over one window (``window_s`` seconds ending at ``at``), from one
    source. A figure the source does not give is ``None``, never 0."""

    source: ActivitySource
    #: the end of the window
    at: datetime
    window_s: float
    #: each GPU's mean utilisation over the window, 0..100 (DCGM: GR_ENGINE_ACTIVE × 100
    #: where present, else GPU_UTIL); empty when the source names no GPU
    gpu_util_pct: tuple[float, ...] = ()
    #: the server's GPUs' power draw now, summed (W)
    power_w: float | None = None
    #: energy the server's GPUs drew over the window, summed (J)
    energy_j: float | None = None
    #: whether a kernel of the server is executing; ``None`` where the source cannot know
    #: (DCGM sees GPUs, not kernels)
    kernel_busy: bool | None = None

    @property
    def all_idle(self) -> bool | None:
        """Every GPU under :data:`IDLE_UTIL_PCT` over the window; ``None`` when no GPU was
        seen (unknown is not idle)."""
        if not self.gpu_util_pct:
            return None
        return all(u < IDLE_UTIL_PCT for u in self.gpu_util_pct)


#: what the service knows of each running server's activity, newest per source
ActivityMap = Mapping[UserServer, Mapping[ActivitySource, GpuActivity]]
