"""What each server was allocated (profile → GPU model × count) and its price.

The admin maps the profile a user picks (KubeSpawner's ``profile_list`` slug, in
``user_options["profile"]``) to a GPU allocation, in ``c.GpuCostHub.profile_gpus``:

* a dict ``{"a100-2": "A100-80GB x 2", "t4": {"gpu": "T4", "count": 1}, "cpu": "none"}``;
  a count may be a share of one GPU, ``"RTX-5090 x 1/8"`` or ``{"gpu": …, "count": "1/8"}``
  (a GPU shared by 8 pods: each is billed 1/8 of its price);
* or a callable ``f(server: ServerInfo) -> GpuAllocation | str | dict | None`` (``None``:
  the default below).

``c.GpuCostHub.default_gpu`` is what a server gets when it has no profile, a profile the
dict does not name, or the callable returns ``None``. It must be set: a hub where servers
could run unpriced would bill them $0 silently, so the service refuses to start without
it. ``"none"`` is the explicit way to say "a server with no known profile has no GPU".
With no ``profile_gpus`` at all, every server gets ``default_gpu`` (a hub with one kind
of GPU server).

Every allocation named in the config is priced at start through the same catalog and
admin overrides as the single-user server (:class:`~jupyter_gpucost.core.catalog.PricePolicy`);
a GPU model with no price is a :class:`~.model.HubConfigError` naming the setting, never a
silent $0. An allocation a callable returns at run time that cannot be priced (or a
callable that raises) is billed at the default allocation instead, and the rate's source
says so.

Pure: no I/O, no tornado.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import Protocol

from ..core.catalog import PricePolicy, upper_bound
from ..core.gpu_models import model_for
from ..core.i18n import N_
from ..core.regions import region_exact
from .model import GpuAllocation, HubConfigError, Rate, ReportCeiling, ServerInfo

PROFILES_SETTING = "c.GpuCostHub.profile_gpus"
PROFILES_FROM_SETTING = "c.GpuCostHub.profiles_from"
DEFAULT_SETTING = "c.GpuCostHub.default_gpu"
OVERRIDES_SETTING = "c.GpuCostHub.price_overrides"

#: the allocation of a server with no GPU (a CPU-only profile): billed $0, on purpose
NO_GPU = GpuAllocation(model="", count=0)
#: the words an admin writes for "no GPU"
_NONE_WORDS = ("none", "no gpu", "cpu", "")

#: a callable mapping, as the admin writes it
AllocationFn = Callable[[ServerInfo], object]
Profiles = Mapping[str, GpuAllocation] | AllocationFn

_COUNT = r"\d+(?:\s*/\s*\d+)?"
_COUNT_SUFFIX = re.compile(rf"(?P<model>.+?)\s*[x×*]\s*(?P<count>{_COUNT})")
_COUNT_PREFIX = re.compile(rf"(?P<count>{_COUNT})\s*[x×*]\s*(?P<model>.+)")
_COUNT_TEXT = re.compile(_COUNT)
_MAX_COUNT = 1024
#: how a count reads when it is neither whole nor a share of one GPU
_COUNT_HINT = "a whole number of GPUs, or '1/N' for a GPU shared by N pods"


def parse_allocation(raw: object, *, setting: str) -> GpuAllocation:
    """One allocation as the admin writes it: ``"A100-80GB x 2"``, ``"2 x T4"``, ``"T4"``,
    ``{"gpu": "T4", "count": 1}``, a :class:`GpuAllocation`, or ``None`` / ``"none"`` for
    no GPU. The model is not checked against the catalog here (see :func:`price`)."""
    if raw is None:
        return NO_GPU
    if isinstance(raw, GpuAllocation):
        checked = _checked(raw.model, Fraction(raw.count), setting)
        if checked.count == 0 or raw.share == 1:
            return checked
        if not 0 < raw.share < 1:
            raise HubConfigError(f"{setting}: share {raw.share} is not a part of one GPU")
        return replace(checked, share=raw.share, detail=raw.detail)
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() in _NONE_WORDS:
            return NO_GPU
        for pattern in (_COUNT_SUFFIX, _COUNT_PREFIX):
            m = pattern.fullmatch(text)
            if m:
                count = _count(m["count"], setting, text=True)
                return _checked(m["model"].strip(), count, setting)
        return _checked(text, Fraction(1), setting)
    if isinstance(raw, Mapping):
        unknown = sorted(str(k) for k in raw if k not in ("gpu", "count"))
        if unknown:
            raise HubConfigError(
                f"{setting}: unknown key {unknown[0]!r}; an allocation is "
                '{"gpu": "<catalog model>", "count": <number of GPUs>}'
            )
        count = _count(raw.get("count", 1), setting)
        gpu = raw.get("gpu")
        if count == 0 and (gpu is None or gpu == ""):
            return NO_GPU
        if not isinstance(gpu, str):
            raise HubConfigError(f"{setting}: gpu {gpu!r} is not a GPU model name such as 'T4'")
        return _checked(gpu.strip(), count, setting)
    raise HubConfigError(
        f"{setting}: {raw!r} is not an allocation; write 'A100-80GB x 2', "
        '{"gpu": "A100-80GB", "count": 2} or "none"'
    )


def _count(raw: object, setting: str, *, text: bool = False) -> Fraction:
    """A count as the admin writes it: ``2``, or ``"1/8"`` (not a float: ``0.125`` is
    written ``"1/8"``, so the share is exact); ``text``: the count of ``"T4 x 2"``."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return Fraction(raw)
    if isinstance(raw, Fraction):
        return raw
    if isinstance(raw, str) and _COUNT_TEXT.fullmatch(raw.strip()) and ("/" in raw or text):
        num, _, den = raw.replace(" ", "").partition("/")
        if den and int(den) == 0:
            raise HubConfigError(f"{setting}: count {raw!r} divides by zero; {_COUNT_HINT}")
        return Fraction(int(num), int(den or 1))
    raise HubConfigError(f"{setting}: count {raw!r} is not {_COUNT_HINT}")


