"""The running service's read of the cloud's FOCUS bill, every ``focus_interval_s``: in a
daemon thread (never on the event loop, never holding up a shutdown), one at a time, given up after
:attr:`~.traits.FocusSettings.timeout_s`; a refused bill or any other failure is logged and
the next read is tried at the next interval: never fatal to the service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from sqlalchemy.engine import Engine

from ...reconcile.read import BillError
from .run import reconcile
from .traits import FocusSettings

log = logging.getLogger("jupyter_gpucost.hub")


class ScheduledBill:
    """One step per interval (:func:`..runner.every` runs it)."""

    def __init__(self, settings: FocusSettings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine
        #: held while a read runs (a read given up still runs on in its thread)
        self._busy = threading.Lock()

    def _read(self) -> None:
        if not self._busy.acquire(blocking=False):
            log.warning("FOCUS bill: the previous read of %s still runs", self.settings.source)
            return
        try:
            outcome = reconcile(self.engine, self.settings.source)
        except BillError as e:
            log.error("FOCUS bill %s refused, nothing kept: %s", self.settings.source, e)
            return
        finally:
            self._busy.release()
        log.info(
            "FOCUS bill %s: %d days reconciled (%d rows read, %d for other resources)",
            self.settings.source,
            len(outcome.days),
            outcome.bill.rows_read,
            outcome.bill.ignored,
        )

    async def step(self) -> None:
        """One read in a daemon thread of its own (a read still running never holds up the
        service's shutdown), awaited up to the timeout."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def finished() -> None:
            if not done.done():
                done.set_result(None)

        def run() -> None:
            try:
                self._read()
            except Exception:
                log.exception("FOCUS bill %s failed", self.settings.source)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(finished)

        threading.Thread(target=run, name="gpucost-focus-bill", daemon=True).start()
        try:
            await asyncio.wait_for(asyncio.shield(done), self.settings.timeout_s)
        except TimeoutError:
            log.error(
                "FOCUS bill %s: no answer in %.0f s (given up until the next read)",
                self.settings.source,
                self.settings.timeout_s,
            )
