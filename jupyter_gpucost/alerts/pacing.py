"""Each target's pace: at most ``per_hour`` alerts in any hour (a sliding window); past it,
alerts to that target are held back and counted, and the next one that goes out says how
many were held back ("12 more alerts were held back").

A flood of distinct events (a hundred users over budget at once, a misconfigured
threshold) so costs a person's inbox at most ``per_hour`` messages an hour, and nothing
is lost silently. Pure: the dispatcher calls it under its lock with a monotonic clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: the window the pace is counted over
WINDOW_S = 3600.0


@dataclass
class _Pace:
    #: when the alerts in the window went out (monotonic seconds)
    sent: deque[float] = field(default_factory=deque)
    #: held back since the last one that went out
    held: int = 0


class Pacing:
    def __init__(self, per_hour: int, window_s: float = WINDOW_S) -> None:
        self.per_hour = per_hour
        self.window_s = window_s
        self._paces: dict[str, _Pace] = {}

    def take(self, target: str, now_s: float) -> int | None:
        """May an alert go to ``target`` now? ``None``: no, it is held back (and counted);
        else how many were held back before it (to say so in it). ``per_hour`` 0 or
        less: no limit."""
        if self.per_hour <= 0:
            return 0
        pace = self._paces.setdefault(target, _Pace())
        while pace.sent and pace.sent[0] <= now_s - self.window_s:
            pace.sent.popleft()
        if len(pace.sent) >= self.per_hour:
            pace.held += 1
            return None
        pace.sent.append(now_s)
        held, pace.held = pace.held, 0
        return held

    def untake(self, target: str, held: int) -> None:
        """An alert :meth:`take` let through could not be queued: it did not go out."""
        pace = self._paces.get(target)
        if pace is not None and pace.sent:
            pace.sent.pop()
            pace.held += held

    def held(self, target: str) -> int:
        """How many alerts to ``target`` are held back now, not yet told of."""
        pace = self._paces.get(target)
        return 0 if pace is None else pace.held
