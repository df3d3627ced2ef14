"""Turn the ``GpuCost`` budget traits into a running ``BudgetController``.

The app passes in the parts the budget works with: the spend source
(:class:`~.spend.MeterSpend`), the server's kernels, event bus and stop
(:class:`ServerParts`) and the ledger that keeps its actions (:class:`ActionLedger`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from traitlets import TraitError

from ...core.money import exact, to_units
from ..traits import one_of
from .actions import KernelManager
from .controller import BudgetConfig, BudgetController
from .events import EventLogger
from .parse import parse_amount, parse_scope, parse_thresholds
from .policy import ACTIONS, BudgetError, Scope
from .sources import Resolved, Setting, resolve
from .spend import MeterSpend, SpendSource

IDLE_ACTIONS = ("warn", "act")


def budget_env_default(name: str, fallback: str) -> str:
    """A budget trait's default from the environment (a JupyterHub spawner sets these),
    checked here as a configured value is by the trait's validator; one that is not valid
    is kept as written: ``check_environment`` refuses it at start-up, naming the variable
    (a trait default must not raise)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return fallback
    try:
        return str(validate_budget_trait(ENVIRONMENT[name], raw))
    except TraitError:
        return raw


def budget_env_number(name: str, fallback: str) -> float:
    """A number default from the environment; NaN when it is not a valid one (reported at
    start-up by ``check_environment``)."""
    raw = os.environ.get(name, "").strip() or fallback
    try:
        return float(validate_budget_trait(ENVIRONMENT[name], raw))
    except (TraitError, ValueError):
        return float("nan")


#: environment variable → the trait it gives a default to
ENVIRONMENT = {
    "GPUCOST_BUDGET_USD": "hard_budget_usd",
    "GPUCOST_BUDGET_SCOPE": "hard_budget_scope",
    "GPUCOST_BUDGET_GRACE_S": "budget_grace_s",
    "GPUCOST_BUDGET_ACTION": "budget_action",
}


@dataclass(frozen=True)
class EnvironmentBudget:
    """The budget settings a JupyterHub spawner set in the environment (``None``: unset),
    checked once by :func:`check_environment`."""

    hard_budget_usd: float | None = None
    hard_budget_scope: Scope | None = None
    budget_grace_s: float | None = None
    budget_action: str | None = None


def check_environment(environ: Mapping[str, str]) -> EnvironmentBudget:
    """The budget settings the environment sets, each checked once (a value that is not
    valid raises TraitError naming the variable)."""
    found: dict[str, Any] = {}
    for variable, trait in ENVIRONMENT.items():
        raw = environ.get(variable, "").strip()
        if not raw:
            continue
        try:
            found[trait] = validate_budget_trait(trait, raw)
        except TraitError as e:
            raise TraitError(f"{variable}={raw!r} is not valid ({e})") from None
    return EnvironmentBudget(**found)


def _number(setting: str, value: object, low: float, high: float) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = float("nan")
    if not low <= number <= high:
        raise TraitError(
            f"c.GpuCost.{setting} = {value!r} is not valid: use a number from {low:g} to {high:g}."
        )
    return number


def validate_budget_trait(name: str, value: Any) -> Any:
    """Check one budget trait; the message names the setting and what it accepts."""
    try:
        if name == "hard_budget_usd":
            if float(str(value)) == 0:
                return 0.0
            parse_amount(value, what=f"c.GpuCost.hard_budget_usd = {value!r}")
            return float(value)
        if name == "hard_budget_scope":
            return parse_scope(value, what=f"c.GpuCost.hard_budget_scope = {value!r}")
        if name == "budget_thresholds_pct":
            return list(parse_thresholds(value, what="c.GpuCost.budget_thresholds_pct"))
    except BudgetError as e:
        raise TraitError(f"{e}.") from None
    except (TypeError, ValueError):
        raise TraitError(
            f"c.GpuCost.{name} = {value!r} is not valid: use an amount in the session's "
            "currency (0 for none)."
        ) from None
    if name == "budget_action":
        return one_of(name, value, ACTIONS)
    if name == "idle_gpu_action":
        return one_of(name, value, IDLE_ACTIONS)
    if name == "budget_grace_s":
        return _number(name, value, 0, 86_400)
    if name == "budget_save_timeout_s":
        return _number(name, value, 0, 600)
    if name == "idle_gpu_minutes":
        return _number(name, value, 0, 10_080)
    if name == "idle_gpu_utilization_pct":
        return _number(name, value, 0, 100)
    return value


