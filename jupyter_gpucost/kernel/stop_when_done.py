"""``%gpucost stop-when-done``: when this cell ends (finishes or fails), stop.

The server then runs a budget stop's countdown (which the user can cancel in JupyterLab),
saves the open notebooks, exports the checkpoints configured for a budget stop
(``c.GpuCost.export_on_budget_paths``) and takes the action: by default ``stop-instance``,
the machine stopped through its cloud (the server is stopped instead when that fails).
A training loop asks the same when it ends: ``guard(..., stop_when_done="stop-instance")``
or ``request_stop()``.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ..core.i18n import N_, _
from .auto import Shell
from .commands.usage import MagicParser, usage_of
from .link import LinkError, link

USAGE = usage_of("stop-when-done")
ACTIONS = ("stop-instance", "stop-server", "shutdown", "interrupt")
NO_SERVER = N_(
    "stopping is done by the jupyter-gpucost server extension, and this kernel was not "
    "started by a Jupyter server that has it"
)


def request_stop(action: str | None = "stop-instance", reason: str = "done") -> str:
    """Ask the server to stop now, with the countdown and cancel of a budget stop; the
    sentence to show. Raises ``LinkError`` when the server cannot be asked."""
    server = link()
    if server is None:
        raise LinkError(_(NO_SERVER), "unreachable")
    state = server.request_stop(action, reason)
    grace = state.get("grace") or {}
    ends = grace.get("ends")
    what = action or _("the configured action")
    if ends:
        text = _(
            "gpucost: stopping at {time} UTC ({action}): notebooks are saved first; cancel "
            "the countdown in JupyterLab."
        )
        return text.format(time=str(ends)[11:19], action=what)
    text = _(
        "gpucost: stopping ({action}): notebooks are saved first; cancel the countdown in "
        "JupyterLab."
    )
    return text.format(action=what)


class StopWhenDone:
    """Fires once, after the cell that asked for it (finished or failed)."""

    def __init__(self, shell: Shell, action: str) -> None:
        self.shell = shell
        self.action = action

    def post_run_cell(self, result: Any) -> None:
        self.cancel()
        failed = getattr(result, "error_in_exec", None) is not None
        try:
            said = request_stop(self.action)
            print(_("gpucost: the cell failed. {then}").format(then=said) if failed else said)
        except LinkError as e:
            print(_("gpucost: could not ask the server to stop: {error}").format(error=e))

    def cancel(self) -> None:
        if self.post_run_cell in self.shell.events.callbacks["post_run_cell"]:
            self.shell.events.unregister("post_run_cell", self.post_run_cell)
        if getattr(self.shell, "gpucost_stop_when_done", None) is self:
            self.shell.gpucost_stop_when_done = None


def stop_when_done(shell: Shell, words: list[str]) -> None:
    """``%gpucost stop-when-done on [--action ...]``, ``... off``, or alone: the state."""
    pending: StopWhenDone | None = getattr(shell, "gpucost_stop_when_done", None)
    if not words:  # the state, never an action
        if pending is None:
            print(_("gpucost: nothing will be stopped when this cell ends."))
        else:
            text = _("gpucost: when this cell ends: save, export, then {action}.")
            print(text.format(action=pending.action))
        return
    if words[0] == "on":
        words = words[1:]
    if words == ["off"]:
        if pending is not None:
            pending.cancel()
        print(_("gpucost: nothing will be stopped when this cell ends."))
        return
    parser = MagicParser("%gpucost stop-when-done", USAGE)
    parser.add_argument("--action", default="stop-instance", choices=ACTIONS)
    args = parser.parse_args(words)
    if link() is None:
        raise UsageError(_(NO_SERVER))
    if pending is not None:
        pending.cancel()
    hook = StopWhenDone(shell, args.action)
    shell.gpucost_stop_when_done = hook
    shell.events.register("post_run_cell", hook.post_run_cell)
    text = _(
        "gpucost: when this cell ends (finished or failed): save, export, then {action} "
        "(a countdown you can cancel in JupyterLab)."
    )
    print(text.format(action=args.action))
