"""The cost saved in a notebook: a record from a file is checked field by field (any JSON
someone sent is either refused or a sound record), and sums are exact."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.core.currency import is_currency_code
from jupyter_gpucost.core.record_rules import (
    NOT_A_CURRENCY,
    NOT_THIS_CURRENCY,
    Expected,
    TimeWindow,
    check_record,
)
from jupyter_gpucost.core.saved_cost import (
    BASE_KEY,
    COST_MISMATCH,
    Refused,
    SavedCell,
    SavedGpu,
    expected_cost_micro,
    parse_cell,
    split_exactly,
    summarise,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=6)
    ),
    max_leaves=20,
)

prices = st.decimals(min_value=0, max_value=1000, places=3, allow_nan=False, allow_infinity=False)


def cell(wall_s: float, gpus: list[Decimal], base: Decimal = Decimal(0)) -> SavedCell:
    rate = sum(gpus, base)
    return SavedCell(
        cost_micro_usd=expected_cost_micro(rate, wall_s),
        wall_s=wall_s,
        rate_usd_per_hour=rate,
        gpus=tuple(
            SavedGpu("NVIDIA H100 80GB HBM3" if i % 2 else "NVIDIA A10G", p)
            for i, p in enumerate(gpus)
        ),
        base_usd_per_hour=base,
        priced_by="the catalog",
        mode="auto",
        status="ok",
        started="2026-11-27T08:00:00+00:00",
        at="2026-11-27T08:00:01+00:00",
    )


@given(json_values)
def test_anything_in_a_file_is_refused_or_sound(value: Any) -> None:
    try:
        parsed = parse_cell(value)
    except Refused as e:
        reason = e.reason
    else:
        reason = ""
        assert parse_cell(parsed.to_json()) == parsed
    assert reason or isinstance(value, dict)


@given(
    st.dictionaries(
        st.sampled_from(["cost_micro_usd", "wall_s", "rate_usd_per_hour", "gpus", "mode", "at"]),
        json_values,
        max_size=3,
    )
)
def test_a_sound_record_with_fields_changed_is_refused_or_still_consistent(
    changes: dict[str, Any],
) -> None:
    record = cell(12.5, [Decimal("6.88")]).to_json() | changes
    try:
        parsed = parse_cell(record)
    except Refused:
        return
    assert (
        abs(parsed.cost_micro_usd - expected_cost_micro(parsed.rate_usd_per_hour, parsed.wall_s))
        <= 1
    )


def test_a_cost_that_does_not_match_its_rate_is_refused() -> None:
    record = cell(3600.0, [Decimal("6.88")]).to_json()
    assert record["cost_micro_usd"] == 6_880_000
    record["cost_micro_usd"] = 0  # a "free" hour of an H100
    with pytest.raises(Refused) as refused:
        parse_cell(record)
    assert refused.value.reason == COST_MISMATCH


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=10**6, allow_nan=False),
            st.lists(prices, max_size=8),
            prices,
        ),
        max_size=20,
    )
)
def test_the_total_is_exactly_the_sum_of_the_cells_and_of_its_split(
    runs: list[tuple[float, list[Decimal], Decimal]],
) -> None:
    cells = [cell(round(w, 6), gpus, base) for w, gpus, base in runs]
    for c in cells:
        assert parse_cell(c.to_json()) == c
        parts = c.by_gpu_micro_usd()
        assert sum(parts.values()) == c.cost_micro_usd
        assert all(v >= 0 for v in parts.values())
    summary = summarise(cells)
    assert summary.total_micro_usd == sum(c.cost_micro_usd for c in cells)
    assert sum(summary.by_gpu_micro_usd.values()) == summary.total_micro_usd


@given(
    st.integers(min_value=0, max_value=10**15),
    st.dictionaries(st.text(max_size=5), prices, max_size=6),
)
def test_split_exactly_adds_up(total: int, weights: dict[str, Decimal]) -> None:
    parts = split_exactly(total, weights)
    assert sum(parts.values()) == total
    assert all(v >= 0 for v in parts.values())
    if total and not any(w > 0 for w in weights.values()):
        assert parts == {BASE_KEY: total}


def test_a_record_is_compact_and_reads_back_as_itself() -> None:
    """What a real GPU's auto-priced cell keeps: no null busy time, no "not simulated";
    the same keys in the same order every time (a diff shows changed figures only)."""
    real = cell(2.0, [Decimal("3.431")])
    kept = real.to_json()
    assert list(kept) == [
        "version",
        "cost_micro_usd",
        "cost_usd",
        "currency",
        "wall_s",
        "gpus",
        "base_usd_per_hour",
        "rate_usd_per_hour",
        "priced_by",
        "mode",
        "status",
        "started",
        "at",
    ]
    assert parse_cell(kept) == real
    measured = SavedCell(
        **{**real.__dict__, "gpu_busy_s": {"0": 1.5}, "simulated": True, "simulated_by": "demo"}
    )
    kept = measured.to_json()
    assert kept["gpu_busy_s"] == {"0": 1.5}
    assert (kept["simulated"], kept["simulated_by"]) == (True, "demo")
    assert parse_cell(kept) == measured


def test_a_record_in_yuan_says_so_and_reads_back_in_yuan() -> None:
    """A session that prices in yuan keeps its cells' records in yuan: the same keys (the
    ``_usd`` names are historic), the record's ``currency`` names the unit."""
    yuan = SavedCell(**{**cell(3600.0, [Decimal("49.5")]).__dict__, "currency": "CNY"})
    kept = yuan.to_json()
    assert kept["currency"] == "CNY"
    assert (kept["cost_micro_usd"], kept["cost_usd"]) == (49_500_000, "49.5")
    assert list(kept) == list(cell(3600.0, [Decimal("49.5")]).to_json())
    assert parse_cell(kept) == yuan
    summary = summarise([yuan], currency="CNY").to_json()
    assert (summary["currency"], summary["total_micro_usd"]) == ("CNY", 49_500_000)