def _micro_of(value: object) -> int:
    """A validated ``hard_budget_usd`` in micro-units of the session's currency (0: none)."""
    amount = float(str(value))
    return 0 if amount == 0 else parse_amount(repr(amount), what="hard_budget_usd")


@dataclass(frozen=True)
class BudgetTraitValues:
    """The budget traits the environment may also set, as the config gives them (each
    already checked by its trait)."""

    hard_budget_usd: float
    hard_budget_scope: Scope
    budget_grace_s: float
    budget_action: str


def locked_settings(env: EnvironmentBudget, config: BudgetTraitValues) -> Resolved:
    """The hard budget, grace and action in force: the spawner's environment (checked by
    :func:`check_environment`) is a floor the server's config can only make stricter
    (:mod:`.sources`)."""
    return resolve(
        Setting(
            None if env.hard_budget_usd is None else _micro_of(env.hard_budget_usd),
            _micro_of(config.hard_budget_usd),
        ),
        Setting(env.hard_budget_scope, config.hard_budget_scope),
        Setting(env.budget_grace_s, config.budget_grace_s),
        Setting(env.budget_action, config.budget_action),
    )


def check_scope(config: BudgetConfig, spend: SpendSource) -> None:
    """A day's or a month's budget needs the ledger's totals (else TraitError)."""
    hard = config.hard
    if hard is not None and not spend.supports(hard.scope):
        raise TraitError(
            f"c.GpuCost.hard_budget_scope = {hard.scope!r} needs the ledger (today/month "
            "totals), which this server does not have: use 'session'."
        )


def default_state_path(data_dir: str) -> Path:
    """Where the budget's state is kept when ``budget_state_path`` is empty."""
    return Path(data_dir) / "gpucost" / "budget.json"


@dataclass(frozen=True)
class ServerParts:
    """What the budget acts on in the running server."""

    kernel_manager: KernelManager | None = None
    event_logger: EventLogger | None = None
    #: stops the whole server (the ``stop-server`` action without JupyterHub)
    stop_server: Callable[[], None] | None = None


class ActionLedger(Protocol):
    """Where budget actions are kept across sessions (the ledger)."""

    def add_action(self, session_id: str, record: dict[str, Any]) -> None: ...


def start_budget(
    config: BudgetConfig,
    spend: MeterSpend,
    server: ServerParts,
    *,
    ledger: ActionLedger | None,
    session_id: str,
    log: logging.Logger,
) -> BudgetController:
    """Start the budget controller on the running loop."""
    controller = BudgetController(
        config,
        spend,
        kernel_manager=server.kernel_manager,
        event_logger=server.event_logger,
        stop_server=server.stop_server,
        gpu_utilization=spend.gpu_utilization,
        log=log,
    )
    if ledger is not None:
        controller.action_sink = lambda record: ledger.add_action(session_id, record.to_json())
    controller.start()
    for note in config.overruled:
        log.warning("jupyter-gpucost: %s.", note)
    if config.hard is not None:
        log.info(
            "jupyter-gpucost: hard %s budget %s (%s), action %s after %gs%s",
            config.hard.scope,
            exact(to_units(config.hard.amount_micro)),
            config.hard.source,
            config.action,
            config.grace_s,
            " (JupyterHub)" if config.hub else "",
        )
    return controller
