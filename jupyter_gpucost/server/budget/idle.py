"""How long the GPUs have cost money doing nothing: the clock behind ``idle_gpu_minutes``.

The GPUs are idle while they cost money, every one is at or below the idle utilisation and
no kernel is busy; anything else sets the clock back, and with it the warning given.
"""

from __future__ import annotations

import time


class IdleClock:
    """Since when the GPUs have been idle (monotonic seconds), and whether that spell was
    warned of."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.warned = False

    def idle_for_s(self, *, costing: bool, quiet: bool, busy: bool) -> float:
        """The idle spell's length so far (0 when the GPUs are not idle now)."""
        if costing and quiet and not busy:
            if self.since is None:
                self.since = time.monotonic()
            return time.monotonic() - self.since
        self.since = None
        self.warned = False
        return 0.0

    def so_far_s(self) -> float | None:
        """The spell's length for the API, or None when there is none."""
        return None if self.since is None else round(time.monotonic() - self.since, 1)