def _checked(model: str, count: Fraction, setting: str) -> GpuAllocation:
    if count == 0:
        return NO_GPU
    if count.denominator != 1:
        if count.numerator != 1 or not 2 <= count.denominator <= _MAX_COUNT:
            raise HubConfigError(
                f"{setting}: count {count} is not {_COUNT_HINT} (N from 2 to {_MAX_COUNT})"
            )
        if not model:
            raise HubConfigError(f"{setting}: the GPU model is empty")
        return shared(GpuAllocation(model=model, count=1), count.denominator)
    if not 0 < count <= _MAX_COUNT:
        raise HubConfigError(f"{setting}: {count} GPUs; the count must be 1 to {_MAX_COUNT}")
    if not model:
        raise HubConfigError(f"{setting}: the GPU model is empty")
    return GpuAllocation(model=model, count=int(count))


def shared(allocation: GpuAllocation, clients: int) -> GpuAllocation:
    """``allocation``'s devices each a GPU shared by ``clients`` pods (time-slicing, MPS):
    1/clients of one GPU each. An allocation already a share (MIG, ``"1/8"``), or with no
    GPU, is left as it is."""
    if clients <= 1 or allocation.count == 0 or allocation.share != 1:
        return allocation
    return replace(allocation, share=Fraction(1, clients), detail=SHARED_TEXT.format(n=clients))


def parse_profiles(raw: object, *, setting: str = PROFILES_SETTING) -> Profiles:
    """The admin's profile mapping: a dict of profile name → allocation (each parsed), or a
    callable kept as it is (its results are parsed when it is called)."""
    if raw is None:
        return {}
    if callable(raw):
        return raw
    if not isinstance(raw, Mapping):
        raise HubConfigError(
            f"{setting}: expected a dict of profile name → GPU allocation, or a callable "
            f"of the server; got {type(raw).__name__}"
        )
    out: dict[str, GpuAllocation] = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            raise HubConfigError(f"{setting}: profile name {name!r} is not text")
        out[name] = parse_allocation(value, setting=f"{setting}[{name!r}]")
    return out


