"""How many reports one user's servers may send: a token bucket per user.

A server reports every 10 s (``c.GpuCost.hub_report_interval_s``). A user who floods the
report route with her own token (or many tokens of hers) is answered 429 once her bucket
is empty, before her body is even parsed, so a burst of 1,000 costs the service a
dictionary look-up each and costs the other users nothing.

Pure: no I/O, no tornado; the clock is given (monotonic seconds).
"""

from __future__ import annotations

from dataclasses import dataclass

#: buckets kept at most; past this the full ones (nobody over the limit) are dropped
MAX_BUCKETS = 100_000


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimit:
    """``rate_per_s`` reports a second for each key on average, ``burst`` at once."""

    def __init__(self, rate_per_s: float, burst: float) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("a rate limit needs a rate above 0 and a burst of 1 or more")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._buckets: dict[str, _Bucket] = {}

    def allow(self, key: str, now: float) -> bool:
        """Take one report from ``key``'s bucket: False when it is empty."""
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._drop_full(now)
            bucket = self._buckets[key] = _Bucket(self.burst, now)
        else:
            elapsed = max(0.0, now - bucket.at)
            bucket.tokens = min(self.burst, bucket.tokens + elapsed * self.rate_per_s)
            bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def retry_after_s(self, key: str) -> float:
        """Seconds until ``key`` may report again."""
        bucket = self._buckets.get(key)
        if bucket is None or bucket.tokens >= 1:
            return 0.0
        return (1 - bucket.tokens) / self.rate_per_s

    def _drop_full(self, now: float) -> None:
        refill = self.burst / self.rate_per_s
        self._buckets = {k: b for k, b in self._buckets.items() if now - b.at < refill}
        if len(self._buckets) >= MAX_BUCKETS:
            self._buckets.clear()
