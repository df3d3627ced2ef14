"""Reporting this server's spend to the hub service, and taking its budgets back.

When the hub runs the gpucost service (``GPUCOST_HUB_URL`` in the spawner's environment, or
``c.GpuCost.hub_url``), every ``c.GpuCost.hub_report_interval_s`` seconds the server posts a
:class:`~jupyter_gpucost.core.hub_protocol.SpendReport` to ``{hub_url}api/report`` with its
own hub token (``Authorization: token $JUPYTERHUB_API_TOKEN``), and hands the service's
:class:`~jupyter_gpucost.core.hub_protocol.HubReply` to the budget: the hub's budgets are
shown locked ("set by your hub admin") with the spend the hub counts, and a reply with
``stop_at`` starts the countdown, which saves the open notebooks before the hub stops the
server.

A user can turn reporting off (``c.GpuCost.hub_url = ""`` in their own config): the hub
service bills what it allocated and stops the server at its budget whatever the server
says, so reporting is what the user sees, not what the hub enforces.

The request runs in a thread (``urllib``, no proxy: the service is on the hub's network),
never on the event loop, with a timeout. A failure is logged once per kind until a report
gets through again; the token is never logged. Pure apart from that thread: no tornado.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Protocol

from ..core.hub_protocol import (
    ENV_HUB_URL,
    REPORT_PATH,
    HubReply,
    KernelSpend,
    ProtocolError,
    SpendReport,
)
from ..core.meter import MeterSnapshot
from ..core.money import round_micro
from .attribution import Attribution

#: seconds a report may take before it counts as failed
REPORT_TIMEOUT_S = 5.0
#: the most of a reply read (a reply is a few hundred bytes)
MAX_REPLY_BYTES = 1 << 20


class HubLinkError(Exception):
    """A report that did not get through; ``kind`` groups failures for logging once."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class HubLinkConfig:
    report_url: str
    token: str
    server_name: str
    interval_s: float

    @classmethod
    def from_settings(
        cls, hub_url: str, interval_s: float, environ: Mapping[str, str]
    ) -> HubLinkConfig | None:
        """``None`` when reporting is off (no URL); raises ``ValueError`` naming the setting
        for a URL that is not http(s)."""
        url = hub_url.strip()
        if not url:
            return None
        if not url.startswith(("http://", "https://")):
            raise ValueError(
                f"c.GpuCost.hub_url ({ENV_HUB_URL}) = {url!r} is not valid: use the hub "
                "service's http:// or https:// URL, or leave it empty."
            )
        token = environ.get("JUPYTERHUB_API_TOKEN", "") or environ.get("JPY_API_TOKEN", "")
        return cls(
            report_url=url.rstrip("/") + "/" + REPORT_PATH,
            token=token,
            server_name=environ.get("JUPYTERHUB_SERVER_NAME", ""),
            interval_s=interval_s,
        )


def build_report(
    snapshot: MeterSnapshot,
    attribution: Attribution | None,
    *,
    session_id: str,
    server_name: str,
    cells: int,
    sent: datetime,
) -> SpendReport:
    """What this server has spent in its session, as the protocol says it."""
    energy_j = snapshot.energy_j
    kernels: tuple[KernelSpend, ...] = ()
    idle = snapshot.idle_micro_usd
    if attribution is not None:
        kernels = tuple(
            KernelSpend(k.info.id[:200], k.info.name[:200], k.cost_micro_usd)
            for k in attribution.kernels
        )
    rate = round_micro(Fraction(snapshot.rate_usd_per_hour) * 1_000_000 / 3600)
    return SpendReport(
        session_id=session_id,
        server_name=server_name,
        started=snapshot.started,
        sent=sent,
        cost_micro_usd=snapshot.cost_micro_usd,
        idle_micro_usd=max(0, idle),
        rate_micro_usd_per_s=rate,
        energy_wh=None if energy_j is None else energy_j / 3600,
        cells=cells,
        kernels=kernels,
        gpu_models=tuple(sorted({g.name for g in snapshot.gpus})),
    )


def post_report(config: HubLinkConfig, report: SpendReport) -> HubReply:
    """POST one report; the service's reply (blocking: run it in a thread)."""
    request = urllib.request.Request(
        config.report_url,
        data=json.dumps(report.to_json()).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"token {config.token}"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=REPORT_TIMEOUT_S) as response:
            body = response.read(MAX_REPLY_BYTES)
    except urllib.error.HTTPError as e:
        raise HubLinkError(
            f"http-{e.code}", f"the hub service answered {e.code} {e.reason}"
        ) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise HubLinkError("unreachable", f"the hub service cannot be reached ({reason})") from None
    try:
        return HubReply.from_json(json.loads(body))
    except (ValueError, ProtocolError) as e:
        raise HubLinkError("protocol", f"the hub service's reply is not valid: {e}") from None


class ReplySink(Protocol):
    """Where the hub's answer goes (the budget controller)."""

    def apply_hub_reply(self, reply: HubReply | None, error: str | None) -> None: ...


class HubReporter:
    """Every ``interval_s``: build the report on the loop (in-memory reads), post it in a
    thread, hand the reply to the budget."""

    def __init__(
        self,
        config: HubLinkConfig,
        report: Callable[[], SpendReport],
        sink: ReplySink,
        *,
        log: logging.Logger,
        send: Callable[[HubLinkConfig, SpendReport], HubReply] = post_report,
    ) -> None:
        self.config = config
        self.report = report
        self.sink = sink
        self.log = log
        self.send = send
        self.last_reply: HubReply | None = None
        self.failing: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpucost-hub")

    def start(self) -> None:
        if not self.config.token:
            self.log.warning(
                "jupyter-gpucost: %s is set but JUPYTERHUB_API_TOKEN is not: spend is not "
                "reported to the hub service",
                ENV_HUB_URL,
            )
            # shown where the hub's answer would be, so the link does not look connected
            self.sink.apply_hub_reply(
                None, "no JUPYTERHUB_API_TOKEN: spend is not reported to the hub service"
            )
            return
        self.log.info(
            "jupyter-gpucost: reporting spend to %s every %gs",
            self.config.report_url,
            self.config.interval_s,
        )
        self._task = asyncio.get_event_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._pool.shutdown(wait=False)

    async def _run(self) -> None:
        while True:
            await self.once()
            await asyncio.sleep(self.config.interval_s)

    async def once(self) -> HubReply | None:
        """One report and its reply (``None`` when it failed: logged once per kind)."""
        try:
            report = self.report()
            reply = await asyncio.get_running_loop().run_in_executor(
                self._pool, self.send, self.config, report
            )
        except HubLinkError as e:
            if self.failing != e.kind:
                self.log.warning("jupyter-gpucost: spend not reported to the hub: %s", e)
            self.failing = e.kind
            self.sink.apply_hub_reply(None, str(e))
            return None
        except asyncio.CancelledError:
            raise
        except Exception as e:  # never stop reporting for one bad step
            if self.failing != "internal":
                self.log.exception("jupyter-gpucost: the hub report failed: %s", type(e).__name__)
            self.failing = "internal"
            return None
        if self.failing is not None:
            self.log.info("jupyter-gpucost: spend is reported to the hub again")
            self.failing = None
        self.last_reply = reply
        self.sink.apply_hub_reply(reply, None)
        return reply


def hub_url_default(environ: Mapping[str, str] | None = None) -> str:
    """The service's URL from the spawner's environment (``GPUCOST_HUB_URL``)."""
    return (os.environ if environ is None else environ).get(ENV_HUB_URL, "").strip()


def now_utc() -> datetime:
    return datetime.now(UTC)
