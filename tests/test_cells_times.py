"""A cell's times must be plausible: any time zone, any year, accepted only in range."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.core.refusal import Refusal
from jupyter_gpucost.server.record.cells import EARLIEST, MAX_AHEAD, clean

NOW = datetime(2026, 11, 25, 15, 0, tzinfo=UTC)
ZONES = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda m: timezone(timedelta(minutes=m))
)


def record(started: str, ended: str) -> dict[str, object]:
    return {"cell_id": "c", "started": started, "ended": ended, "wall_s": 1, "cost_usd": 0}


@given(moment=st.datetimes(timezones=ZONES))
def test_a_time_is_kept_only_between_2000_and_a_day_from_now(moment: datetime) -> None:
    text = moment.isoformat()
    try:
        as_utc = moment.astimezone(UTC)
        plausible = EARLIEST <= as_utc <= NOW + MAX_AHEAD
    except OverflowError:
        plausible = False
    if plausible:
        assert clean(record(text, text), now=NOW)["ended"] == text
    else:
        with pytest.raises(Refusal, match="must be a time between 2000-01-01"):
            clean(record(text, text), now=NOW)


@pytest.mark.parametrize("year", ["0001", "1999", "9999"])
def test_years_0001_and_9999_are_refused_saying_why(year: str) -> None:
    with pytest.raises(Refusal, match=f"started .*not '{year}-"):
        clean(record(f"{year}-06-01T00:00:00+00:00", NOW.isoformat()), now=NOW)
