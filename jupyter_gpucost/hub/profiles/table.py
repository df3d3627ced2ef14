"""Every profile and option choice of a KubeSpawner ``profile_list``, priced.

Built once at start from the hub's own config (:mod:`~.source`): each profile ×
each combination of its options' choices is resolved as KubeSpawner resolves it
(:mod:`~.kubespawner`) and priced from the pod's settings (:mod:`~.gpus`).
``c.GpuCostHub.profile_gpus[slug]`` beats what is derived for that profile.

A running server's rate comes from its ``user_options`` the same way. What KubeSpawner
would have refused (a profile or choice the list does not have, an unlisted choice that
is not enabled or fails its regex, a text longer than 256 characters) cannot be a running
server of this profile list: it is billed at the dearest rate of the table, so a forged
``user_options`` never lowers a bill. An enabled unlisted choice whose text goes into a
GPU setting (``node_selector: {cloud.google.com/gke-accelerator: "{value}"}``) is priced
from that text at run time, looked up exactly; a text that names no priced GPU is billed
at the dearest rate, which for such a list also counts the dearest GPU and the dearest
whole instance the prices know at the provider (the text could name any node).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import ROUND_CEILING
from fractions import Fraction

from ..allocation import TIME_SLICED_TEXT, ceil_micro
from ..model import GpuAllocation, Rate
from .gpus import MICRO, Prices, rate_of, time_slicing
from .kubespawner import (
    UNLISTED,
    OptionsRefused,
    ProfileListError,
    Selection,
    Unreadable,
    every_selection,
    initialized,
    load,
    uses_text,
)
from .node_terms import Unpriced

#: shown where a profile's figure is the admin's restatement
OVERRIDE = "c.GpuCostHub.profile_gpus"


@dataclass(frozen=True)
class ProfileSource:
    """A ``profile_list`` as read from the hub's config, and the spawner's own settings."""

    #: where it was read (a path, and which key)
    origin: str
    #: the profile list as written, or :class:`Unreadable` (a callable, code not run)
    profiles: object
    #: ``c.KubeSpawner.node_selector`` and the other GPU settings outside any profile
    base: Mapping[str, object]


@dataclass(frozen=True)
class Line:
    """One profile × option choices, as ``check-profiles`` prints it."""

    slug: str
    #: ``gpu=a100, image=(unlisted)``; ``-`` for none
    choice: str
    rate: Rate | None
    #: why it cannot be priced ("" when it can)
    problem: str = ""
    #: the unlisted choice's text is priced at run time
    from_text: bool = False


class ProfileTable:
    """The rates of a profile list. :attr:`problems` names what cannot be priced."""

    def __init__(
        self,
        source: ProfileSource,
        prices: Prices,
        overrides: Mapping[str, Rate] | None = None,
    ) -> None:
        self.source = source
        self.prices = prices
        self.overrides = dict(overrides or {})
        self.lines: list[Line] = []
        self._rates: dict[tuple[str, tuple[tuple[str, str], ...]], Rate] = {}
        self.profiles: list[dict[str, object]] = []
        self.unreadable = ""
        self.dearest: Rate | None = None
        if isinstance(source.profiles, Unreadable):
            self.unreadable = (
                f"{source.origin}: the profile list is {source.profiles.what}; it cannot be "
                "read statically"
            )
            return
        try:
            self.profiles = initialized(source.profiles)
            selections = list(every_selection(self.profiles))
        except ProfileListError as e:
            self.unreadable = f"{source.origin}: {e}"
            return
        for options in selections:
            self._add(options)
        known = [line.rate for line in self.lines if line.rate is not None]
        known += list(self.overrides.values())
        if not known or any(line.from_text or line.problem for line in self.lines):
            # a text may name any GPU (or a profile has no price): the fallback is the
            # dearest the prices know
            counts = [r.allocation.count for r in known]
            known += _catalog_dearest(prices, max([1, *counts]))
        self.dearest = max(known, key=lambda r: r.usd_per_hour) if known else None

    def _add(self, options: Mapping[str, object]) -> None:
        try:
            selection, state = load(options, self.profiles, self.source.base, checked=False)
        except (OptionsRefused, ProfileListError) as e:  # a default with no choices
            slug = str(options.get("profile", ""))
            self.lines.append(Line(slug, "-", None, str(e)))
            return
        from_text = any(
            uses_text(self.profiles, selection.slug, option)
            for option, choice in selection.choices
            if choice == UNLISTED
        )
        if selection.slug in self.overrides:
            rate = self._override(selection.slug, state)
            line = Line(selection.slug, selection.label(), rate, "", False)
        elif from_text:
            line = Line(selection.slug, selection.label(), None, "", True)
        else:
            try:
                rate = rate_of(state, self.prices)
                line = Line(selection.slug, selection.label(), rate)
            except Unpriced as e:
                why = str(e).replace("[<this profile>]", f"[{selection.slug!r}]")
                line = Line(selection.slug, selection.label(), None, why)
        if line.rate is not None:
            self._rates[selection.key] = line.rate
        self.lines.append(line)

    def _override(self, slug: str, state: dict[str, object]) -> Rate:
        """``profile_gpus[slug]``, each GPU a share where the pod's GPU is shared
        (``gpu_sharing``, a sharing label): the model is the admin's, the sharing the pod's."""
        rate = self.overrides[slug]
        a = rate.allocation
        clients = time_slicing(state, self.prices)
        if clients is None or clients[0] <= 1 or a.count == 0 or a.share != 1:
            return rate
        n, why = clients
        share = Fraction(1, n)
        detail = TIME_SLICED_TEXT.format(n=n)
        return Rate(
            replace(a, share=share, detail=detail),
            ceil_micro(Fraction(rate.usd_per_gpu_hour) * share),
            f"{share} × {a.model} ({detail}, {why}) each; {OVERRIDE}[{slug!r}]: {rate.source}",
        )

    @property
    def problems(self) -> list[str]:
        """One line per profile or choice that cannot be priced, naming it."""
        if self.unreadable:
            return [self.unreadable]
        return [
            f"profile {line.slug!r}"
            + (f" ({line.choice})" if line.choice != "-" else "")
            + f": {line.problem}"
            for line in self.lines
            if line.problem
        ]

    @property
    def default_rate(self) -> Rate:
        """The rate of ``user_options == {}`` (KubeSpawner's default profile)."""
        return self.rate_for({})

    def rate_for(self, user_options: Mapping[str, object]) -> Rate:
        """A server's rate from its ``user_options``; never below what the pod got."""
        dearest = self.dearest
        assert dearest is not None, "an unreadable table is not used"
        try:
            selection, state = load(user_options, self.profiles, self.source.base)
        except OptionsRefused as e:
            return _dearest(dearest, f"KubeSpawner would not start these user_options ({e})")
        return self._rate(selection, state, dearest)

    def _rate(self, selection: Selection, state: dict[str, object], dearest: Rate) -> Rate:
        if selection.slug in self.overrides:
            return self._override(selection.slug, state)
        known = self._rates.get(selection.key)
        if known is not None:
            return known
        try:
            # the settings hold the user's text: an unknown instance type is not "no GPU"
            return rate_of(state, self.prices, strict=True)
        except Unpriced as e:
            return _dearest(dearest, f"no price for this profile's pod ({e})")


def _catalog_dearest(prices: Prices, count: int) -> list[Rate]:
    """The dearest GPU at the policy's provider and market (``count`` of them, the most
    any profile has) and its dearest whole instance."""
    policy = prices.policy
    found: list[Rate] = []
    rows = [
        r
        for r in policy.catalog.rows
        if r.provider == policy.provider
        and r.market == policy.market
        and r.currency == policy.session_currency
    ]
    if rows:
        row = max(rows, key=lambda r: r.per_gpu_hour)
        found.append(
            Rate(
                GpuAllocation(row.model, count),
                row.per_gpu_hour,
                f"the dearest GPU priced at {policy.provider} {policy.market}: {row.describe()}",
            )
        )
    for model, usd in (policy.overrides or {}).items():
        found.append(Rate(GpuAllocation(model, count), usd, f"admin override for {model}"))
    whole = [
        r
        for r in prices.instances
        if r.provider == policy.provider and r.market == policy.market and not r.not_for_sale
    ]
    if whole and policy.session_currency == "USD":
        top = max(whole, key=lambda r: r.per_hour)
        share = (top.per_hour / top.gpus).quantize(MICRO, rounding=ROUND_CEILING)
        where = f" in {top.region}" if top.region else ""
        found.append(
            Rate(
                GpuAllocation(top.gpu_model, top.gpus),
                share,
                f"the dearest instance priced at {policy.provider} {policy.market}: "
                f"{top.instance}{where}, {top.per_hour} USD/h",
            )
        )
    return found


def _dearest(dearest: Rate, why: str) -> Rate:
    return Rate(
        GpuAllocation(dearest.allocation.model, dearest.allocation.count),
        dearest.usd_per_gpu_hour,
        f"{why}: billed at the dearest rate ({dearest.source})",
    )
