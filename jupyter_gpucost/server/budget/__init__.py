"""Budgets: the policy state machine, what it does at the budget, and its routes.

* :mod:`.policy`: the pure state machine (budgets, standings, thresholds, grace);
* :mod:`.spend`: what the budget reads (session spend, day and month from the ledger);
* :mod:`.controller`: the tick loop on the event loop, the kept state;
* :mod:`.enforce`: save → export → act at the budget;
* :mod:`.actions`: interrupting or shutting down kernels, asking JupyterHub to stop;
* :mod:`.record`: the typed record of an action, to and from JSON;
* :mod:`.messages`: the sentences a person reads;
* :mod:`.events`: the event bus; :mod:`.payload`: the API document;
* :mod:`.idle`: how long the GPUs have cost money doing nothing;
* :mod:`.store`: the state file; :mod:`.traits`: the settings; :mod:`.setup`: traits to a
  running controller.

May import: the server's base (:mod:`..inputs`, :mod:`..traits`, ...), :mod:`..ledger`,
:mod:`..record` (the session's spend), the service's layer and :mod:`..export`,
``jupyter_gpucost.core``; its :mod:`.handlers` also the base handler (:mod:`..web`). Never
:mod:`..notify`, :mod:`..machine`, :mod:`..spot` or the app.
"""

from __future__ import annotations

from .actions import HubTarget
from .controller import BudgetConfig, BudgetController
from .events import EVENT_SCHEMA_ID
from .policy import Budget, BudgetError, BudgetPolicy, Standing
from .record import ActionRecord
from .spend import LedgerPeriods, MeterSpend, SpendSource

__all__ = [
    "EVENT_SCHEMA_ID",
    "ActionRecord",
    "Budget",
    "BudgetConfig",
    "BudgetController",
    "BudgetError",
    "BudgetPolicy",
    "HubTarget",
    "LedgerPeriods",
    "MeterSpend",
    "SpendSource",
    "Standing",
]
