"""The money counters of /metrics are exact: micro-dollars added, dollars on a scrape."""

from __future__ import annotations

import re
import secrets
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest

from jupyter_gpucost.server.record.metrics import Metrics, _create

COST = re.compile(r'^jupyter_gpucost_cost_usd_total\{user="(?P<user>[^"]*)"\} (?P<value>\S+)$')


def scraped(text: str, user: str) -> str:
    for line in text.splitlines():
        match = COST.match(line)
        if match and match["user"] == user:
            return match["value"]
    raise AssertionError(f"no cost counter for {user!r}")


@settings(max_examples=60)
@given(deltas=st.lists(st.integers(min_value=-1, max_value=50_000), min_size=1, max_size=300))
def test_the_cost_counter_reads_the_exact_sum_of_its_samples(deltas: list[int]) -> None:
    user = f"u{secrets.token_hex(6)}"
    money = _create().money
    for delta in deltas:
        money.inc("cost", user, delta)
    total = sum(d for d in deltas if d > 0)
    value = scraped(generate_latest().decode(), user) if total else "0"
    # the text is the exact number of dollars: 1.482954, never 1.4829539999999874
    assert Decimal(value) == Decimal(total) / 1_000_000


def sample(cost_delta: int, idle_delta: int) -> Any:
    snapshot = SimpleNamespace(
        cost_delta_micro=cost_delta,
        idle_delta_micro=idle_delta,
        rate_per_hour=Decimal("6.86"),
        cost_micro=0,
        gpus=[],
    )
    return SimpleNamespace(snapshot=snapshot)


def test_samples_of_a_tenth_and_a_fifth_of_a_dollar_read_0_3_not_0_30000000000000004() -> None:
    user = f"u{secrets.token_hex(6)}"
    metrics = Metrics("session", user=user)
    metrics.on_sample(sample(100_000, 0), None)
    metrics.on_sample(sample(200_000, 1), None)
    assert scraped(generate_latest().decode(), user) == "0.3"
