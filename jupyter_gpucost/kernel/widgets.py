"""``CostTicker()``: the session's cost and rate, ticking in the notebook while cells run.

::

    from jupyter_gpucost.widgets import CostTicker
    CostTicker()

Where the figures come from:

- from the jupyter-gpucost server, when it published its address and a token for its
  kernels (``JUPYTER_GPUCOST_URL``, ``JUPYTER_GPUCOST_TOKEN``): the ticker reads
  ``GET {URL}gpucost/api/status`` through the kernel's link every ``interval_s`` seconds,
  so it shows what the status bar shows (the whole server session, every kernel), and the
  budget in force;
- otherwise from the kernel itself: the kernel's GPUs at the prices ``%%gpucost`` uses
  (the server's, handed down in ``JUPYTER_GPUCOST_PRICES``, else the shipped catalog)
  times the time since the kernel started, labelled as such.

The figures are refreshed by a background thread, which only sets widget values (the
widget's comm is thread-safe in ipywidgets 8) and never prints. It runs in a copy of the
creating cell's context, so its messages keep that cell as their parent under ipykernel 7
(which keeps the parent header in a context variable). ``ticker.stop()`` or closing the
widget ends the thread.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from decimal import Decimal, InvalidOperation
from typing import Any

import ipywidgets as w

from ..core.billing import US_PER_S, cost_micro
from ..core.i18n import _
from ..core.money import budget as budget_text
from ..core.money import rate as money_rate
from ..core.money import round_micro, status_bar, ticker, to_units
from ..core.protocol import binding_standing
from ..core.wording import budget_kind, per_scope
from .link import DEFAULT_TIMEOUT_S, LinkError, ServerLink, follow_server_language


class StatusError(Exception):
    """The server's status could not be read; the message is shown under the ticker."""


def status_error(error: LinkError) -> StatusError:
    """What the ticker says when the link could not read the status."""
    if error.failure == "http":
        if error.http_status in (401, 403):
            return StatusError(
                _("the server refused the kernel's token (HTTP {status})").format(
                    status=error.http_status
                )
            )
        return StatusError(_("the server answered HTTP {status}").format(status=error.http_status))
    if error.failure == "unreachable":
        return StatusError(_("the server is not reachable ({why})").format(why=error.detail))
    if error.failure in ("broken", "unreadable"):
        return StatusError(
            _("the server's status could not be read ({why})").format(why=error.detail)
        )
    return StatusError(str(error))  # "unexpected": the link's words


def read_status(server: ServerLink) -> dict[str, Any]:
    """The server's status through the kernel's link, or ``StatusError``."""
    try:
        return server.status()
    except LinkError as e:
        raise status_error(e) from None


