"""Which region's row prices a machine.

A catalog row (a per-GPU ``[[price]]`` or a whole-instance ``[[instance]]`` row) prices its
own region only; a row without a region prices every region. Among the rows of one
provider, market and GPU (or instance), the machine's region selects its row; where the
region has none, or is not known, the dearest region's row is the most the machine can cost,
and the price built from it is an upper bound whose reason names both regions
(:data:`REASON_REGION`, :data:`REASON_REGION_UNKNOWN`). The one owner of that rule, for
:meth:`~.catalog.Catalog.find` and :func:`~.instance_prices.find_instance` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Protocol, TypeVar

from .i18n import N_

#: the machine's region has no row: its instance (or model) in the dearest region
REASON_REGION = N_(
    "no {provider} {market} price in {region}: priced at the dearest region's, "
    "{row_region} (as of {as_of}), {price}/h"
)
#: the machine's region is not known: its instance (or model) in the dearest region
REASON_REGION_UNKNOWN = N_(
    "region not known: priced at the dearest region's {provider} {market} price, "
    "{row_region} (as of {as_of}), {price}/h"
)


class Regional(Protocol):
    """A catalog row: where it is priced (``""``: everywhere the provider sells it)."""

    @property
    def region(self) -> str: ...


RowT = TypeVar("RowT", bound=Regional)


def region_exact(row_region: str, region: str) -> bool:
    """Whether a row priced in ``row_region`` is the price of a machine in ``region``
    (``""``: not known). A row without a region prices every region."""
    return not row_region or (bool(region) and row_region == region)


def choose_row(rows: Sequence[RowT], region: str, price: Callable[[RowT], Decimal]) -> RowT | None:
    """The row of ``region`` among rows of one provider, market and GPU (or instance): the
    first whose region is ``region`` (or that has none); where none is, or the region is not
    known, the dearest region's row (the first of equals), the most the machine can cost;
    :func:`region_exact` tells the two apart. ``None``: no rows."""
    for row in rows:
        if region_exact(row.region, region):
            return row
    best: RowT | None = None
    for row in rows:
        if best is None or price(row) > price(best):
            best = row
    return best


def region_reason(region: str) -> str:
    """Why a row of another region prices a machine in ``region`` (``""``: not known)."""
    return REASON_REGION if region else REASON_REGION_UNKNOWN