def canonical_model(model: str, prices: PricePolicy) -> str | None:
    """The catalog's (or an override's) name for ``model``: exact, then ignoring case,
    then an NVML device name (``"NVIDIA A100-SXM4-80GB"`` → ``"A100-80GB"``)."""
    known = [*(prices.overrides or {}), *prices.catalog.models()]
    if model in known:
        return model
    folded = {k.lower(): k for k in known}
    if model.lower() in folded:
        return folded[model.lower()]
    guessed = model_for(model)
    return guessed if guessed in known else None


def price(
    allocation: GpuAllocation,
    prices: PricePolicy,
    *,
    setting: str,
    overrides_setting: str = OVERRIDES_SETTING,
    bound: bool = False,
) -> Rate:
    """The rate of an allocation: the admin's override for its model, else the catalog row
    for the policy's provider, market (and instance). No price is a :class:`HubConfigError`
    naming ``setting`` (what the hub's start-up checks), or with ``bound`` (a server
    already running) the upper bound of :func:`~jupyter_gpucost.core.catalog.upper_bound`,
    labelled: never $0."""
    if allocation.count == 0:
        return Rate(NO_GPU, Decimal(0), f"no GPU allocated ({setting})")
    whole = _price_whole(
        allocation, prices, setting=setting, overrides_setting=overrides_setting, bound=bound
    )
    if allocation.share == 1:
        return whole
    # each device is a share of one GPU: its share of the price, rounded up to the micro
    return Rate(
        replace(allocation, model=whole.allocation.model),
        ceil_micro(Fraction(whole.usd_per_gpu_hour) * allocation.share),
        f"{allocation.share} × {whole.allocation.model} ({allocation.detail}) each; "
        f"{whole.allocation.model}: {whole.source}",
    )