def test_a_dollar_record_is_never_added_into_a_yuan_total() -> None:
    dollars = cell(3600.0, [Decimal("6.88")])
    summary = summarise([], currency="CNY")
    with pytest.raises(Refused) as refused:
        summary.add(dollars)
    assert refused.value.reason == NOT_THIS_CURRENCY
    assert (summary.cells, summary.total_micro_usd) == (0, 0)


@given(st.text(max_size=5) | json_values)
def test_a_record_s_currency_is_an_iso_4217_code_or_it_is_refused(currency: Any) -> None:
    record = cell(12.5, [Decimal("6.88")]).to_json() | {"currency": currency}
    if not (isinstance(currency, str) and is_currency_code(currency)):
        with pytest.raises(Refused) as refused:
            parse_cell(record)
        assert refused.value.reason == NOT_A_CURRENCY
        return
    parsed = parse_cell(record)
    assert parsed.currency == currency
    assert parse_cell(parsed.to_json()) == parsed


@pytest.mark.parametrize(
    "currency", ["usd", "US", "USDT", "U$D", "", " CNY", "CNY\n", "\uff35\uff33\uff24"]
)
def test_garbage_currencies_are_refused(currency: str) -> None:
    record = cell(12.5, [Decimal("6.88")]).to_json() | {"currency": currency}
    with pytest.raises(Refused) as refused:
        parse_cell(record)
    assert refused.value.reason == NOT_A_CURRENCY


def test_a_run_in_yuan_refuses_a_dollar_record_and_a_run_in_dollars_a_yuan_one() -> None:
    window = TimeWindow.plausible(datetime(2026, 11, 28, tzinfo=UTC))
    c = cell(1.0, [Decimal("6.88")])
    for record, run in (("USD", "CNY"), ("CNY", "USD"), ("EUR", "CNY")):
        with pytest.raises(Refused) as refused:
            check_record(
                started=c.started,
                ended=c.at,
                wall_s=c.wall_s,
                rate_usd_per_hour=c.rate_usd_per_hour,
                currency=record,
                expected=Expected(window=window, currency=run),
            )
        assert refused.value.reason == NOT_THIS_CURRENCY
    check_record(
        started=c.started,
        ended=c.at,
        wall_s=c.wall_s,
        rate_usd_per_hour=c.rate_usd_per_hour,
        currency="CNY",
        expected=Expected(window=window, currency="CNY"),
    )
