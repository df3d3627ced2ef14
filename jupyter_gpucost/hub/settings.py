"""The service's settings, checked once by the app (:mod:`.app`) and passed down frozen,
one dataclass per concern: the ledger, billing and budgets, the profiles
(:class:`~.profiles.settings.ProfileSettings`), the cluster
(:class:`~.cluster.settings.ClusterSettings`), the idle policy and the web.

Nothing below the app reads the app's traits: :mod:`.wiring` and :mod:`.runner` take a
:class:`HubSettings`. Values the admin may write as a dict or a callable (budgets, the idle
policy, the profiles' GPUs) are kept as written: their own parsers check them when the
parts are built, naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

from .alerting import HubNotify
from .allowance.config import AllowanceSettings
from .cluster.settings import ClusterSettings
from .profiles.settings import ProfileSettings
from .reconcile.traits import FocusSettings


@dataclass(frozen=True)
class LedgerSettings:
    #: the service's own directory (created at start, mode 700)
    data_dir: Path
    #: ``c.GpuCostHub.ledger_url`` ("": SQLite in ``data_dir``); may hold a password
    url: str = field(repr=False)
    #: where a day and a month begin
    tz: ZoneInfo


@dataclass(frozen=True)
class BillingSettings:
    #: the provider's billing step and minimum charge per start, whole seconds
    granularity_s: int
    minimum_charge_s: int
    #: ``user_budgets`` / ``group_budgets`` as written (a dict, a callable or None)
    user_budgets: object
    group_budgets: object
    #: seconds between a spent budget and the stop
    grace_s: float
    #: the most GPUs one server can have: the report ceiling
    max_gpus_per_server: int


@dataclass(frozen=True)
class IdleSettings:
    #: ``c.GpuCostHub.idle_policy`` as written (a dict, a callable or None)
    policy: object


@dataclass(frozen=True)
class WebSettings:
    hub_api_url: str
    hub_api_token: str = field(repr=False)
    bind_url: str
    base_url: str
    identity_cache_s: float
    max_report_bytes: int
    report_rate_per_s: float
    report_burst: float
    admin_users: frozenset[str]
    admin_groups: frozenset[str]
    hub_admins_are_admins: bool


@dataclass(frozen=True)
class HubSettings:
    """Every setting of the service, checked."""

    ledger: LedgerSettings
    billing: BillingSettings
    profiles: ProfileSettings
    #: None: GPU use is not read from the cluster (``prometheus_url`` unset)
    cluster: ClusterSettings | None
    idle: IdleSettings
    web: WebSettings
    #: the cloud's FOCUS bill read on a schedule (None: ``focus_source`` unset)
    focus: FocusSettings | None
    #: how often the Hub's servers are listed, and the ledger written
    poll_interval_s: float
    flush_interval_s: float
    #: where alerts go (``c.GpuCostHub.notify``, docs/alerts.md)
    notify: HubNotify = field(default_factory=HubNotify)
    #: allowances in money or GPU-hours (``user_allowances``, ``group_allowances``)
    allowances: AllowanceSettings = field(default_factory=AllowanceSettings)
