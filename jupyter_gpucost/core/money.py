"""Money: whole micro-units, their rounding, and each way an amount is shown.

The one owner of money in jupyter-gpucost, in the server and in the kernel alike. Costs are
exact Fractions of micro-units (:mod:`jupyter_gpucost.core.billing`); they become whole
micro-units here, half up (:func:`round_micro`), and reach a person through one of the
named display rules below. Nothing here uses floating point except :func:`json_amount`,
which writes an exact amount into a JSON document.

The display rules, by where they are seen:

========================  ==============================================  ==============
rule                      where                                           example
========================  ==============================================  ==============
:func:`json_amount`       every amount in the REST API / events           ``1.234567``
:func:`status_bar`        amounts spent, by size: status bar, panel,      ``$2.51``,
                          ``%%gpucost`` report, ``%gpucost``, the ticker  ``$0.0042``,
                                                                          ``< $0.0001``
:func:`column`            a column of amounts spent (a table, a page):    ``$0.0608``,
                          one number of decimals for all of them          ``$0.1100``
:func:`exact`             an amount someone set: a budget, a price        ``$1,000,000``,
                                                                          ``$1.234567``
:func:`budget`            a budget in notifications, records, the ticker  ``$5.00``,
(:func:`notice`)                                                          ``$0.000001``
:func:`rate`              an hourly rate: status bar, magics, hub pages   ``$6.86/h``
:func:`ticker`            the live ipywidgets ticker (:func:`status_bar`) ``$0.42``
:func:`guard_line`        the training-loop guard's line (no symbol)      ``0.0042``
========================  ==============================================  ==============

Amounts are in the session's currency (:mod:`jupyter_gpucost.core.currency`): a
"micro-dollar" here is a micro-unit of that currency, and ``symbol`` is its symbol. The
browser's ``formatMoney`` (``labextension/src/format.ts``) follows the same rule as
:func:`status_bar`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from fractions import Fraction

from .i18n import _

#: micro-units in a unit of the currency (a dollar, a yuan, a euro)
MICRO_PER_UNIT = 1_000_000
#: one micro-unit, in units
MICRO = Decimal("0.000001")
#: below this an amount spent is shown with four decimals, as in the status bar
SMALL_AMOUNT = Decimal("0.1")
#: the smallest amount spent that is written out; a smaller one, not zero, is ``< $0.0001``
SMALLEST_SHOWN = Decimal("0.0001")

Amount = Decimal | float | int | str


def round_micro(value: Fraction) -> int:
    """Round an exact amount of micro-dollars to a whole micro-dollar, half up."""
    return round_ratio_micro(value.numerator, value.denominator)


def round_ratio_micro(numerator: int, denominator: int) -> int:
    """:func:`round_micro` of ``numerator / denominator`` micro-dollars (``denominator``
    above 0, the ratio reduced or not), without building a :class:`~fractions.Fraction`."""
    quotient, remainder = divmod(numerator, denominator)
    return quotient + (1 if 2 * remainder >= denominator else 0)


def to_units(micro: int) -> Decimal:
    """Whole micro-units as units of the currency, exactly: 1234567 -> Decimal('1.234567')."""
    return (Decimal(micro) * MICRO).quantize(MICRO)


def json_amount(micro: int) -> float:
    """Whole micro-units as the number a JSON document carries (six decimals at most)."""
    return float(to_units(micro))


def round_units(micro: Fraction, quantum: Decimal) -> Decimal:
    """An exact fraction of micro-units as units, rounded half up to ``quantum``
    (``MICRO`` or finer, e.g. ``Decimal('1e-9')`` for a price per step)."""
    steps_per_micro = int(Decimal(1) / quantum) // MICRO_PER_UNIT
    scaled = micro * steps_per_micro
    whole, rest = divmod(scaled.numerator, scaled.denominator)
    if 2 * rest >= scaled.denominator:
        whole += 1
    return (Decimal(whole) * quantum).quantize(quantum)


def as_decimal(amount: Amount) -> Decimal:
    """An amount from JSON or a caller as a Decimal, through its text (no binary float)."""
    return amount if isinstance(amount, Decimal) else Decimal(str(amount))


def exact(amount: Amount, symbol: str = "$") -> str:
    """An amount someone set, as a person reads it: ``$1,000,000``, ``$0.50``, ``$1.234567``.

    Whole amounts have no decimals; others at least two and up to the six (micro-dollars)
    the amount has. Never exponent notation; thousands are separated by commas.
    """
    value = as_decimal(amount).quantize(MICRO)
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value == value.to_integral_value():
        return f"{sign}{symbol}{value:,.0f}"
    text = f"{value:,.6f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"{sign}{symbol}{whole}.{decimals.ljust(2, '0')}"


def status_bar(
    amount: Amount, symbol: str = "$", *, round_up: bool = False, digits: int | None = None
) -> str:
    """An amount spent, by size, as every view shows it: ``$2.51``, ``$0.0042`` (four
    decimals under ten cents), ``< $0.0001`` (never ``$0.0000`` for an amount that is not
    zero), ``$0.00`` (nothing at all), thousands separated by commas. ``round_up`` rounds
    towards the larger amount, for "a budget above ...". ``digits`` (2 or 4) fixes the
    decimals instead, for an amount in a :func:`column`."""
    value = as_decimal(amount)
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value == 0:
        return f"{symbol}0.{'0' * (digits or 2)}"
    if value < SMALLEST_SHOWN and not round_up:
        return f"> -{symbol}{SMALLEST_SHOWN}" if sign else f"< {symbol}{SMALLEST_SHOWN}"
    small = _four_decimals(value) if digits is None else digits == 4
    step = SMALLEST_SHOWN if small else Decimal("0.01")
    rounding = ROUND_CEILING if round_up else ROUND_HALF_UP
    value = value.quantize(step, rounding=rounding)
    return f"{sign}{symbol}{value:,}"


def _four_decimals(value: Decimal) -> bool:
    """Whether an amount spent (not negative) is shown with four decimals by size."""
    return value.quantize(SMALLEST_SHOWN) < SMALL_AMOUNT


def column_digits(amounts: Iterable[Amount]) -> int:
    """The decimals of a column of amounts spent: four when any amount in it that is not
    zero would be shown with four by size (under ten cents), else two."""
    for amount in amounts:
        value = abs(as_decimal(amount))
        if value != 0 and _four_decimals(value):
            return 4
    return 2


def column(amounts: Sequence[Amount], symbol: str = "$") -> list[str]:
    """Amounts spent shown one under the other (a table's column, a page's list), all with
    the same decimals (:func:`column_digits`): ``$0.0608`` above ``$0.1100``, never above
    ``$0.11``; each is :func:`status_bar` otherwise (``< $0.0001``, thousands separated).
    The browser's ``formatMoneyColumn`` follows the same rule."""
    digits = column_digits(amounts)
    return [status_bar(amount, symbol, digits=digits) for amount in amounts]


