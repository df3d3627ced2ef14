"""``%gpucost``'s lines for the hub's allowances, from the server's status as it comes (the
status is the server's, but a kernel must never fail on an odd one)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.kernel.commands.allowance import allowance_lines, left_words, period_words


def hub(*allowances: object) -> dict[str, Any]:
    return {"hub": {"allowances": list(allowances)}}


def test_gpu_time_and_money_left_with_who_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    lines = allowance_lines(
        hub(
            {
                "source": "group:students",
                "unit": "gpu_hours",
                "period": "week",
                "amount": 10.0,
                "left": 6.333333,
                "refill_at": "2026-11-30T00:00:00Z",
            },
            {
                "source": "user",
                "unit": "usd",
                "period": "balance",
                "amount": 20.0,
                "left": 12.4,
                "refill_at": "2026-12-01T09:00:00Z",
            },
        ),
        "$",
    )
    assert lines == [
        "  hub allowance: 6 h 20 min of GPU time left this week, fills up again on Mon "
        "2026-11-30 00:00 UTC; group students, set by your hub admin (read-only)",
        "  hub allowance: $12.40 left until it tops up, tops up on Tue 2026-12-01 09:00 UTC; "
        "set by your hub admin (read-only)",
    ]


@pytest.mark.parametrize(
    ("period", "words"),
    [
        ("day", "today"),
        ("week", "this week"),
        ("month", "this month"),
        ("7 days", "in the last 7 days"),
        ("balance", "until it tops up"),
    ],
)
def test_each_period_in_the_hubs_words(period: str, words: str) -> None:
    assert period_words(period) == words


def test_nothing_left_is_never_below_nothing() -> None:
    assert left_words({"unit": "usd", "period": "day", "left": -2}, "$") == "$0.00 left today"
    assert left_words({"unit": "gpu_hours", "period": "day", "left": 0}, "$") == (
        "0 s of GPU time left today"
    )


@pytest.mark.parametrize("left", [float("inf"), float("nan"), 10**400, "3", True, None])
def test_a_left_that_is_no_finite_number_reads_as_nothing_left(left: object) -> None:
    assert left_words({"unit": "gpu_hours", "period": "day", "left": left}, "$") == (
        "0 s of GPU time left today"
    )


def test_a_top_up_time_that_cannot_be_read_is_left_out() -> None:
    for at in ("monday", "0001-01-01T00:00:00+14:00", None, 5):
        (line,) = allowance_lines(
            hub({"unit": "usd", "period": "week", "left": 1, "refill_at": at}), "$"
        )
        assert line == "  hub allowance: $1.00 left this week; set by your hub admin (read-only)"


def test_no_hub_or_an_older_server_adds_no_line() -> None:
    assert allowance_lines({}, "$") == []
    assert allowance_lines({"hub": None}, "$") == []
    assert allowance_lines({"hub": {"budgets": []}}, "$") == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "source": json_values,
                "unit": st.sampled_from(["usd", "gpu_hours"]) | json_values,
                "period": json_values,
                "left": st.floats(allow_nan=False, allow_infinity=False, width=32) | json_values,
                "refill_at": st.text(max_size=30) | json_values,
            },
        )
        | json_values,
        max_size=5,
    )
)
def test_an_odd_status_never_breaks_the_magic(allowances: list[object]) -> None:
    lines = allowance_lines(hub(*allowances), "$")
    assert len(lines) == sum(isinstance(a, dict) for a in allowances)
    assert all(line.startswith("  hub allowance: ") for line in lines)
