"""``python -m jupyter_gpucost.hub``: the gpucost JupyterHub service.

Configured by ``c.GpuCostHub.*`` in a config file (``--config``, default
``gpucost_hub_config.py`` in the working directory) or on the command line
(``--GpuCostHub.grace_s=120``). Every setting is checked at start; one that cannot be used
stops the service with one line naming it.

Run by the Hub (``c.JupyterHub.services``), the service finds the Hub's API, its token, its
URL and its prefix in the environment the Hub gives it; run standalone, set
``hub_api_url``, ``hub_api_token``, ``bind_url`` and ``base_url``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from traitlets import Any as AnyTrait
from traitlets import Bool, Dict, Enum, Float, Int, List, Set, Unicode, Union, default
from traitlets.config import Application

from .._version import __version__
from ..core.billing import GRANULARITY_S_BOUNDS, MINIMUM_CHARGE_S_BOUNDS
from ..core.catalog import CatalogError, PricePolicy, load_catalog, parse_price
from .alerting import parse_notify
from .allowance.config import parse_settings as parse_allowances
from .allowance.traits import AllowanceTraits
from .cluster.nodes import read_nodes_now
from .cluster.settings import ClusterTraits
from .idle.traits import IdleTraits
from .model import HubConfigError
from .profiles.settings import ProfileSettings
from .reconcile.traits import FocusTraits
from .settings import (
    BillingSettings,
    HubSettings,
    IdleSettings,
    LedgerSettings,
    WebSettings,
)
from .wiring import Parts, build

SETTING = "c.GpuCostHub"

#: number settings: (low, high, what the message says is accepted)
RANGES: dict[str, tuple[float, float, str]] = {
    "grace_s": (0, 86_400, "seconds from 0 to 86400"),
    "poll_interval_s": (0.5, 3_600, "seconds from 0.5 to 3600"),
    "flush_interval_s": (0.5, 3_600, "seconds from 0.5 to 3600"),
    "identity_cache_s": (0, 3_600, "seconds from 0 to 3600"),
    "max_report_bytes": (1_024, 10_000_000, "bytes from 1024 to 10000000"),
    "report_rate_per_s": (0.01, 1_000, "reports a second from 0.01 to 1000"),
    "report_burst": (1, 100_000, "reports from 1 to 100000"),
    "max_gpus_per_server": (0, 1_024, "whole GPUs from 0 to 1024"),
    "billing_granularity_s": (
        *GRANULARITY_S_BOUNDS,
        f"whole seconds from {GRANULARITY_S_BOUNDS[0]} to {GRANULARITY_S_BOUNDS[1]}",
    ),
    "minimum_charge_s": (
        *MINIMUM_CHARGE_S_BOUNDS,
        f"whole seconds from {MINIMUM_CHARGE_S_BOUNDS[0]} to {MINIMUM_CHARGE_S_BOUNDS[1]}",
    ),
}


def env(name: str, fallback: str) -> str:
    return os.environ.get(name) or fallback


class GpuCostHub(ClusterTraits, IdleTraits, AllowanceTraits, FocusTraits, Application):
    """The hub's GPU bill: a ledger of every server's allocation, budgets enforced from
    outside the users' servers, and pages for users and admins."""

    name = "gpucost-hub"
    version = __version__
    description = __doc__
    aliases = {
        "config": "GpuCostHub.config_file",
        "f": "GpuCostHub.config_file",
        "log-level": "GpuCostHub.log_level",
    }

    log_level = Enum(
        (0, 10, 20, 30, 40, 50, "DEBUG", "INFO", "WARN", "ERROR", "CRITICAL"),
        default_value=logging.INFO,
        help="How much the service logs, by value or name: DEBUG (10), INFO (20), WARN (30), "
        "ERROR (40) or CRITICAL (50).",
    ).tag(config=True)
    config_file = Unicode(
        "gpucost_hub_config.py", help="The config file to load (c.GpuCostHub.*)."
    ).tag(config=True)

    # -- the Hub ------------------------------------------------------------------------
    hub_api_url = Unicode(
        "http://127.0.0.1:8081/hub/api",
        help="The Hub's REST API; $JUPYTERHUB_API_URL (the Hub sets it for its services) "
        "when this is not configured.",
    ).tag(config=True)
    hub_api_token = Unicode(
        "",
        help="This service's Hub API token; $JUPYTERHUB_API_TOKEN when this is not "
        "configured. Needs the scopes list:users, read:users:groups, read:servers and "
        "delete:servers.",
    ).tag(config=True)
    bind_url = Unicode(
        "http://127.0.0.1:10101",
        help="Where the service listens; $JUPYTERHUB_SERVICE_URL when this is not configured.",
    ).tag(config=True)
    base_url = Unicode(
        "/services/gpucost/",
        help="The URL prefix of the service's pages; $JUPYTERHUB_SERVICE_PREFIX when this is "
        "not configured.",
    ).tag(config=True)

    @default("hub_api_url")
    def _hub_api_url(self) -> str:
        return env("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api")

    @default("hub_api_token")
    def _hub_api_token(self) -> str:
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")

    @default("bind_url")
    def _bind_url(self) -> str:
        return env("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101")

    @default("base_url")
    def _base_url(self) -> str:
        return env("JUPYTERHUB_SERVICE_PREFIX", "/services/gpucost/")

    # -- the ledger ---------------------------------------------------------------------
    data_dir = Unicode(
        "gpucost-hub",
        help="The service's own directory (the SQLite ledger); a relative path is in the "
        "directory the service starts in.",
    ).tag(config=True)
    ledger_url = Unicode(
        "",
        help="Any SQLAlchemy URL for the hub ledger (e.g. postgresql+psycopg://...). Empty: "
        "SQLite in data_dir.",
    ).tag(config=True)
    timezone = Unicode("UTC", help="Where a day and a month begin (an IANA name).").tag(config=True)

    # -- prices and allocations ---------------------------------------------------------
    price_provider = Unicode(
        "",
        help="The catalog's provider whose list prices apply: aws, gcp, azure, lambda, "
        "runpod (in US dollars), alibaba or autodl (in yuan). Empty: detected from the "
        "profile list (its node labels and machine types); where nothing names a cloud "
        "the service refuses to start rather than guess.",
    ).tag(config=True)
    price_market = Unicode("on-demand", help="'on-demand' or 'spot' prices.").tag(config=True)
    price_instance = Unicode(
        "", help="An instance type to price exactly; empty: the first row of the model."
    ).tag(config=True)
    price_region = Unicode(
        "",
        help="The region whose catalog rows price the profiles (e.g. 'eu-west-1', "
        "'westeurope'). Empty: the dearest region's price, labelled as an upper bound.",
    ).tag(config=True)
    price_overrides = Dict(
        help="GPU model → price per GPU-hour in the provider's currency (beats the catalog)."
    ).tag(config=True)
    profile_gpus = AnyTrait(
        None,
        allow_none=True,
        help="Profile → GPU allocation: a dict ({'a100': 'A100-80GB x 2'}; a GPU shared by "
        "N pods, N from 2 to 1024: 'RTX-5090 x 1/8') or a callable of the server returning "
        "one.",
    ).tag(config=True)
    default_gpu = AnyTrait(
        None,
        allow_none=True,
        help="The allocation of a server with no (known) profile, e.g. 'T4' or 'none'.",
    ).tag(config=True)
    profiles_from = Union(
        [Unicode(), List(Unicode())],
        default_value="",
        help="A Zero to JupyterHub values.yaml (its profile list found at the top or under "
        "an umbrella chart's jupyterhub key), a list of values files merged in Helm's order, "
        "or a jupyterhub_config.py (c.KubeSpawner.profile_list, read without running it): "
        "each profile's and option choice's GPUs are derived from it and priced; "
        "profile_gpus still overrides a profile.",
    ).tag(config=True)
    gpu_sharing = Dict(
        key_trait=Unicode(),
        value_trait=Int(),
        default_value={},
        help="GPUs shared by several pods (time-slicing, MPS): a resource name "
        "('nvidia.com/gpu.shared') or a node label the profile selects "
        "('cloud.google.com/gke-nodepool=shared-t4') → the clients per GPU. Such a GPU "
        "is billed 1/N of its price, also where profile_gpus names its model.",
    ).tag(config=True)

    # -- budgets ------------------------------------------------------------------------
    user_budgets = AnyTrait(
        None,
        allow_none=True,
        help="User budgets: {'alice': {'day': 5}, '*': {'month': 100}} (amounts in the "
        "provider's currency per session, day, month), or a callable(user, groups) returning "
        "one user's amounts.",
    ).tag(config=True)
    group_budgets = AnyTrait(
        None,
        allow_none=True,
        help="Group budgets on the group's pooled spend: {'students': {'month': 500}} or "
        "a callable(group) returning the amounts.",
    ).tag(config=True)
    billing_granularity_s = Float(
        1, help="The provider's billing step, 1 to 86400 whole seconds."
    ).tag(config=True)
    minimum_charge_s = Float(
        60,
        help="The provider's minimum charge per server start (AWS, GCP: 60), 0 to 86400 "
        "whole seconds.",
    ).tag(config=True)
    grace_s = Float(
        300.0,
        help="Seconds of countdown before a budget's stop, 0 to 86400: it starts when the "
        "money left lasts this long at the rate it is spent, and the stop lands when the "
        "money runs out (at the budget, not this long after it).",
    ).tag(config=True)
    poll_interval_s = Float(
        10.0, help="How often the Hub's servers are listed, 0.5 to 3600 seconds."
    ).tag(config=True)
    flush_interval_s = Float(
        30.0,
        help="How often the ledger is written (at most this is lost on a crash), 0.5 to 3600 "
        "seconds.",
    ).tag(config=True)
    identity_cache_s = Float(
        60.0,
        help="How long who owns a token (and its scopes) is remembered, 0 to 3600 seconds.",
    ).tag(config=True)
    max_report_bytes = Float(
        65_536, help="The largest report body taken, 1024 to 10000000 bytes."
    ).tag(config=True)
    report_rate_per_s = Float(
        2.0,
        help="Reports a second one user's servers may send on average (a server reports "
        "every 10 s), 0.01 to 1000; past it the service answers 429.",
    ).tag(config=True)
    report_burst = Float(
        30.0, help="Reports one user's servers may send at once, 1 to 100000."
    ).tag(config=True)
    max_gpus_per_server = Float(
        8,
        help="The most GPUs one server can have on this hub (a node's GPUs), 0 to 1024 whole "
        "GPUs: a server's reports bill at most this many GPUs (or its allocation's, if more) "
        "at the dearest price in force.",
    ).tag(config=True)

    # -- who sees what ------------------------------------------------------------------
    admin_users = Set(Unicode(), help="Users who see every user's spend.").tag(config=True)
    admin_groups = Set(Unicode(), help="Groups whose members see every user's spend.").tag(
        config=True
    )
    hub_admins_are_admins = Bool(True, help="Whether the Hub's admins see every user's spend.").tag(
        config=True
    )

    # -- alerts (docs/alerts.md) ----------------------------------------------------------
    notify = Dict(
        help="Where alerts go: {'users': {name: [URL, ...]}, 'groups': {group: [URL, ...]} "
        "(the group's owner), 'admins': [URL, ...]}; Apprise URLs or webhook(s)://. A user's "
        "budget alert goes to that user and their groups' owners; a refused spawn to the "
        "admins too. The URLs hold secrets: never logged nor shown.",
    ).tag(config=True)
    notify_thresholds_pct = List(
        Int(), [50, 80, 100], help="Percentages of a budget that are alerted, once each."
    ).tag(config=True)
    notify_spike_factor = Float(
        3.0,
        help="Alert when a user's spend today is above this many times their median day "
        "(of their last 14 days with spend, at least 3), 0 (never) to 1000.",
    ).tag(config=True)

    # -- built at start -----------------------------------------------------------------
    def settings(self) -> HubSettings:
        """Every setting checked, once, into frozen settings. :class:`HubConfigError` names
        the first setting that cannot be used."""
        self._check_service_settings()
        try:
            tz = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise HubConfigError(
                f"{SETTING}.timezone = {self.timezone!r} is not valid: use an IANA time zone "
                "such as UTC or Europe/Paris"
            ) from None
        profiles = self.profile_settings()
        return HubSettings(
            ledger=LedgerSettings(
                data_dir=Path(self.data_dir).absolute(), url=self.ledger_url, tz=tz
            ),
            billing=BillingSettings(
                granularity_s=int(self.billing_granularity_s),
                minimum_charge_s=int(self.minimum_charge_s),
                user_budgets=self.user_budgets,
                group_budgets=self.group_budgets,
                grace_s=float(self.grace_s),
                max_gpus_per_server=int(self.max_gpus_per_server),
            ),
            profiles=profiles,
            cluster=self.cluster_settings(),
            idle=IdleSettings(policy=self.idle_policy),
            web=WebSettings(
                hub_api_url=self.hub_api_url,
                hub_api_token=self.hub_api_token,
                bind_url=self.bind_url,
                base_url=self.base_url,
                identity_cache_s=float(self.identity_cache_s),
                max_report_bytes=int(self.max_report_bytes),
                report_rate_per_s=float(self.report_rate_per_s),
                report_burst=float(self.report_burst),
                admin_users=frozenset(self.admin_users),
                admin_groups=frozenset(self.admin_groups),
                hub_admins_are_admins=bool(self.hub_admins_are_admins),
            ),
            focus=self.focus_settings(),
            poll_interval_s=float(self.poll_interval_s),
            flush_interval_s=float(self.flush_interval_s),
            notify=parse_notify(self.notify, self.thresholds(), self.spike_factor()),
            allowances=parse_allowances(
                self.user_allowances,
                self.group_allowances,
                self.gpu_hour_weights,
                self.allowance_min_runtime_s,
                self.allowance_requests_per_week,
            ),
        )

    def spike_factor(self) -> float:
        factor = float(self.notify_spike_factor)
        if not 0 <= factor <= 1000:
            raise HubConfigError(
                f"{SETTING}.notify_spike_factor = {factor!r} is not valid: use a number "
                "from 0 (never) to 1000"
            )
        return factor

    def thresholds(self) -> list[int]:
        values = [int(v) for v in self.notify_thresholds_pct]
        if not values or any(not 1 <= v <= 1000 for v in values):
            raise HubConfigError(
                f"{SETTING}.notify_thresholds_pct = {values!r} is not valid: use whole "
                "percentages from 1 to 1000, such as [50, 80, 100]"
            )
        return sorted(set(values))

    def validate(self) -> Parts:
        """Every setting checked; the parts built from them. :class:`HubConfigError` names
        the first setting that cannot be used."""
        return build(self.settings())

    def profile_settings(self) -> ProfileSettings:
        """The settings that decide each server's allocation (prices included), checked;
        with the cluster's nodes where its Prometheus is set (the cloud's second signal)."""
        nodes, unread = read_nodes_now(self.cluster_settings())
        return ProfileSettings(
            prices=self.price_policy(),
            profiles_from=_paths(self.profiles_from),
            profile_gpus=self.profile_gpus,
            gpu_sharing=_sharing(self.gpu_sharing),
            default_gpu=self.default_gpu,
            nodes=nodes,
            nodes_unread=unread,
        )

    def _check_service_settings(self) -> None:
        for name, (low, high, accepted) in RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise HubConfigError(f"{SETTING}.{name} = {value!r} is not valid: use {accepted}")
        if not self.hub_api_token:
            raise HubConfigError(
                f"{SETTING}.hub_api_token is not set (nor $JUPYTERHUB_API_TOKEN): the service "
                "needs a Hub API token; run it from c.JupyterHub.services or give it one"
            )
        for name in ("hub_api_url", "bind_url"):
            parsed = urlparse(getattr(self, name))
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise HubConfigError(
                    f"{SETTING}.{name} = {getattr(self, name)!r} is not valid: use an "
                    "http(s) URL such as http://127.0.0.1:10101"
                )
        if not self.base_url.startswith("/"):
            raise HubConfigError(
                f"{SETTING}.base_url = {self.base_url!r} is not valid: use a path such as "
                "/services/gpucost/"
            )

    def price_policy(self) -> PricePolicy:
        """The prices in force, from the price settings; :class:`HubConfigError` names one
        that cannot be used."""
        overrides: dict[str, Decimal] = {}
        for model, raw in self.price_overrides.items():
            try:
                overrides[str(model)] = parse_price(
                    raw, what=f"{SETTING}.price_overrides[{model!r}]"
                )
            except ValueError as e:
                raise HubConfigError(str(e)) from None
        if self.price_market not in ("on-demand", "spot"):
            raise HubConfigError(
                f"{SETTING}.price_market = {self.price_market!r} is not valid: use on-demand "
                "or spot"
            )
        try:
            catalog = load_catalog()
        except CatalogError as e:
            raise HubConfigError(f"the price catalog: {e}") from None
        if self.price_provider and self.price_provider not in catalog.providers:
            raise HubConfigError(
                f"{SETTING}.price_provider = {self.price_provider!r} is not valid: use one of "
                + ", ".join(catalog.providers)
            )
        return PricePolicy(
            catalog=catalog,
            provider=self.price_provider,
            market=self.price_market,
            instance=self.price_instance,
            overrides=overrides,
            region=self.price_region,
        )

    def start(self) -> None:
        from .runner import run

        asyncio.run(run(self.settings()))

    def initialize(self, argv: list[str] | None = None) -> None:
        self.parse_command_line(argv)
        path = Path(self.config_file)
        if path.exists():
            self.load_config_file(path.name, path=str(path.parent.resolve()))
            # the command line wins over the file
            self.parse_command_line(argv)
        elif "config_file" in self.config.get("GpuCostHub", {}):
            raise HubConfigError(f"{SETTING}.config_file = {str(path)!r}: no such file")
        level = self.log_level
        assert isinstance(level, int | str)
        self.log.setLevel(level)
        logging.getLogger("jupyter_gpucost.hub").setLevel(level)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(format="[%(levelname).1s %(asctime)s gpucost-hub] %(message)s")
    app = GpuCostHub()
    try:
        app.initialize(argv)
    except HubConfigError as e:
        print(f"gpucost-hub: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # a config file that raises, a trait of the wrong type
        print(f"gpucost-hub: the configuration cannot be used: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        app.start()
    except HubConfigError as e:
        print(f"gpucost-hub: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        pass


def _paths(value: object) -> tuple[str, ...]:
    """``c.GpuCostHub.profiles_from``: one path, or several merged in Helm's order."""
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(str(v) for v in value) if isinstance(value, list | tuple) else ()


def _sharing(value: dict[str, int]) -> dict[str, int]:
    for key, clients in value.items():
        if not 1 <= clients <= 1024:
            raise HubConfigError(
                f"c.GpuCostHub.gpu_sharing[{key!r}] = {clients}: a GPU is shared by 1 to 1024 "
                "clients"
            )
    return dict(value)
