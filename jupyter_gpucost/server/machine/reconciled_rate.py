"""A machine priced at the rate its bill showed (``c.GpuCost.use_billed_rate``).

Once ``jupyter gpucost reconcile`` has kept a bill in the ledger, a later session on a
machine of the same provider and instance type, priced whole from the catalog, is priced
at the billed rate (what the bill charged ÷ its list cost) × the catalog's price, and says
so: "your billed rate (0.72 × list, from your bill of 2026-11-27)". The admin's own prices
always win (a machine they price is not priced whole from the catalog), and nothing changes
where no bill was reconciled.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal

from traitlets import Bool, HasTraits

from ...core.catalog import BASIS_RECONCILED
from ...core.i18n import _
from ...core.instance_prices import PricePlan, whole_instance
from ...core.machine import Machine
from ...core.money import MICRO
from ..ledger import Ledger, billed_rate, default_url


class ReconciledRateTraits(HasTraits):
    use_billed_rate = Bool(
        True,
        config=True,
        help="Once `jupyter gpucost reconcile` has read a bill for a machine of this "
        "provider and instance type, price the sessions on this machine at the billed rate "
        "(billed ÷ list, from the bill) × the catalog's price, labelled as such. False: the "
        "catalog's list price. Where no bill was reconciled, nothing changes.",
    )


def reconciled_rate_plan(
    plan: PricePlan,
    machine: Machine | None,
    *,
    enabled: bool,
    ledger_url: str,
    data_dir: str,
    log: logging.Logger,
) -> PricePlan:
    """``plan``, its whole-instance price scaled to the billed rate where a bill says it."""
    whole = plan.whole
    if not enabled or machine is None or whole is None or ledger_url.strip().lower() == "none":
        return plan
    url = ledger_url or default_url(data_dir)
    if url.startswith("sqlite:///") and not os.path.exists(url.removeprefix("sqlite:///")):
        return plan  # no ledger yet: no bill
    try:
        ledger = Ledger(url, log=log)
        try:
            found = billed_rate(ledger.reconciled(), machine.provider, machine.instance_type)
        finally:
            ledger.close()
    except Exception as e:  # the server starts whatever the ledger does
        log.warning("jupyter-gpucost: the billed rate could not be read (%s): list prices", e)
        return plan
    if found is None:
        return plan
    rate, bill_day = found
    ratio = Decimal(rate.numerator) / Decimal(rate.denominator)
    price = (whole.row.per_hour * ratio).quantize(MICRO, rounding=ROUND_HALF_UP)
    source = _("your billed rate ({rate} × list, from your bill of {day})").format(
        rate=f"{ratio:.2f}", day=bill_day.isoformat()
    )
    row = replace(whole.row, per_hour=price, source=source, as_of=bill_day.isoformat())
    log.info("jupyter-gpucost: %s: %s per hour", source, price)
    whole = whole_instance(row)
    return replace(
        plan, whole=replace(whole, per_gpu=replace(whole.per_gpu, basis=BASIS_RECONCILED))
    )