def notice(micro: int, symbol: str = "$") -> str:
    """A budget in a notification, a message or a record: :func:`budget` of whole
    micro-units."""
    return budget(to_units(micro), symbol)


def budget(amount: Amount, symbol: str = "$") -> str:
    """A budget as it is announced: two decimals at least, and every micro-unit it has
    (``$5.00``, ``$1,000.50``, ``$0.000001``; never ``$0.00`` for a budget that is not
    zero)."""
    text = exact(amount, symbol)
    return text if "." in text else f"{text}.00"


def rate_amount(per_hour: Amount, symbol: str = "$") -> str:
    """The amount of an hourly rate, two decimals: ``$6.86`` (for a sentence that says
    "per hour" itself, e.g. ``"{rate}/h"``)."""
    value = as_decimal(per_hour)
    sign = "-" if value < 0 else ""
    shown = abs(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{sign}{symbol}{shown:,}"


def rate(per_hour: Amount, symbol: str = "$", per_hour_text: str | None = None) -> str:
    """An hourly rate as the status bar writes it: two decimals, ``$6.86/h`` (the front
    end's ``formatRate``), "per hour" in the server's language, or as ``per_hour_text``
    (a translated ``"{price}/h"``) says."""
    text = _("{price}/h") if per_hour_text is None else per_hour_text
    return text.format(price=rate_amount(per_hour, symbol))


def ticker(amount: Decimal, symbol: str = "$") -> str:
    """The live ticker's session total: the rule of every amount spent (:func:`status_bar`)."""
    return status_bar(amount, symbol)


def guard_line(value: Decimal) -> str:
    """The guard's figures, for a glance: 2 decimals from $1, 4 below, 7 for tiny amounts."""
    if value >= 1:
        return f"{value:,.2f}"
    if value >= Decimal("0.0001") or value == 0:
        return f"{value:.4f}"
    return f"{value:.7f}"
