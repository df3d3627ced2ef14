"""Opt-in: a detected AWS spot instance priced at its spot price from AWS instead of its
on-demand upper bound (:mod:`...cloud.spot_prices`, docs/spot.md)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, HasTraits, Unicode

from ...cloud.spot_prices import QuoteCache, SpotPriceError, aws_quote
from ...core.catalog import BASIS_UPPER_BOUND
from ...core.instance_prices import PricePlan, whole_instance
from ...core.machine import Machine

#: seconds the start-up waits for AWS's answer
ASK_TIMEOUT_S = 5.0


class SpotPriceTraits(HasTraits):
    aws_spot_prices = Bool(
        False,
        config=True,
        help="On a detected AWS spot instance, read its spot price with "
        "DescribeSpotPriceHistory (the instance role needs ec2:DescribeSpotPriceHistory; "
        "needs boto3) and price it at that, dated and cached for an hour, instead of the "
        "on-demand upper bound. Any failure keeps the upper bound and logs why.",
    )
    aws_spot_prices_endpoint = Unicode(
        "",
        config=True,
        help="The EC2 API endpoint DescribeSpotPriceHistory is sent to (e.g. a VPC "
        "endpoint). Empty: the region's.",
    )


def spot_price_plan(
    plan: PricePlan, machine: Machine | None, traits: HasTraits, log: logging.Logger
) -> PricePlan:
    """``plan``, its upper bound replaced by AWS's spot price where asked for and found."""
    whole = plan.whole
    if (
        not bool(getattr(traits, "aws_spot_prices", False))
        or machine is None
        or machine.provider != "aws"
        or machine.market != "spot"
        or machine.shared
        or not machine.zone
        or whole is None
        or whole.per_gpu.basis != BASIS_UPPER_BOUND
    ):
        return plan
    cache = QuoteCache(Path(jupyter_data_dir()) / "gpucost" / "spot_prices.json")
    endpoint = str(getattr(traits, "aws_spot_prices_endpoint", "")) or None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpucost-spot-price")
    try:
        quote = pool.submit(
            aws_quote,
            machine.instance_type,
            machine.zone,
            machine.region,
            cache,
            endpoint_url=endpoint,
            timeout_s=ASK_TIMEOUT_S,
        ).result(2 * ASK_TIMEOUT_S + 1)
    except FutureTimeout:
        log.warning("jupyter-gpucost: AWS spot price: no answer in time; upper bound kept")
        return plan
    except SpotPriceError as e:
        log.warning("jupyter-gpucost: AWS spot price: %s; upper bound kept", e)
        return plan
    finally:
        pool.shutdown(wait=False)
    row = replace(
        whole.row,
        usd_per_hour=quote.usd_per_hour,
        market="spot",
        as_of=quote.since.isoformat(),
        source=quote.source(),
        confidence="listed",
    )
    log.info("jupyter-gpucost: %s", quote.source())
    return replace(plan, whole=whole_instance(row), note_msgid="", note_values=())
