"""The agents' tools as an agent reads them: names, descriptions and JSON schemas.

Descriptions are constants of the catalog (``N_``), translated each time the tools are
listed, so an agent reads them in the server's language (JupyterLab's setting) as it is
then. Every input schema refuses properties it does not name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.i18n import N_, _
from ..budget.policy import USER_ACTIONS


@dataclass(frozen=True)
class ToolSpec:
    name: str
    #: what the tool does and when to call it (a catalog constant)
    description: str
    #: property -> (JSON schema without its description, description constant)
    properties: tuple[tuple[str, dict[str, Any], str], ...] = ()
    required: tuple[str, ...] = ()
    #: True: it only reads; False: it changes the session's budget or stops it
    read_only: bool = True

    def input_schema(self) -> dict[str, object]:
        """The JSON schema of the arguments, its descriptions in the server's language."""
        return {
            "type": "object",
            "properties": {
                name: {**schema, "description": _(text)} for name, schema, text in self.properties
            },
            "required": list(self.required),
            "additionalProperties": False,
        }


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "cost_status",
        N_(
            "What this Jupyter session has cost so far on its GPUs, the rate per hour now, "
            "each GPU and its price, the machine and where its prices come from, and the "
            "budget: its limit, what is left and when it stops the session. The same "
            "figures as the status bar. Call it before and after expensive work."
        ),
    ),
    ToolSpec(
        "estimate",
        N_(
            "What running for a duration would cost on this machine at its rate now, and "
            "whether the budget has that much left (fits_budget false: the budget would "
            "stop the run before it ends). Give duration_s, or the cell_id of a cell "
            "already measured in this session to price a run like it. Call it before a "
            "long cell."
        ),
        (
            (
                "duration_s",
                {"type": "number", "exclusiveMinimum": 0, "maximum": 30 * 24 * 3600},
                N_("How long the run would take, in seconds."),
            ),
            (
                "cell_id",
                {"type": "string", "minLength": 1, "maxLength": 200},
                N_("A measured cell's id: its wall time is priced at the rate now."),
            ),
            (
                "notebook_path",
                {"type": "string", "minLength": 1, "maxLength": 1024},
                N_("The notebook of that cell, relative to the server's root (optional)."),
            ),
        ),
    ),
    ToolSpec(
        "cell_costs",
        N_(
            "The most expensive cells and notebooks of this session, or of today, with what "
            "each cost, its wall time and its GPU busy time. Use it to find what to make "
            "cheaper or not to run again."
        ),
        (
            (
                "scope",
                {"type": "string", "enum": ["session", "today"], "default": "session"},
                N_("session: this server's session; today: every session of today."),
            ),
            (
                "limit",
                {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                N_("How many cells and notebooks to list."),
            ),
        ),
    ),
    ToolSpec(
        "set_budget",
        N_(
            "Set a lower budget for this session: the session is stopped (notebooks saved "
            "first) when it has cost this much. It can only lower the limit: an amount at or "
            "above a budget in force (the administrator's, the hub's or the user's) is "
            "refused, and no budget can be raised or removed here."
        ),
        (
            (
                "amount_usd",
                {"type": ["number", "string"]},
                N_(
                    "The new budget, in the session's currency (e.g. 2.50): more than 0, "
                    "below every budget in force, at most 6 decimals."
                ),
            ),
        ),
        required=("amount_usd",),
        read_only=False,
    ),
    ToolSpec(
        "stop_when_done",
        N_(
            "Stop once no kernel is busy any more (the running cells have ended): the "
            "notebooks are saved, then the action is taken, as when a budget is spent. "
            "The user can cancel it in JupyterLab. Call it when the work is finished, so "
            "that the GPUs stop billing."
        ),
        (
            (
                "action",
                {"type": "string", "enum": list(USER_ACTIONS)},
                N_(
                    "interrupt, shutdown (the kernels), stop-server or stop-instance (the "
                    "machine); by default the server's configured budget action."
                ),
            ),
        ),
        read_only=False,
    ),
)

#: the server's instructions to an agent (the initialize answer)
INSTRUCTIONS = N_(
    "jupyter-gpucost prices this Jupyter server's GPUs. Check estimate before a long or "
    "repeated cell, cost_status for what was spent and the budget left, and call "
    "stop_when_done when the work is finished. A budget stops cells run by any client."
)


def find(name: str) -> ToolSpec | None:
    return next((t for t in TOOLS if t.name == name), None)
