"""The guard's figures by their names before currencies: ``budget_usd``, ``spent_usd``...

The guard and its summary hold amounts in the session's currency (USD, CNY, EUR...), named
``budget``, ``spent``, ``per_hour``, ``per_step``, ``per_1k_tokens``, ``projected``. A
notebook written before may read the old names: :class:`DollarNames` keeps them, read-only
and deprecated (docs/magic.md), for :class:`~jupyter_gpucost.kernel.guard.Guard` and
:class:`~.summary.GuardSummary` alike.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol


class _Figures(Protocol):
    @property
    def budget(self) -> Decimal: ...
    @property
    def per_hour(self) -> Decimal: ...
    @property
    def spent(self) -> Decimal: ...
    @property
    def per_step(self) -> Decimal | None: ...
    @property
    def per_1k_tokens(self) -> Decimal | None: ...
    @property
    def projected(self) -> Decimal | None: ...


class DollarNames:
    """Deprecated read-only names of the figures (the amounts are in the session's
    currency, whatever the name says)."""

    __slots__ = ()

    @property
    def budget_usd(self: _Figures) -> Decimal:
        """Deprecated: :attr:`budget`."""
        return self.budget

    @property
    def usd_per_hour(self: _Figures) -> Decimal:
        """Deprecated: :attr:`per_hour`."""
        return self.per_hour

    @property
    def spent_usd(self: _Figures) -> Decimal:
        """Deprecated: :attr:`spent`."""
        return self.spent

    @property
    def usd_per_step(self: _Figures) -> Decimal | None:
        """Deprecated: :attr:`per_step`."""
        return self.per_step

    @property
    def usd_per_1k_tokens(self: _Figures) -> Decimal | None:
        """Deprecated: :attr:`per_1k_tokens`."""
        return self.per_1k_tokens

    @property
    def projected_usd(self: _Figures) -> Decimal | None:
        """Deprecated: :attr:`projected`."""
        return self.projected
