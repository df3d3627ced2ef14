"""When the cloud takes a spot machine back: tell, save, checkpoint, export, record.

The watcher (:mod:`...cloud.interruption`) or, on a Kubernetes spot node
(:mod:`...cloud.node_capacity`), SIGTERM to the server hands over a :class:`Notice` (a
SIGTERM on any other node is a stop, recorded as one); :class:`NoticeResponder` then runs, at
once and in this order, each step bounded so that the ones after it still fit within the
notice:

1. **tell**: a budget event of kind ``interruption`` (every open JupyterLab and Notebook 7
   page shows the seconds left) and the budget's status document (pages that poll);
2. **save**: the budget stop's save path: every connected page saves its notebooks;
3. **checkpoint**: ``notice.json`` in the interruption folder
   (:mod:`...core.interruption_files`); each running training guard calls its
   ``on_interrupt`` and answers with the checkpoint it wrote;
4. **export**: where ``export_on_interrupt`` is set, the checkpoints the guards wrote go
   to the default export target, with the export's manifest;
5. **record**: the ledger keeps the interruption (when, which machine, the session's cost,
   what was spent since the last checkpoint and so lost); the next session shows it.

A step that did not finish in time is said so (``late``), as is one that failed; none is
hidden. The last event (``interruption-done``) lists them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ...cloud.interruption import KUBERNETES_GRACE_S, Notice, NoticeHandler
from ...cloud.node_capacity import spot_node
from ...core import money
from ...core.i18n import _
from ...core.interruption_files import (
    GUARD_PREFIX,
    NOTICE,
    ack_name,
    read_json,
    write_json,
)
from ...core.machine import Machine
from ...core.refusal import Refusal
from ..budget.controller import BudgetController
from ..budget.events import iso
from ..export.jobs import ExportManager
from ..ledger import Ledger
from .interruption_code import CodeKernels, kept_codes, run_code

#: seconds kept free at the end of the notice (the machine may go a little early)
MARGIN_S = 3.0
#: of the time left after saving, the share the guards have for their checkpoints
CHECKPOINT_SHARE = 0.6
#: the ledger's action name for an interruption
LEDGER_ACTION = "interruption"
#: how the clouds are named to the user
PROVIDER_NAMES = {"aws": "AWS", "gcp": "Google Cloud", "azure": "Azure", "kubernetes": "Kubernetes"}


@dataclass
class Step:
    name: str
    #: "done", "late" (did not finish in time), "failed", "skipped"
    state: str
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "state": self.state, "detail": self.detail}


def _under_root(checkpoints: list[str], root_dir: Path) -> list[str]:
    """The checkpoints inside the server's root dir, relative to it (others are never
    exported: an export is confined to the root dir)."""
    root = root_dir.resolve()
    paths: list[str] = []
    for raw in checkpoints:
        path = Path(raw).resolve()
        if path.is_relative_to(root):
            paths.append(path.relative_to(root).as_posix())
    return paths


def _provider_name(provider: str) -> str:
    return PROVIDER_NAMES.get(provider, provider)


def interrupted_line(record: dict[str, Any], symbol: str) -> str:
    """ "interrupted at 14:02 UTC by AWS (spot): $0.41 since the last checkpoint" (the time
    in UTC, which the front end writes in the browser's local time)."""
    try:
        at = datetime.fromisoformat(str(record.get("deadline") or record.get("at")))
        hhmm = at.astimezone(UTC).strftime("%H:%M UTC")
    except ValueError:
        hhmm = "?"
    lost = record.get("lost_micro_usd")
    provider = _provider_name(str(record.get("provider", "")))
    if not isinstance(lost, int):
        return _("interrupted at {time} by {provider} (spot)").format(time=hhmm, provider=provider)
    return _(
        "interrupted at {time} by {provider} (spot): {amount} since the last checkpoint"
    ).format(time=hhmm, provider=provider, amount=money.notice(lost, symbol))


class NoticeResponder:
    """Runs the steps for one notice (a second final notice is ignored)."""

    def __init__(
        self,
        *,
        budget: BudgetController,
        exports: ExportManager | None,
        folder: Path,
        root_dir: Path,
        machine: Machine | None,
        ledger: Ledger | None,
        session_id: str,
        session_cost_micro: Callable[[], int],
        export_on_interrupt: bool,
        save_timeout_s: float,
        currency_symbol: str,
        log: logging.Logger,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        kernels: CodeKernels | None = None,
    ) -> None:
        self.budget = budget
        self.kernels = kernels
        self.exports = exports
        self.folder = folder
        self.root_dir = root_dir
        self.machine = machine
        self.ledger = ledger
        self.session_id = session_id
        self.session_cost = session_cost_micro
        self.export_on_interrupt = export_on_interrupt
        self.save_timeout_s = save_timeout_s
        self.symbol = currency_symbol
        self.log = log
        self.clock = clock
        #: the notice being answered or answered (shown in the budget's status)
        self.current: dict[str, Any] | None = None
        self.task: asyncio.Task[dict[str, Any]] | None = None
        #: the session's cost when the newest checkpoint landed (None: none this session)
        self._checkpoint_cost: int | None = None
        #: called with the ledger's record once the steps are done (the alerts)
        self.listeners: list[Callable[[dict[str, Any]], object]] = []

    # -- handing a notice over ---------------------------------------------------------

    def handler(self, loop: asyncio.AbstractEventLoop) -> NoticeHandler:
        """For the watcher's thread: hands the notice to ``loop``."""

        def on_notice(notice: Notice) -> None:
            loop.call_soon_threadsafe(self.start, notice)

        return on_notice

    def start(self, notice: Notice) -> None:
        if not notice.final:
            self._warn_early(notice)
            return
        if self.task is not None:
            return
        self.task = asyncio.get_running_loop().create_task(self.respond(notice))
        self.task.add_done_callback(self._log_failure)

    def _log_failure(self, task: asyncio.Task[dict[str, Any]]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error(
                "jupyter-gpucost: the interruption's steps failed", exc_info=task.exception()
            )

    def _warn_early(self, notice: Notice) -> None:
        message = _(
            "{provider} may take this spot machine back soon (rebalance recommendation): "
            "save your work and checkpoints now."
        ).format(provider=_provider_name(notice.provider))
        self.budget.events.emit(
            "interruption-warning", message, {"provider": notice.provider, "final": False}
        )

    # -- the steps -------------------------------------------------------------------

    def _left_s(self, deadline: datetime) -> float:
        return (deadline - self.clock()).total_seconds() - MARGIN_S

    async def respond(self, notice: Notice) -> dict[str, object]:
        deadline = notice.deadline or (self.clock() + timedelta(seconds=KUBERNETES_GRACE_S))
        left = max(0.0, self._left_s(deadline))
        provider = _provider_name(notice.provider)
        seconds = int(max(0.0, (deadline - self.clock()).total_seconds()))
        message = _(
            "{provider} is taking this spot machine back in {seconds} s: saving notebooks "
            "and checkpoints now."
        ).format(provider=provider, seconds=seconds)
        self.current = {
            "provider": notice.provider,
            "action": notice.action,
            "seen": iso(notice.seen),
            "deadline": iso(deadline),
            "message": message,
            "steps": [],
        }
        self.budget.events.emit(
            "interruption",
            message,
            {
                "provider": notice.provider,
                "interruption_action": notice.action,
                "deadline": iso(deadline),
                "seconds_left": seconds,
            },
        )
        steps = [Step("tell", "done")]
        steps.append(await self._save(min(self.save_timeout_s, max(1.0, left * 0.25))))
        self.current["steps"] = [s.to_json() for s in steps]
        checkpoint_by = self.clock() + timedelta(
            seconds=max(0.5, self._left_s(deadline) * CHECKPOINT_SHARE)
        )
        step, checkpoints = await self._checkpoint(notice, deadline, checkpoint_by)
        steps.append(step)
        steps.append(await self._codes(checkpoint_by))
        self.current["steps"] = [s.to_json() for s in steps]
        steps.append(await self._export(checkpoints, deadline))
        summary = self._summary(steps)
        record = await self._record(notice, deadline, steps, summary)
        self.current = {**self.current, **record, "steps": [s.to_json() for s in steps]}
        for listener in self.listeners:
            try:
                listener(record)
            except Exception as e:  # an alert never stops the rest
                self.log.warning("jupyter-gpucost: the interruption's listener failed: %s", e)
        self.budget.events.emit(
            "interruption-done",
            summary,
            {"provider": notice.provider, "steps": [s.to_json() for s in steps]},
        )
        return self.current

    async def _save(self, timeout_s: float) -> Step:
        started = time.monotonic()
        answers = await self.budget.saves.request_save("interruption", timeout_s)
        saved = sorted({p for a in answers.values() for p in a.saved})
        failed = sorted({p for a in answers.values() for p in a.failed})
        request = self.budget.saves.request
        expected = 0 if request is None else len(request.expected) + request.pages
        if failed:
            return Step("save", "failed", ", ".join(failed))
        if len(answers) < expected or (expected and time.monotonic() - started >= timeout_s):
            return Step("save", "late", ", ".join(saved))
        if not expected:
            return Step("save", "skipped", _("no page is open to save its notebooks"))
        return Step("save", "done", ", ".join(saved))

    async def _checkpoint(
        self, notice: Notice, deadline: datetime, checkpoint_by: datetime
    ) -> tuple[Step, list[str]]:
        folder = self.folder
        document = {
            "provider": notice.provider,
            "action": notice.action,
            "deadline": iso(deadline),
            "checkpoint_by": iso(checkpoint_by),
        }

        def tell_kernels() -> list[str]:
            write_json(folder / NOTICE, document)
            return sorted(p.name for p in folder.glob(f"{GUARD_PREFIX}*.json"))

        try:
            guards = await asyncio.to_thread(tell_kernels)
        except OSError as e:
            return Step("checkpoint", "failed", str(e)), []
        if not guards:
            return Step("checkpoint", "skipped", _("no training guard is running")), []
        acks: dict[str, dict[str, Any]] = {}
        while True:
            for guard in guards:
                if guard not in acks:
                    ack = await asyncio.to_thread(read_json, folder / ack_name(guard))
                    if ack is not None:
                        acks[guard] = ack
                        if ack.get("ok"):
                            self._checkpoint_cost = self.session_cost()
            if len(acks) == len(guards) or self.clock() >= checkpoint_by:
                break
            await asyncio.sleep(0.1)
        paths = [
            str(a["checkpoint"]) for a in acks.values() if isinstance(a.get("checkpoint"), str)
        ]
        errors = [str(a.get("error")) for a in acks.values() if not a.get("ok")]
        if errors:
            return Step("checkpoint", "failed", "; ".join(errors)), paths
        if len(acks) < len(guards):
            return Step("checkpoint", "late", ", ".join(paths)), paths
        return Step("checkpoint", "done", ", ".join(paths)), paths

    async def _codes(self, by: datetime) -> Step:
        """``%gpucost on-interrupt``'s code, in each kernel that kept some, by ``by``."""
        codes = await asyncio.to_thread(kept_codes, self.folder)
        manager = self.kernels
        if manager is not None:
            running = set(manager.list_kernel_ids())
            codes = {k: c for k, c in codes.items() if k in running}
        if not codes or manager is None:
            return Step("on-interrupt", "skipped", _("no kernel kept code to run"))
        outcomes = await asyncio.gather(
            *(run_code(manager, k, c, by, self.clock, self.log) for k, c in codes.items())
        )
        failed = [o for o in outcomes if o.state == "failed"]
        late = [o for o in outcomes if o.state == "late"]
        if failed:
            return Step("on-interrupt", "failed", "; ".join(o.detail for o in failed))
        if late:
            return Step("on-interrupt", "late", ", ".join(o.kernel_id for o in late))
        return Step("on-interrupt", "done", ", ".join(o.kernel_id for o in outcomes))

    async def _export(self, checkpoints: list[str], deadline: datetime) -> Step:
        if not self.export_on_interrupt or self.exports is None:
            return Step("export", "skipped", _("export_on_interrupt is not set"))
        paths = await asyncio.to_thread(_under_root, checkpoints, self.root_dir)
        if not paths:
            return Step("export", "skipped", _("no checkpoint to export"))
        manager = self.exports
        loop = asyncio.get_running_loop()
        try:
            job = await loop.run_in_executor(
                None, lambda: manager.start(paths, None, user="interruption")
            )
        except Refusal as e:
            return Step("export", "failed", str(e))
        timeout_s = max(0.5, self._left_s(deadline))
        ended = await loop.run_in_executor(None, manager.wait, job.id, timeout_s)
        if ended is None:
            await loop.run_in_executor(None, manager.cancel, job.id)
            return Step("export", "late", ", ".join(paths))
        if ended.state == "done":
            return Step("export", "done", ", ".join(r["url"] for r in ended.results))
        return Step("export", "failed", ended.error or ended.state)

    async def _record(
        self, notice: Notice, deadline: datetime, steps: list[Step], summary: str
    ) -> dict[str, object]:
        cost = self.session_cost()
        lost = cost if self._checkpoint_cost is None else cost - self._checkpoint_cost
        machine = self.machine
        record: dict[str, Any] = {
            "action": LEDGER_ACTION,
            "at": iso(self.clock()),
            "deadline": iso(deadline),
            "provider": notice.provider,
            "interruption_action": notice.action,
            "market": "spot",
            "instance_type": None if machine is None else machine.instance_type or None,
            "instance_id": None if machine is None else machine.instance_id or None,
            "region": None if machine is None else machine.region or None,
            "session_cost_micro_usd": cost,
            "lost_micro_usd": max(0, lost),
            "checkpoint": self._checkpoint_cost is not None,
            "steps": [s.to_json() for s in steps],
            # in the language of its time, as a budget action's (docs/translations.md)
            "message": summary,
        }
        if self.ledger is not None:
            try:
                await asyncio.to_thread(self.ledger.add_action, self.session_id, record)
            except Exception as e:  # the ledger never stops the rest
                self.log.warning("jupyter-gpucost: the interruption is not in the ledger: %s", e)
        return record

    def _summary(self, steps: list[Step]) -> str:
        names = {
            "tell": _("told"),
            "save": _("notebooks saved"),
            "checkpoint": _("checkpoint written"),
            "on-interrupt": _("on-interrupt code run"),
            "export": _("checkpoint exported"),
        }
        states = {
            "done": _("done"),
            "late": _("not finished in time"),
            "failed": _("failed"),
            "skipped": _("skipped"),
        }
        parts = [
            f"{names.get(s.name, s.name)}: {states.get(s.state, s.state)}"
            + (f" ({s.detail})" if s.detail and s.state != "done" else "")
            for s in steps
        ]
        return _("Spot interruption: {steps}").format(steps="; ".join(parts))


def last_interruption(ledger: Ledger | None, session_id: str) -> dict[str, object] | None:
    """The newest interruption of an earlier session, from the ledger (``None``: none)."""
    if ledger is None:
        return None
    try:
        actions = ledger.actions(50)
    except Exception:  # a ledger that cannot be read shows nothing, never fails the page
        return None
    for record in actions:
        if record.get("action") == LEDGER_ACTION and record.get("session_id") != session_id:
            return record
    return None


#: the ledger's action for a SIGTERM that is not a spot interruption
STOPPED_ACTION = "stopped"


def sigterm_is_interruption(
    responder: NoticeResponder, spot: Callable[[], str | None], now: datetime
) -> str | None:
    """Why a SIGTERM in a pod is a spot interruption (a notice already seen, or the label
    that makes the node spot), or ``None``: a stop by the user, the culler or the hub,
    and always so while the budget's own stop is under way or past the time the hub said
    it stops the server."""
    if responder.task is not None or responder.current is not None:
        return "a notice"
    policy = responder.budget.policy
    if policy.state in ("enforcing", "acted"):
        return None
    if policy.deadline is not None and now >= policy.deadline:
        return None
    return spot()


def install_sigterm(
    loop: asyncio.AbstractEventLoop,
    responder: NoticeResponder,
    grace_s: float,
    stop_server: Callable[[], None] | None,
    log: logging.Logger,
    spot: Callable[[], str | None] = spot_node,
) -> bool:
    """Kubernetes drains a spot node by sending the pod SIGTERM, then SIGKILL after its
    grace period: answer as to a notice, then stop the server. Only inside a pod, and
    only on a spot node (:mod:`...cloud.node_capacity`) or after a notice: anywhere else
    SIGTERM is the user's stop, the idle culler's or the hub's, recorded as a stop."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return False

    async def on_term() -> None:
        now = datetime.now(UTC)
        why = sigterm_is_interruption(responder, spot, now)
        if why is None:
            log.warning(
                "jupyter-gpucost: SIGTERM on a node that is not spot (no spot label, no "
                "notice): a stop by the user, the idle culler or the hub, not an interruption"
            )
            await _record_stop(responder, now, log)
        else:
            log.warning("jupyter-gpucost: SIGTERM: saving before the pod goes (%s)", why)
            notice = Notice("kubernetes", "sigterm", now, now + timedelta(seconds=grace_s))
            responder.start(notice)
            if responder.task is not None:
                try:
                    await responder.task
                except Exception:
                    log.exception("jupyter-gpucost: the interruption steps failed")
        if stop_server is not None:
            stop_server()

    def handle() -> None:
        loop.create_task(on_term())

    try:
        loop.add_signal_handler(signal.SIGTERM, handle)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True


async def _record_stop(responder: NoticeResponder, now: datetime, log: logging.Logger) -> None:
    """A SIGTERM that is a stop: in the ledger as one (never as an interruption)."""
    if responder.ledger is None:
        return
    record = {
        "action": STOPPED_ACTION,
        "at": iso(now),
        "signal": "SIGTERM",
        "session_cost_micro_usd": responder.session_cost(),
        # in the language of its time, as a budget action's (docs/translations.md)
        "message": _("Stopped from outside (by the user, the idle culler or the hub)."),
    }
    try:
        await asyncio.to_thread(responder.ledger.add_action, responder.session_id, record)
    except Exception as e:  # the ledger never stops the stop
        log.warning("jupyter-gpucost: the stop is not in the ledger: %s", e)