def fetch_status(base_url: str, token: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """``GET {base_url}gpucost/api/status`` with the kernel's token."""
    return read_status(ServerLink(base_url, token, timeout_s))


def _decimal(value: Any) -> Decimal | None:
    """Money from the wire: a string (exact) or a JSON number (at most six decimals)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        result = Decimal(str(value))
    except InvalidOperation:
        return None
    return result if result.is_finite() else None


class CostTicker(w.VBox):  # type: ignore[misc]  # ipywidgets has no type information
    """A live line ``session $X · $Y/h``, a budget bar, and where the figures come from.

    :param interval_s: seconds between refreshes.
    :param budget_usd: a budget of your own for the bar (else the server's budget in force).
    :param usd_per_hour: price the kernel's session at this rate instead (no server).
    """

    def __init__(
        self,
        *,
        interval_s: float = 1.0,
        budget_usd: float | int | str | Decimal | None = None,
        usd_per_hour: float | int | str | Decimal | None = None,
        **kwargs: Any,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be more than 0, not {interval_s!r}")
        self.interval_s = float(interval_s)
        self.budget = None if budget_usd is None else Decimal(str(budget_usd))
        if self.budget is not None and self.budget <= 0:
            raise ValueError(f"budget_usd must be more than 0, not {budget_usd!r}")
        self.per_hour = None if usd_per_hour is None else Decimal(str(usd_per_hour))
        # in the language the server handed this kernel (without %load_ext too)
        follow_server_language()
        # the server this kernel was started by, read now (not the cached link: a ticker
        # made after the environment changed uses what it says now)
        self.server = (
            ServerLink.from_environment(timeout_s=min(DEFAULT_TIMEOUT_S, 5 * self.interval_s))
            if self.per_hour is None
            else None  # the user's rate: priced here
        )
        self.total = Decimal(0)
        self.rate_per_hour = Decimal(0)
        self.currency_symbol = "$"
        self.budget_share: float | None = None
        self.error: str | None = None
        self.updates = 0

        self.cost = w.HTML(value="…")
        self.bar = w.FloatProgress(
            value=0.0, min=0.0, max=100.0, description=_("budget"), bar_style="success"
        )
        self.budget_label = w.Label(value="")
        self.source = w.Label(value="")
        super().__init__(
            children=[self.cost, w.HBox([self.bar, self.budget_label]), self.source], **kwargs
        )
        self.add_class("jp-gpucost-ticker")
        self._local = self._local_pricing() if self.server is None else None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.refresh()
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="gpucost-ticker", daemon=True
        )
        self._thread.start()

    # -- the figures ------------------------------------------------------------------

    @property
    def budget_usd(self) -> Decimal | None:
        """Deprecated name of :attr:`budget` (the amount is in the session's currency)."""
        return self.budget

    @property
    def usd_per_hour(self) -> Decimal | None:
        """Deprecated name of :attr:`per_hour`."""
        return self.per_hour

    @property
    def total_usd(self) -> Decimal:
        """Deprecated name of :attr:`total`."""
        return self.total

    @property
    def rate_usd_per_hour(self) -> Decimal:
        """Deprecated name of :attr:`rate_per_hour`."""
        return self.rate_per_hour

    def _local_pricing(self) -> tuple[float, Decimal, str]:
        """(kernel start as epoch seconds, rate, label) for pricing the kernel here."""
        import psutil

        started = psutil.Process(os.getpid()).create_time()
        if self.per_hour is not None:
            return started, self.per_hour, _("this kernel since it started, at the rate given")
        from .cell.measure import prices

        p = prices()
        self.currency_symbol = p.currency_symbol
        if p.from_server:
            label = _("no server connection: this kernel since it started, at the server's prices")
        else:
            label = _("no server: catalog prices, this kernel since it started")
            if not p.gpus:
                label += _(" (no GPU here)")
        return started, p.rate_per_hour(), label

    def refresh(self) -> None:
        """Read the figures now and show them (the thread calls this every interval)."""
        with self._lock:
            if self._local is not None:
                started, rate, label = self._local
                elapsed_us = max(0, round((time.time() - started) * US_PER_S))
                total = to_units(round_micro(cost_micro(rate, elapsed_us)))
                self._show(total, rate, None, label)
                return
            assert self.server is not None  # priced here otherwise
            try:
                status = read_status(self.server)
            except StatusError as e:
                self.error = str(e)
                shown = _("; last figures shown") if self.updates else ""
                self.source.value = f"jupyter-gpucost server: {e}{shown}"
                return
            self.error = None
            self.currency_symbol = str(status.get("currency_symbol") or "$")
            total = _decimal(status.get("total_usd", status.get("cost_usd"))) or Decimal(0)
            rate = _decimal(status.get("rate_usd_per_hour")) or Decimal(0)
            simulated = bool((status.get("telemetry") or {}).get("simulated"))
            label = _("the jupyter-gpucost server: this session, all kernels") + (
                _(" (simulated GPUs)") if simulated else ""
            )
            self._show(total, rate, status.get("budget"), label)

    def _show(
        self, total: Decimal, rate: Decimal, budget: dict[str, Any] | None, label: str
    ) -> None:
        sym = self.currency_symbol
        self.total = total
        self.rate_per_hour = rate
        session = _("session {cost}").format(cost=ticker(total, sym))
        # the hourly rate by its own rule, as the status bar writes it
        self.cost.value = f"<b>{session}</b> · {money_rate(rate, sym)}"
        share, text = self._budget(total, budget)
        self.budget_share = share
        if share is None:
            self.bar.layout.display = "none"
        else:
            self.bar.layout.display = None
            self.bar.value = min(100.0, share * 100)
            self.bar.bar_style = (
                "danger" if share >= 1 else "warning" if share >= 0.8 else "success"
            )
        self.budget_label.value = text
        self.source.value = label
        self.updates += 1

    def _budget(self, total: Decimal, budget: dict[str, Any] | None) -> tuple[float | None, str]:
        sym = self.currency_symbol
        if self.budget is not None:
            share = float(total / self.budget)
            text = _("{spent} of {amount} (yours)")
            return share, text.format(
                spent=status_bar(total, sym), amount=budget_text(self.budget, sym)
            )
        standing = binding_standing(budget)
        if standing is None:
            return None, _("no budget")
        kind = str(standing.get("kind", ""))
        amount = _decimal(standing.get("amount_usd"))
        spent = _decimal(standing.get("spent_usd"))
        if amount is None or amount <= 0 or spent is None:
            return None, _("no budget")
        share = float(spent / amount)
        scope = standing.get("scope")
        shown = budget_text(amount, sym)
        text = _("{spent} of {budget} ({kind})")
        return share, text.format(
            spent=status_bar(spent, sym),
            budget=per_scope(shown, str(scope)) if scope else shown,
            kind=budget_kind(kind),
        )

    # -- the thread -------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.refresh()
            except Exception as e:  # keep ticking; say what went wrong, never print
                self.error = f"{type(e).__name__}: {e}"
                try:
                    self.source.value = f"ticker error: {self.error}"
                except Exception:
                    return

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop refreshing (the last figures stay shown)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def close(self) -> None:
        self.stop()
        super().close()


__all__ = ["CostTicker", "StatusError", "fetch_status"]
