"""Money: rounding to micro-dollars and the named display rules, as a person reads them."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpucost.core import money

fractions = st.fractions(min_value=0, max_value=10**12, max_denominator=10**9)


@given(fractions)
def test_rounding_to_a_micro_dollar_is_half_up_and_never_off_by_more_than_half(
    value: Fraction,
) -> None:
    rounded = money.round_micro(value)
    assert abs(rounded - value) <= Fraction(1, 2)
    assert money.round_micro(Fraction(rounded) + Fraction(1, 2)) == rounded + 1


@given(fractions)
def test_dollars_at_a_micro_dollar_step_are_the_rounded_micro_dollars(value: Fraction) -> None:
    assert money.round_units(value, money.MICRO) == money.to_units(money.round_micro(value))


@given(st.integers(min_value=0, max_value=10**15))
def test_a_json_amount_is_the_exact_amount(micro_usd: int) -> None:
    assert Decimal(str(money.json_amount(micro_usd))) == money.to_units(micro_usd)


def test_a_price_per_step_keeps_nine_decimals() -> None:
    assert money.round_units(Fraction(1, 3), Decimal("1e-9")) == Decimal("0.000000333")
    assert money.round_units(Fraction(5, 10**3), Decimal("1e-9")) == Decimal("0.000000005")


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("1000000", "$1,000,000"),
        ("0.5", "$0.50"),
        ("1.234567", "$1.234567"),
        ("1.2345678", "$1.234568"),
        ("-2.5", "-$2.50"),
        (7, "$7"),
    ],
)
def test_an_amount_someone_set_shows_every_micro_dollar_it_has(
    amount: str | int, shown: str
) -> None:
    assert money.exact(amount) == shown


def test_a_notification_shows_two_decimals_and_every_micro_dollar_the_budget_has() -> None:
    assert money.notice(5_000_000) == "$5.00"
    assert money.notice(1_234_567, "€") == "€1.234567"
    assert money.notice(1_000_500_000, "CN¥") == "CN¥1,000.50"
    # a budget of one micro-dollar is not announced as nothing
    assert money.notice(1) == "$0.000001"


def test_the_ticker_shows_amounts_spent_by_the_one_rule() -> None:
    assert money.ticker(Decimal("0.42")) == "$0.42"
    assert money.ticker(Decimal("0.042")) == "$0.0420"
    assert money.ticker(Decimal("1234.5"), "€") == "€1,234.50"
    assert money.ticker(Decimal("0.00002")) == "< $0.0001"


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("0", "$0.00"),
        ("0.000001", "< $0.0001"),
        ("0.000099", "< $0.0001"),
        ("0.0001", "$0.0001"),
        ("0.00015", "$0.0002"),
        ("0.0999", "$0.0999"),
        ("0.09996", "$0.10"),
        ("2.512254", "$2.51"),
        ("1234567.891", "$1,234,567.89"),
        ("-0.00002", "> -$0.0001"),
        ("-2.5", "-$2.50"),
    ],
)
def test_an_amount_spent_is_shown_by_size(amount: str, shown: str) -> None:
    assert money.status_bar(amount) == shown


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_an_amount_spent_is_never_shown_as_zero_unless_it_is_zero(micro: int) -> None:
    shown = money.status_bar(money.to_units(micro), "CN¥")
    digits = "".join(c for c in shown if c.isdigit())
    assert (set(digits) == {"0"}) == (micro == 0)
    if 0 < abs(micro) < 100:
        assert shown in ("< CN¥0.0001", "> -CN¥0.0001")
    elif micro != 0:
        # the figure shown is within half a step of the amount
        step = Decimal("0.0001") if abs(micro) < 99_995 else Decimal("0.01")
        number = Decimal(shown.replace("CN¥", "").replace(",", ""))
        assert abs(number - money.to_units(micro)) <= step / 2


@given(st.integers(min_value=0, max_value=10**15))
def test_a_budget_is_announced_exactly(micro: int) -> None:
    shown = money.notice(micro, "€")
    assert Decimal(shown.removeprefix("€").replace(",", "")) == money.to_units(micro)
    assert len(shown.partition(".")[2]) >= 2


def test_the_guard_line_shows_tiny_amounts_with_seven_decimals() -> None:
    assert money.guard_line(Decimal("2.5")) == "2.50"
    assert money.guard_line(Decimal("0.0042")) == "0.0042"
    assert money.guard_line(Decimal("0.00000123")) == "0.0000012"
    assert money.guard_line(Decimal(0)) == "0.0000"


def test_the_browser_rule_cases_are_the_servers() -> None:
    """The cases the front end's formatMoney/formatBudget are tested against
    (labextension/src/__tests__/money-rule.json) are what this module writes."""
    import json
    from pathlib import Path

    path = Path(__file__).parent.parent / "labextension/src/__tests__/money-rule.json"
    cases = json.loads(path.read_text())["cases"]
    assert len(cases) > 50
    for case in cases:
        amount = Decimal(str(case["amount"]))
        assert money.status_bar(amount) == case["spent"]
        assert money.budget(amount) == case["budget"]


def test_a_column_of_amounts_has_one_number_of_decimals() -> None:
    """A table never shows $0.0608 above $0.11: the column takes four decimals from its
    smallest amount, and an amount too small to write stays ``< $0.0001``."""
    assert money.column([Decimal("0.0608"), Decimal("0.11")]) == ["$0.0608", "$0.1100"]
    assert money.column([Decimal("0.11"), Decimal("2.5")], "¥") == ["¥0.11", "¥2.50"]
    assert money.column([Decimal(0), Decimal("0.05")]) == ["$0.0000", "$0.0500"]
    assert money.column([Decimal("0.00002"), Decimal(1)]) == ["< $0.0001", "$1.0000"]
    assert money.column([]) == []


@given(st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=8))
def test_every_amount_of_a_column_has_the_same_decimals(micros: list[int]) -> None:
    shown = money.column([money.to_units(m) for m in micros])
    decimals = {len(text.rpartition(".")[2]) for text in shown}
    assert len(decimals) == 1, shown
    for micro, text in zip(micros, shown, strict=True):
        # never $0.0000 (nor $0.00) for an amount that is not zero
        assert bool(micro) == ("<" in text or any(c in "123456789" for c in text)), text


def test_the_browser_column_cases_are_the_servers() -> None:
    """The cases formatMoneyColumn is tested against (money-rule.json's ``columns``)."""
    import json
    from pathlib import Path

    path = Path(__file__).parent.parent / "labextension/src/__tests__/money-rule.json"
    columns = json.loads(path.read_text())["columns"]
    assert len(columns) >= 8
    for case in columns:
        amounts = [Decimal(str(a)) for a in case["amounts"]]
        assert money.column(amounts) == case["shown"]
