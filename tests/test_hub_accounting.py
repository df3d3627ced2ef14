"""The hub's own accounting: profile → allocation → rate, and what a server is billed,
split by day in the hub's time zone."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.core.billing import BillingRule
from jupyter_gpucost.core.catalog import PricePolicy, load_catalog
from jupyter_gpucost.hub.accounting import (
    allocated_by_day,
    allocated_micro_usd,
    billed_by_day,
    time_zone,
    today_and_month,
)
from jupyter_gpucost.hub.allocation import (
    NO_GPU,
    AllocationPolicy,
    parse_allocation,
    parse_profiles,
)
from jupyter_gpucost.hub.model import GpuAllocation, HubConfigError, Rate, ServerInfo

CATALOG = load_catalog()
# aws on-demand in us-east-1: T4 0.526, A100-80GB per GPU from p4de
AWS = PricePolicy(CATALOG, region="us-east-1")
STARTED = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def server(profile: str | None = None, options: Mapping[str, object] | None = None) -> ServerInfo:
    return ServerInfo("alice", "", STARTED, True, profile=profile, user_options=options or {})


def rate(usd_per_gpu_hour: str, count: int = 1, model: str = "T4") -> Rate:
    return Rate(GpuAllocation(model, count), Decimal(usd_per_gpu_hour), "test")


# -- parsing the admin's mapping ------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("A100-80GB x 2", GpuAllocation("A100-80GB", 2)),
        ("A100-80GB×8", GpuAllocation("A100-80GB", 8)),
        ("2 x T4", GpuAllocation("T4", 2)),
        ("T4", GpuAllocation("T4", 1)),
        ({"gpu": "H100-80GB", "count": 4}, GpuAllocation("H100-80GB", 4)),
        ({"gpu": "L4"}, GpuAllocation("L4", 1)),
        ("none", NO_GPU),
        (None, NO_GPU),
        ({"count": 0}, NO_GPU),
    ],
)
def test_allocations_are_read_as_the_admin_writes_them(
    raw: object, expected: GpuAllocation
) -> None:
    assert parse_allocation(raw, setting="c.GpuCostHub.default_gpu") == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"gpu": "T4", "cnt": 2}, "c.GpuCostHub.profile_gpus['big']: unknown key 'cnt'"),
        ({"gpu": "T4", "count": "2"}, "c.GpuCostHub.profile_gpus['big']: count '2' is not"),
        ({"gpu": "T4", "count": -1}, "c.GpuCostHub.profile_gpus['big']: -1 GPUs"),
        (3.5, "c.GpuCostHub.profile_gpus['big']: 3.5 is not an allocation"),
    ],
)
def test_a_malformed_allocation_names_the_setting_and_the_profile(
    raw: object, message: str
) -> None:
    with pytest.raises(HubConfigError) as e:
        parse_profiles({"big": raw})
    assert str(e.value).startswith(message)


def test_a_profile_mapping_that_is_neither_dict_nor_callable_is_refused() -> None:
    with pytest.raises(HubConfigError, match=r"^c.GpuCostHub.profile_gpus: expected a dict"):
        parse_profiles(["a100"])


# -- pricing at start -----------------------------------------------------------------


def test_each_profile_is_priced_from_the_catalog_and_unknown_profiles_get_the_default() -> None:
    policy = AllocationPolicy(
        {"a100-2": "A100-80GB x 2", "t4": {"gpu": "T4"}, "cpu": "none"}, "T4", AWS
    )
    big = policy.rate_for(server("a100-2"))
    assert big.allocation == GpuAllocation("A100-80GB", 2)
    row = CATALOG.find(provider="aws", market="on-demand", model="A100-80GB", region="us-east-1")
    assert row is not None
    assert big.usd_per_gpu_hour == row.per_gpu_hour
    assert big.usd_per_hour == 2 * row.per_gpu_hour
    assert "aws on-demand" in big.source
    # the profile may come only in user_options (KubeSpawner's profile_list)
    assert policy.rate_for(server(None, {"profile": "t4"})).usd_per_gpu_hour == Decimal("0.526")
    # no profile, or one the admin did not map: the default allocation
    assert policy.rate_for(server(None)).allocation == GpuAllocation("T4", 1)
    assert policy.rate_for(server("mystery")).allocation == GpuAllocation("T4", 1)
    # a CPU-only profile is $0 because the admin said so, and the source says it
    cpu = policy.rate_for(server("cpu"))
    assert cpu.usd_per_hour == 0
    assert cpu.source == "no GPU allocated (c.GpuCostHub.profile_gpus['cpu'])"


def test_model_names_are_matched_ignoring_case_or_as_nvml_reports_them() -> None:
    policy = AllocationPolicy({"a": "a100-80gb", "b": "NVIDIA A100-SXM4-80GB x 2"}, "none", AWS)
    assert policy.rate_for(server("a")).allocation == GpuAllocation("A100-80GB", 1)
    assert policy.rate_for(server("b")).allocation == GpuAllocation("A100-80GB", 2)


def test_a_gpu_the_catalog_does_not_price_stops_the_start_naming_the_setting() -> None:
    with pytest.raises(HubConfigError) as e:
        AllocationPolicy({"mi300": "MI300X x 8"}, "T4", AWS)
    message = str(e.value)
    assert message.startswith(
        "c.GpuCostHub.profile_gpus['mi300']: no price for GPU model 'MI300X' (aws, on-demand)"
    )
    assert "T4" in message  # what is priced there
    assert "c.GpuCostHub.price_overrides['MI300X']" in message
    with pytest.raises(
        HubConfigError, match=r"^c\.GpuCostHub\.default_gpu: no price for GPU model 'B300'"
    ):
        AllocationPolicy({}, "B300", AWS)


def test_an_admin_override_prices_a_model_the_catalog_lacks() -> None:
    prices = PricePolicy(CATALOG, overrides={"MI300X": Decimal("3.25")})
    policy = AllocationPolicy({"mi300": "MI300X x 8"}, "none", prices)
    r = policy.rate_for(server("mi300"))
    assert r.usd_per_hour == Decimal("26.00")
    assert r.source == "admin override (c.GpuCostHub.price_overrides['MI300X'])"


def test_without_a_default_the_service_does_not_start() -> None:
    with pytest.raises(HubConfigError) as e:
        AllocationPolicy({"t4": "T4"}, None, AWS)
    assert str(e.value).startswith("c.GpuCostHub.default_gpu is not set")
    assert "'none'" in str(e.value)


def test_a_callable_mapping_chooses_per_server_and_falls_back_to_the_default() -> None:
    def by_user(s: ServerInfo) -> object:
        if s.user == "alice":
            return "H100-80GB x 8"
        if s.user == "bob":
            return "MI300X"  # not priced: billed at its upper bound, and said so
        if s.user == "carol":
            raise RuntimeError("directory down")
        return None

    policy = AllocationPolicy(by_user, "T4 x 1", AWS)
    assert policy.rate_for(server()).allocation == GpuAllocation("H100-80GB", 8)
    # a GPU the catalog does not price: its upper bound (the dearest GPU), labelled
    bob = policy.rate_for(ServerInfo("bob", "", STARTED, True))
    assert bob.allocation == GpuAllocation("MI300X", 1)
    assert bob.usd_per_gpu_hour == max(r.per_gpu_hour for r in CATALOG.rows if r.currency == "USD")
    assert bob.source.startswith("upper bound: the dearest GPU of the catalog")
    assert "no price for MI300X" in bob.source
    carol = policy.rate_for(ServerInfo("carol", "", STARTED, True))
    assert carol.allocation == GpuAllocation("T4", 1)
    assert "directory down" in carol.source
    assert policy.rate_for(ServerInfo("dan", "", STARTED, True)).allocation.model == "T4"


# -- the allocated cost and its days --------------------------------------------------


def test_an_hour_of_two_gpus_costs_exactly_two_gpu_hours() -> None:
    r = rate("3.06", count=2)
    end = STARTED + timedelta(hours=1)
    assert allocated_micro_usd(r, BillingRule(), STARTED, end) == 6_120_000
    assert allocated_micro_usd(r, BillingRule(), STARTED, STARTED) == 0
    assert allocated_micro_usd(r, BillingRule(), end, STARTED) == 0


def test_the_minimum_charge_and_granularity_are_billed_as_the_provider_does() -> None:
    r = rate("3.6")  # one micro-dollar per microsecond-hour: 1,000 micro-dollars a second
    aws = BillingRule(granularity_s=1, minimum_charge_s=60)
    assert allocated_micro_usd(r, aws, STARTED, STARTED + timedelta(seconds=5)) == 60_000
    assert allocated_micro_usd(r, aws, STARTED, STARTED + timedelta(seconds=90.2)) == 91_000
    hourly = BillingRule(granularity_s=3600)
    assert allocated_micro_usd(r, hourly, STARTED, STARTED + timedelta(minutes=61)) == 7_200_000


def test_rounding_is_half_up_to_a_whole_micro_dollar() -> None:
    # 0.526 $/h for 1 s = 146.111... micro-dollars; for 9 s = 1315.0 exactly
    r = rate("0.526")
    assert allocated_micro_usd(r, BillingRule(), STARTED, STARTED + timedelta(seconds=1)) == 146
    exact = Fraction(526_000, 3600) * 9
    assert exact == 1315
    assert allocated_micro_usd(r, BillingRule(), STARTED, STARTED + timedelta(seconds=9)) == 1315


def test_a_session_over_midnight_is_split_at_local_midnight_and_adds_up_exactly() -> None:
    paris = ZoneInfo("Europe/Paris")  # UTC+1 in November
    r = rate("0.526", count=3)
    started = datetime(2026, 11, 23, 22, 30, tzinfo=UTC)  # 23:30 in Paris
    until = datetime(2026, 11, 25, 0, 0, 0, 1, tzinfo=UTC)  # 01:00:00.000001 on the 25th
    by_day = allocated_by_day(r, BillingRule(), started, until, paris)
    assert list(by_day) == [date(2026, 11, 23), date(2026, 11, 24), date(2026, 11, 25)]
    # half an hour, a whole day, an hour (and one microsecond, billed as a whole second)
    assert by_day[date(2026, 11, 23)] == 789_000
    assert by_day[date(2026, 11, 24)] == 37_872_000
    assert by_day[date(2026, 11, 25)] == 1_578_000 + 438
    assert sum(by_day.values()) == allocated_micro_usd(r, BillingRule(), started, until)
    # the same instants in UTC fall on two days only
    assert len(allocated_by_day(r, BillingRule(), started, until, UTC)) == 3
    assert list(allocated_by_day(r, BillingRule(), started, started, paris)) == []


def test_daylight_saving_day_has_its_real_length() -> None:
    # 25 October 2026: Paris goes back from UTC+2 to UTC+1, the day lasts 25 hours
    paris = ZoneInfo("Europe/Paris")
    r = rate("3.6")  # 3,600,000 micro-dollars an hour
    started = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)  # 00:00 on the 25th in Paris
    until = datetime(2026, 10, 26, 0, 0, tzinfo=UTC)  # 01:00 on the 26th
    by_day = allocated_by_day(r, BillingRule(), started, until, paris)
    assert by_day == {date(2026, 10, 25): 25 * 3_600_000, date(2026, 10, 26): 3_600_000}


def test_split_days_add_up_for_awkward_rates_and_minimum_charges() -> None:
    tz = ZoneInfo("America/Los_Angeles")
    aws = BillingRule(granularity_s=1, minimum_charge_s=60)
    for price in ("0.000001", "0.526", "98.32", "1.234567"):
        r = rate(price, count=7)
        for seconds in (1, 59, 61, 86_399, 200_001):
            start = datetime(2026, 11, 30, 7, 59, 30, tzinfo=UTC)  # 23:59:30 local
            end = start + timedelta(seconds=seconds, microseconds=3)
            by_day = allocated_by_day(r, aws, start, end, tz)
            assert sum(by_day.values()) == allocated_micro_usd(r, aws, start, end)
            assert all(v >= 0 for v in by_day.values())


def test_the_bill_is_the_allocation_unless_the_server_reported_more() -> None:
    allocated = {date(2026, 11, 23): 500, date(2026, 11, 24): 800}
    reported = {date(2026, 11, 23): 100, date(2026, 11, 24): 900}
    # the session: 1,300 allocated, 1,000 reported; the 24th adds what it grew that day
    assert billed_by_day(allocated, reported) == {date(2026, 11, 23): 500, date(2026, 11, 24): 800}
    # reported 1,900 in all, 1,800 of it on the 24th: billed once, not on both days
    reported = {date(2026, 11, 23): 100, date(2026, 11, 24): 1_800}
    assert billed_by_day(allocated, reported) == {
        date(2026, 11, 23): 500,
        date(2026, 11, 24): 1_400,
    }


@given(
    st.dictionaries(st.dates(), st.integers(0, 10**12), max_size=5),
    st.dictionaries(st.dates(), st.integers(0, 10**12), max_size=5),
)
def test_the_days_add_up_to_the_sessions_bill(
    allocated: dict[date, int], reported: dict[date, int]
) -> None:
    by_day = billed_by_day(allocated, reported)
    # exactly the session's bill, never a day below zero: a report is never billed twice
    assert sum(by_day.values()) == max(sum(allocated.values()), sum(reported.values()))
    assert all(v >= 0 for v in by_day.values())


def test_today_and_this_month_are_calendar_days_and_months() -> None:
    rows: Mapping[date, int] = {
        date(2026, 10, 31): 1,
        date(2026, 11, 1): 10,
        date(2026, 11, 23): 100,
        date(2026, 11, 24): 1000,  # not yet: after "today"
    }
    assert today_and_month(rows.items(), date(2026, 11, 23)) == (100, 110)


def test_the_time_zone_setting_is_an_iana_name() -> None:
    assert time_zone("Europe/Paris") == ZoneInfo("Europe/Paris")
    for bad in ("Mars/Olympus", "", "../etc/passwd"):
        with pytest.raises(HubConfigError, match=r"^c\.GpuCostHub\.time_zone: .* is not an IANA"):
            time_zone(bad)
