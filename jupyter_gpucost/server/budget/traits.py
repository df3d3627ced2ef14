"""The budget's settings of ``c.GpuCost`` (docs/budgets.md): the admin's hard budget, the
warnings, the grace countdown and the action, idle GPUs, and where the state is kept.

The hard budget, its scope, the grace and the action also come from the environment a
JupyterHub spawner sets (``GPUCOST_BUDGET_*``): those are the traits' dynamic defaults
(checked as a configured value is), and :func:`.setup.locked_settings` keeps the stricter of
the two. The help prints the default in force when neither is set. The app reads these
traits once into a :class:`~.controller.BudgetConfig` (:mod:`..settings`).
"""

from __future__ import annotations

from typing import Any

from traitlets import Float, HasTraits, Int, List, Unicode, default, validate

from .setup import budget_env_default, budget_env_number, validate_budget_trait


class BudgetTraits(HasTraits):
    hard_budget_usd = Float(
        0.0,
        config=True,
        help="The admin's (hard, locked) budget in the session's currency (c.GpuCost.currency), "
        "0 (none) to 1000000 with at most 6 decimals. The GPUCOST_BUDGET_USD environment "
        "variable sets it too (a JupyterHub spawner can set it per user); with both, the "
        "lower is in force (docs/budgets.md).",
    )
    hard_budget_scope = Unicode(
        "session",
        config=True,
        help="What the hard budget counts: 'session' (this server run), 'day' or 'month' "
        "(the last two need the ledger). GPUCOST_BUDGET_SCOPE sets it too; a budget from the "
        "environment keeps the environment's scope.",
    )
    budget_thresholds_pct = List(
        Int(),
        default_value=[50, 80, 95],
        config=True,
        help="Percentages of a budget at which a warning is shown, once each (1 to 99).",
    )
    budget_grace_s = Float(
        120.0,
        config=True,
        help="Seconds of the countdown the user sees before a budget's action, 0 to 86400: it "
        "starts when the money left lasts this long at the current rate, so the action lands "
        "at the budget (shorter when less is left). GPUCOST_BUDGET_GRACE_S sets it when this "
        "is not configured; with both, the shorter is in force.",
    )
    budget_action = Unicode(
        "shutdown",
        config=True,
        help="What is done when a budget runs out, after saving notebooks: 'interrupt' or "
        "'shutdown' the kernels, 'stop-server' (asks JupyterHub, else stops itself) or "
        "'stop-instance' (stops the machine through its cloud, else the server) or "
        "'terminate-instance' (ends an AWS or Lambda instance, deleting its local data: for "
        "an AWS one-time Spot Instance, which cannot be stopped; else the server). "
        "GPUCOST_BUDGET_ACTION sets it when this is not configured; with both, the "
        "stronger is in force.",
    )
    budget_save_timeout_s = Float(
        30.0,
        config=True,
        help="How long to wait for the open JupyterLab pages to save their notebooks, 0 to "
        "600 seconds.",
    )
    idle_gpu_minutes = Float(
        0.0,
        config=True,
        help="Warn when the GPUs have been idle this many minutes while costing money "
        "(no kernel busy, utilisation at most idle_gpu_utilization_pct), 0 (off) to 10080.",
    )
    idle_gpu_action = Unicode(
        "warn",
        config=True,
        help="'warn' only, or 'act': after a grace period, save and take budget_action "
        "(never while a kernel is busy).",
    )
    idle_gpu_utilization_pct = Float(
        5.0,
        config=True,
        help="Utilisation (percent, 0 to 100) at or below which a GPU counts as idle.",
    )
    budget_state_path = Unicode(
        "",
        config=True,
        help="The JSON file keeping the soft budget, fired warnings and actions taken. "
        "Empty: <Jupyter data dir>/gpucost/budget.json.",
    )

    @default("hard_budget_usd")
    def _default_hard_budget(self) -> float:
        return budget_env_number("GPUCOST_BUDGET_USD", "0")

    @default("hard_budget_scope")
    def _default_hard_scope(self) -> str:
        return budget_env_default("GPUCOST_BUDGET_SCOPE", "session")

    @default("budget_grace_s")
    def _default_grace(self) -> float:
        return budget_env_number("GPUCOST_BUDGET_GRACE_S", "120")

    @default("budget_action")
    def _default_action(self) -> str:
        return budget_env_default("GPUCOST_BUDGET_ACTION", "shutdown")

    @validate(
        "hard_budget_usd",
        "hard_budget_scope",
        "budget_thresholds_pct",
        "budget_grace_s",
        "budget_action",
        "budget_save_timeout_s",
        "idle_gpu_minutes",
        "idle_gpu_action",
        "idle_gpu_utilization_pct",
    )
    def _check_budget(self, proposal: dict[str, Any]) -> Any:
        return validate_budget_trait(proposal["trait"].name, proposal["value"])
