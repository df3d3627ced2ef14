"""Where the locked budget's settings come from, and which wins when two sources set them.

Under JupyterHub the admin's budget comes from the spawner's environment
(``GPUCOST_BUDGET_*``); the user owns the server's config (their own
``jupyter_server_config.py``, the command line), whose ``c.GpuCost.*`` traits could
otherwise replace it. So the environment is a floor the config cannot go below; the config
can only make the budget stricter:

* **amount** (``GPUCOST_BUDGET_USD`` / ``c.GpuCost.hard_budget_usd``): with both, the lower
  amount is in force and the budget says which source set it; 0 in the config is "none",
  not "unlimited", so it cannot remove the spawner's budget;
* **scope** (``GPUCOST_BUDGET_SCOPE`` / ``c.GpuCost.hard_budget_scope``): it goes with its
  amount. A config amount wins only in the spawner's scope: a lower amount in another
  scope (say 1 dollar a session against 2.50 a month) is not stricter, so the spawner's
  budget holds;
* **grace** (``GPUCOST_BUDGET_GRACE_S`` / ``c.GpuCost.budget_grace_s``): the shorter;
* **action** (``GPUCOST_BUDGET_ACTION`` / ``c.GpuCost.budget_action``): the stronger, in the
  order interrupt < shutdown < stop-server.

Outside JupyterHub (no environment) the config alone applies, as before. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ...core.i18n import N_
from ...core.money import exact, to_units
from .policy import ACTIONS, Budget, Scope

T = TypeVar("T")

#: the budget's ``source`` for each place a locked budget can come from
#: (in English: each is translated where it is shown, :mod:`.payload`)
SPAWNER_LABEL = N_("set by the spawner (GPUCOST_BUDGET_USD)")
CONFIG_LABEL = N_("set in the server's config (c.GpuCost.hard_budget_usd)")


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One setting as the environment and as the trait (config or the env default) hold it."""

    #: ``None``: the environment does not set it
    env: T | None
    trait: T


@dataclass(frozen=True)
class Resolved:
    hard: Budget | None
    grace_s: float
    action: str
    #: what the config asked for that is not in force (logged at start-up)
    overruled: tuple[str, ...] = ()


def resolve(
    amount_micro: Setting[int],
    scope: Setting[Scope],
    grace_s: Setting[float],
    action: Setting[str],
) -> Resolved:
    """The settings in force: the environment's unless the config's is stricter."""
    notes: list[str] = []
    env_amount = amount_micro.env or 0
    env_scope: Scope = scope.env or "session"
    hard: Budget | None = None
    if env_amount > 0:
        hard = Budget("hard", env_amount, env_scope, SPAWNER_LABEL)
        trait = amount_micro.trait
        if trait and trait != env_amount:
            if trait < env_amount and scope.trait == env_scope:
                hard = Budget("hard", trait, env_scope, CONFIG_LABEL)
            else:
                notes.append(
                    f"c.GpuCost.hard_budget_usd ({_exact(trait)} a {scope.trait}) is not "
                    f"stricter than the spawner's GPUCOST_BUDGET_USD ({_exact(env_amount)} a "
                    f"{env_scope}): the spawner's is in force"
                )
        elif scope.trait != env_scope:
            notes.append(
                f"c.GpuCost.hard_budget_scope = {scope.trait!r} does not change the "
                f"spawner's {env_scope} budget"
            )
    elif amount_micro.trait > 0:
        hard = Budget("hard", amount_micro.trait, scope.trait, CONFIG_LABEL)
    grace = grace_s.trait
    if grace_s.env is not None and grace > grace_s.env:
        notes.append(
            f"c.GpuCost.budget_grace_s = {grace:g} is longer than the spawner's "
            f"GPUCOST_BUDGET_GRACE_S = {grace_s.env:g}: the spawner's is in force"
        )
        grace = grace_s.env
    chosen = action_in_force(action.trait, action.env)
    if chosen != action.trait:
        notes.append(
            f"c.GpuCost.budget_action = {action.trait!r} is weaker than the spawner's "
            f"GPUCOST_BUDGET_ACTION = {action.env!r}: the spawner's is in force"
        )
    return Resolved(hard, grace, chosen, tuple(notes))


def action_in_force(trait: str, env: str | None) -> str:
    """The budget action in force: the setting's, or the spawner's
    ``GPUCOST_BUDGET_ACTION`` where that is stronger."""
    if env is not None and _strength(trait) < _strength(env):
        return env
    return trait


def _strength(action: str) -> int:
    return ACTIONS.index(action) if action in ACTIONS else -1


def _exact(micro: int) -> str:
    return exact(to_units(micro))
