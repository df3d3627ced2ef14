"""The service's parts built from its checked settings (:class:`~.settings.HubSettings`):
the ledger, the allocation policy, the budgets and the grace clock, joined in a
:class:`~.service.HubService`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from ..core.billing import BillingRule
from ..core.sent_keys import TableKeys
from .allocation import describe, report_ceiling
from .allowance.book import AllowanceBook
from .allowance.usage import AllowancePolicy
from .budgets import HubBudgetPolicy
from .cluster.settings import ClusterSettings
from .enforcer import HubEnforcer
from .idle.policy import HubIdleClock, IdlePolicy
from .idle.reclaim import Reclaimer
from .ledger import HubLedger, default_url
from .ledger.reclaims import ReclaimStore
from .ledger.reconciled import ReconciledLedger
from .ledger.requests import RequestStore
from .ledger.schema import alerts_sent_table
from .ledger.usage import UsageLedger
from .model import HubConfigError
from .profiles import settings as profiles_setup
from .service import HubService
from .settings import HubSettings

SETTING = "c.GpuCostHub"
log = logging.getLogger("jupyter_gpucost.hub")


@dataclass
class Parts:
    service: HubService
    tz: ZoneInfo
    data_dir: Path
    #: the ledger's URL without a password
    ledger_label: str
    #: ISO 4217 code of the hub's prices, and so of every amount it shows
    currency: str = "USD"
    #: GPU use from the cluster's Prometheus (None: not configured), its ledger table and
    #: the billing rule its split follows
    cluster: ClusterSettings | None = None
    usage_ledger: UsageLedger | None = None
    billing: BillingRule | None = None
    #: the alerts sent, by event key, in the ledger
    alert_keys: TableKeys | None = None
    #: requests for more allowance, in the ledger
    requests: RequestStore | None = None


def build(settings: HubSettings) -> Parts:
    profiles, billing_settings = settings.profiles, settings.billing
    tz = settings.ledger.tz
    cluster = settings.cluster
    allocations = profiles_setup.build(profiles)
    prices = allocations.prices
    allocation = allocations.policy
    if allocations.table is not None and allocations.source is not None:
        log.info("profiles from %s", allocations.source.origin)
        if allocation.derived is None:
            log.warning("%s; every server is priced by profile_gpus", allocations.table.unreadable)
        elif profiles.default_gpu is not None:
            log.info("default_gpu is not used: a server with no profile has the default profile")
        for line in allocations.table.lines:
            if line.rate is not None:
                log.info(
                    "profile %s (%s): %s at %s/h: %s",
                    line.slug,
                    line.choice,
                    describe(line.rate.allocation),
                    line.rate.usd_per_hour,
                    line.rate.source,
                )
    budgets = HubBudgetPolicy(billing_settings.user_budgets, billing_settings.group_budgets)
    enforcer = HubEnforcer(
        billing_settings.grace_s,
        tick_s=settings.poll_interval_s,
        granularity_s=billing_settings.granularity_s,
    )
    data_dir = settings.ledger.data_dir
    try:
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        raise HubConfigError(
            f"{SETTING}.data_dir = {str(data_dir)!r} cannot be created: {e}"
        ) from None
    try:
        billing = BillingRule(billing_settings.granularity_s, billing_settings.minimum_charge_s)
    except ValueError as e:
        raise HubConfigError(f"{SETTING}.billing_granularity_s / minimum_charge_s: {e}") from None
    url = settings.ledger.url or default_url(data_dir)
    try:
        ceiling = report_ceiling(prices, billing_settings.max_gpus_per_server)
        ledger = HubLedger(url, tz=tz, billing=billing, ceiling=ceiling)
    except HubConfigError:
        raise
    except Exception as e:
        raise HubConfigError(f"{SETTING}.ledger_url: the ledger cannot be opened: {e}") from None
    # the idle policy: an idle tick counts at most three polls (a clock that jumps)
    idle = IdlePolicy(settings.idle.policy, log.error)
    reclaimer = Reclaimer(
        idle, HubIdleClock(3 * settings.poll_interval_s), ReclaimStore(ledger.engine)
    )
    book = AllowanceBook(AllowancePolicy(settings.allowances, tz))
    requests = RequestStore(ledger.engine)
    book.grants = requests.granted
    service = HubService(ledger, allocation.rate_for, budgets, enforcer, reclaimer, book)
    service.billed = ReconciledLedger(ledger.engine)
    log.info("prices of %s: %s", prices.provider, allocations.cloud.why)
    return Parts(
        service=service,
        tz=tz,
        data_dir=data_dir,
        ledger_label=ledger.url,
        currency=prices.session_currency,
        cluster=cluster,
        usage_ledger=UsageLedger(ledger.engine) if cluster else None,
        billing=billing,
        alert_keys=TableKeys(ledger.engine, alerts_sent_table),
        requests=requests,
    )
