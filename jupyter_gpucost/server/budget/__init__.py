"""Budgets: the policy state machine, what it does at the budget, and its routes."""

from __future__ import annotations

from .actions import HubTarget
from .controller import EVENT_SCHEMA_ID, BudgetConfig, BudgetController, ServiceSpend
from .policy import Budget, BudgetError, BudgetPolicy, Standing

__all__ = [
    "EVENT_SCHEMA_ID",
    "Budget",
    "BudgetConfig",
    "BudgetController",
    "BudgetError",
    "BudgetPolicy",
    "HubTarget",
    "ServiceSpend",
    "Standing",
]