def ceil_micro(value: Fraction) -> Decimal:
    """``value`` rounded up to the micro-unit (a share of a price never bills less)."""
    micro = -((-value.numerator * 1_000_000) // value.denominator)
    return Decimal(micro).scaleb(-6)


def _price_whole(
    allocation: GpuAllocation,
    prices: PricePolicy,
    *,
    setting: str,
    overrides_setting: str,
    bound: bool,
) -> Rate:
    """:func:`price` of whole GPUs of ``allocation``'s model."""
    model = canonical_model(allocation.model, prices)
    overrides = prices.overrides or {}
    if model is not None and model in overrides:
        return Rate(
            GpuAllocation(model, allocation.count),
            overrides[model],
            f"admin override ({overrides_setting}[{model!r}])",
        )
    row = None
    if model is not None:
        row = prices.find(model)
    # another region's row (the hub's region has none, or is not known) is an upper bound,
    # labelled with both regions, whether or not bounds are asked for
    elsewhere = row is not None and not region_exact(row.region, prices.region)
    if (model is None or row is None or elsewhere) and (bound or elsewhere):
        most = upper_bound(prices, model, allocation.model)
        if most is not None:
            return Rate(
                GpuAllocation(most.model, allocation.count),
                most.per_gpu_hour,
                # "upper bound: ..." (views.UPPER_BOUND): the pages label it
                f"{most.source} ({most.reason}; {setting})",
            )
    if model is None or row is None:
        listed = sorted(
            {
                r.model
                for r in prices.catalog.rows
                if r.provider == prices.provider and r.market == prices.market
            }
        )
        raise HubConfigError(
            f"{setting}: no price for GPU model {allocation.model!r} "
            f"({prices.provider}, {prices.market}); models priced there: "
            f"{', '.join(listed) or 'none'}; or set {overrides_setting}"
            f"[{allocation.model!r}] to its price per GPU-hour"
        )
    source = row.describe() + (f"; source: {row.source}" if row.source else "")
    return Rate(GpuAllocation(model, allocation.count), row.per_gpu_hour, source)


class DerivedProfiles(Protocol):
    """Rates derived from the hub's own KubeSpawner ``profile_list``
    (:class:`~.profile_table.ProfileTable`)."""

    @property
    def problems(self) -> list[str]:
        """One line per profile or choice that cannot be priced (none: all can)."""

    @property
    def unreadable(self) -> str:
        """Why the whole list cannot be read ("" when it can)."""

    def rate_for(self, user_options: Mapping[str, object]) -> Rate:
        """A server's rate from its ``user_options`` (``{}``: the default profile)."""


#: builds the derived rates once ``profile_gpus`` is priced (profile slug → its rate)
DerivedFactory = Callable[[Mapping[str, Rate]], DerivedProfiles]


class AllocationPolicy:
    """Each server's rate, from its profile. Built once at start: every allocation the
    config names is priced then, so a missing price stops the start with a clear message.

    ``profiles`` and ``default`` are as the admin wrote them (:func:`parse_profiles`,
    :func:`parse_allocation` are applied here). With ``derived`` (``profiles_from``), a
    server's rate comes from its ``user_options`` through the hub's own profile list;
    ``profile_gpus[slug]`` beats what is derived for that profile, and ``default`` is not
    needed (``{}`` is KubeSpawner's default profile).
    """

    def __init__(
        self,
        profiles: object,
        default: object,
        prices: PricePolicy,
        *,
        profiles_setting: str = PROFILES_SETTING,
        default_setting: str = DEFAULT_SETTING,
        overrides_setting: str = OVERRIDES_SETTING,
        derived: DerivedFactory | None = None,
        shared_by: tuple[int, str] = (1, ""),
    ) -> None:
        self.prices = prices
        #: with no profile list to read, ``gpu_sharing`` of the plain GPU resource (clients,
        #: the setting): every allocation's GPUs are that share of one
        self._shared_by = shared_by
        self._profiles_setting = profiles_setting
        self._overrides_setting = overrides_setting
        self.profiles = parse_profiles(profiles, setting=profiles_setting)
        self._rates: dict[GpuAllocation, Rate] = {}
        if isinstance(self.profiles, Mapping):
            for name, allocation in self.profiles.items():
                self._rates[allocation] = self._price(
                    allocation, setting=f"{profiles_setting}[{name!r}]"
                )
        self.derived: DerivedProfiles | None = None
        if derived is not None:
            by_slug = {}
            if isinstance(self.profiles, Mapping):
                by_slug = {name: self._rates[a] for name, a in self.profiles.items()}
            table = derived(by_slug)
            covered = callable(self.profiles) or default is not None
            if table.unreadable and covered:
                # the admin's profile_gpus (and default_gpu) price every server
                pass
            elif table.problems and not callable(self.profiles):
                first = table.problems[:3]
                more = len(table.problems) - len(first)
                raise HubConfigError(
                    f"{PROFILES_FROM_SETTING}: cannot price "
                    + "; ".join(first)
                    + (f"; and {more} more" if more else "")
                    + f" (set {profiles_setting}[slug] for a profile, or {profiles_setting} "
                    f"and {DEFAULT_SETTING} for a list that cannot be read; see check-profiles)"
                )
            else:
                # (with a callable profile_gpus, a profile it returns None for that
                # cannot be priced bills the table's dearest rate)
                self.derived = table
                self.default_rate = table.rate_for({})
                return
        if default is None:
            raise HubConfigError(
                f"{default_setting} is not set: servers with no profile, or a profile "
                f"{profiles_setting} does not name, need an allocation; set it to a GPU "
                "('T4', 'A100-80GB x 2') or to 'none' if they have no GPU"
            )
        self.default_rate = self._price(
            parse_allocation(default, setting=default_setting), setting=default_setting
        )

    def _price(self, allocation: GpuAllocation, *, setting: str, bound: bool = False) -> Rate:
        """:func:`price`, with :attr:`_shared_by` applied to whole GPUs."""
        clients, why = self._shared_by
        sliced = shared(allocation, clients)
        rate = price(
            sliced,
            self.prices,
            setting=setting,
            overrides_setting=self._overrides_setting,
            bound=bound,
        )
        if sliced is allocation:
            return rate
        return Rate(rate.allocation, rate.usd_per_gpu_hour, f"{rate.source} ({why})")

    def rate_for(self, server: ServerInfo) -> Rate:
        """The rate of ``server``'s allocation (the default one when it has none)."""
        profile = profile_of(server)
        if isinstance(self.profiles, Mapping):
            if self.derived is not None:
                return self.derived.rate_for(server.user_options)
            if profile is not None and profile in self.profiles:
                return self._rates[self.profiles[profile]]
            return self.default_rate
        return self._from_callable(server)

    def _from_callable(self, server: ServerInfo) -> Rate:
        setting = self._profiles_setting
        fn = self.profiles
        assert not isinstance(fn, Mapping)
        try:
            raw = fn(server)
            if raw is None:
                if self.derived is not None:
                    return self.derived.rate_for(server.user_options)
                return self.default_rate
            allocation = parse_allocation(raw, setting=setting)
            if allocation not in self._rates:
                # a running server: a GPU with no price is billed at its upper bound
                self._rates[allocation] = self._price(allocation, setting=setting, bound=True)
            return self._rates[allocation]
        except Exception as e:  # the admin's code: bill the default, and say why
            d = self.default_rate
            return Rate(
                d.allocation,
                d.usd_per_gpu_hour,
                f"{setting} failed for {server.user}'s server ({e}); billed at the "
                f"default allocation: {d.source}",
            )


def profile_of(server: ServerInfo) -> str | None:
    """The profile a server was started with: the Hub's ``profile``, else
    ``user_options["profile"]`` when it is text."""
    if server.profile:
        return server.profile
    chosen = server.user_options.get("profile")
    return chosen if isinstance(chosen, str) and chosen else None


#: how a server's GPUs read (admin page, CSV, check-profiles), in the page's language
NO_GPU_TEXT = N_("no GPU")
WHOLE_TEXT = N_("{count} × {model}")
PART_OF_GPU_TEXT = N_("{count} × {model} ({detail})")
PART_OF_NODE_TEXT = N_("{part} of {instance} ({gpus})")
TIME_SLICED_TEXT = N_("time-sliced {n} ways")
_TIME_SLICED = re.compile(r"time-sliced (\d+) ways")
#: a share the admin named (``"1/8"``, or ``gpu_sharing`` for the plain GPU resource)
SHARED_TEXT = N_("shared {n} ways")
_SHARED = re.compile(r"shared (\d+) ways")


def describe(allocation: GpuAllocation, gettext: Callable[[str], str] = str) -> str:
    """``"2 × A100-80GB"``, ``"no GPU"``, ``"1/7 × A100-40GB (MIG 1g.5gb)"``,
    ``"1/8 of p4d.24xlarge (1 × A100-40GB)"``; ``gettext`` translates the words."""
    if allocation.count == 0:
        return gettext(NO_GPU_TEXT)
    whole = gettext(WHOLE_TEXT).format(count=allocation.count, model=allocation.model)
    if allocation.share != 1:
        detail = allocation.detail
        sliced = _TIME_SLICED.fullmatch(detail)
        if sliced:
            detail = gettext(TIME_SLICED_TEXT).format(n=sliced.group(1))
        named = _SHARED.fullmatch(detail)
        if named:
            detail = gettext(SHARED_TEXT).format(n=named.group(1))
        whole = gettext(PART_OF_GPU_TEXT).format(
            count=allocation.count * allocation.share, model=allocation.model, detail=detail
        )
    gpus = allocation.instance_gpus
    if allocation.instance and gpus and Fraction(allocation.count, gpus) * allocation.share != 1:
        part = Fraction(allocation.count, gpus) * allocation.share
        return gettext(PART_OF_NODE_TEXT).format(
            part=part, instance=allocation.instance, gpus=whole
        )
    return whole


def report_ceiling(prices: PricePolicy, max_gpus: int) -> ReportCeiling:
    """The most a server's reports can bill: ``max_gpus`` at the dearest price per
    GPU-hour in the catalog (any provider, market or instance) or the admin's overrides."""
    dearest = max(r.per_gpu_hour for r in prices.catalog.rows)
    dearest = max([dearest, *(prices.overrides or {}).values()])
    return ReportCeiling(max_gpus=max_gpus, usd_per_gpu_hour=dearest)
