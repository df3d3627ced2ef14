"""Reporting this server's spend to the hub service, and taking its budgets back.

When the hub runs the gpucost service (``GPUCOST_HUB_URL`` in the spawner's environment, or
``c.GpuCost.hub_url``), every ``c.GpuCost.hub_report_interval_s`` seconds the server posts a
:class:`~jupyter_gpucost.core.hub_protocol.SpendReport` to ``{hub_url}api/report`` with its
own hub token (``Authorization: token $JUPYTERHUB_API_TOKEN``), and hands the service's
:class:`~jupyter_gpucost.core.hub_protocol.HubReply` to the budget: the hub's budgets are
shown locked ("set by your hub admin") with the spend the hub counts, and a reply with
``stop_at`` starts the countdown, which saves the open notebooks before the hub stops the
server. A report also says how many kernels are executing and each GPU's used and idle time
in the session: the hub's idle policy reads them (a reply with ``stop_kind: "idle"`` is a
stop for idle GPUs, which anything run cancels).

A user can turn reporting off (``c.GpuCost.hub_url = ""`` in their own config): the hub
service bills what it allocated and stops the server at its budget whatever the server
says, so reporting is what the user sees, not what the hub enforces.

The request runs in the reporter's one thread, never on the event loop, with a timeout, on
one kept-alive HTTP/1.1 connection (``http.client``, no proxy: the service is on the hub's
network): a report every few seconds from every server would otherwise be a new TCP (and
TLS) connection each, which is most of what the service spends on it. A connection the
service closed while idle is opened again before the report; one that drops as the report
is sent is opened again once, and the report sent again (it is cumulative: the service
keeps the most it was told). A failure is logged once per kind until a report gets through
again; the token is never logged. Pure apart from that thread: no tornado.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import os
import select
import socket
import ssl
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Protocol
from urllib.parse import urlsplit

from ..core.hub_protocol import (
    ENV_HUB_URL,
    REPORT_PATH,
    GpuTime,
    HubReply,
    KernelSpend,
    ProtocolError,
    ReportedInterruption,
    SpendReport,
)
from ..core.i18n import N_, _
from ..core.meter import MeterSnapshot
from ..core.money import round_micro
from .gpu_use.attribution import Attribution

#: seconds a report may take before it counts as failed
REPORT_TIMEOUT_S = 5.0
#: the most of a reply read (a reply is a few hundred bytes)
MAX_REPLY_BYTES = 1 << 20


class HubLinkError(Exception):
    """A report that did not get through; ``kind`` groups failures for logging once.
    ``str()`` is the English sentence (for the log); :meth:`translated` the one the
    panel shows, in the server's language (``message`` is a message of the catalog,
    ``values`` what it fills in)."""

    def __init__(self, kind: str, message: str, **values: object) -> None:
        super().__init__(message.format(**values) if values else message)
        self.kind = kind
        self.message = message
        self.values = values

    def translated(self) -> str:
        text = _(self.message)
        return text.format(**self.values) if self.values else text


#: why a report did not get through, as the panel says it (translated where shown)
UNREACHABLE = N_("the hub service cannot be reached ({error})")


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
    kernels_busy: int | None = None,
    interruptions: tuple[ReportedInterruption, ...] = (),
) -> SpendReport:
    """What this server has spent in its session, as the protocol says it; with the
    kernels executing now and each GPU's used and idle time, for the hub's idle policy."""
    energy_j = snapshot.energy_j
    kernels: tuple[KernelSpend, ...] = ()
    idle = snapshot.idle_micro
    if attribution is not None:
        kernels = tuple(
            KernelSpend(k.info.id[:200], k.info.name[:200], k.cost_micro)
            for k in attribution.kernels
        )
    rate = round_micro(Fraction(snapshot.rate_per_hour) * 1_000_000 / 3600)
    return SpendReport(
        session_id=session_id,
        server_name=server_name,
        started=snapshot.started,
        sent=sent,
        cost_micro_usd=snapshot.cost_micro,
        # the protocol refuses more idle than cost: never send it, whatever the rounding
        idle_micro_usd=min(max(0, idle), snapshot.cost_micro),
        rate_micro_usd_per_s=rate,
        energy_wh=None if energy_j is None else energy_j / 3600,
        cells=cells,
        kernels=kernels,
        gpu_models=tuple(sorted({g.name for g in snapshot.gpus})),
        kernels_busy=kernels_busy,
        gpu_time=tuple(GpuTime(max(0, g.used_us), max(0, g.idle_us)) for g in snapshot.gpus),
        interruptions=interruptions,
    )


def reported_interruptions(
    document: Mapping[str, object] | None, session_id: str
) -> tuple[ReportedInterruption, ...]:
    """The spot interruptions to tell the hub of, from the interruption's status document
    (``{"current": this session's, once recorded; "last": the previous session's, from the
    ledger}``). Each one's id is its session and time, so that it is the same in every
    report and after a restart: the hub counts it once. A record that does not follow the
    protocol is left out, never sent."""
    if not document:
        return ()
    found: list[ReportedInterruption] = []
    for key, session in (("last", None), ("current", session_id)):
        record = document.get(key)
        if not isinstance(record, Mapping) or "at" not in record:
            continue  # none, or this session's still being answered (not recorded yet)
        owner = session or record.get("session_id")
        raw = {
            "id": f"{owner}@{record.get('at')}",
            "at": record.get("at"),
            "provider": record.get("provider"),
            "market": record.get("market") or "",
            "lost_micro_usd": record.get("lost_micro_usd"),
            "session_micro_usd": record.get("session_cost_micro_usd"),
        }
        try:
            item = ReportedInterruption.from_json(raw, key)
        except ProtocolError:
            continue
        if owner and item.interruption_id not in {f.interruption_id for f in found}:
            found.append(item)
    return tuple(found)


#: the service dropped a kept-alive connection (closed it, or restarted): open a new one
DROPPED = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
)


def _readable(sock: socket.socket) -> bool:
    """Is there something to read on an idle connection (the service closed it)?"""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    ready, _, _ = select.select([sock], [], [], 0)
    return bool(ready)


class ReportConnection:
    """One kept-alive connection to the service's report URL, opened when first needed.

    Not thread-safe: the reporter uses it from its one worker thread only, and closes it
    there when it stops."""

    def __init__(self) -> None:
        self._conn: http.client.HTTPConnection | None = None
        self._target: tuple[str, str, int | None] | None = None

    def _connection(self, url: str) -> tuple[http.client.HTTPConnection, bool]:
        """The connection for ``url``, and whether it was used before (kept alive)."""
        split = urlsplit(url)
        target = (split.scheme, split.hostname or "", split.port)
        conn = self._conn
        if conn is not None and target != self._target:
            self.close()
            conn = None
        if conn is not None and conn.sock is not None and _readable(conn.sock):
            # an idle kept-alive connection has nothing to read unless it was closed
            self.close()
            conn = None
        if conn is None:
            scheme, host, port = target
            if scheme == "https":
                conn = http.client.HTTPSConnection(
                    host, port, timeout=REPORT_TIMEOUT_S, context=ssl.create_default_context()
                )
            else:
                conn = http.client.HTTPConnection(host, port, timeout=REPORT_TIMEOUT_S)
            self._conn, self._target = conn, target
        return conn, conn.sock is not None

    def post(self, config: HubLinkConfig, report: SpendReport) -> HubReply:
        """POST one report; the service's reply (blocking: run it in the worker thread)."""
        split = urlsplit(config.report_url)
        path = (split.path or "/") + (f"?{split.query}" if split.query else "")
        body = json.dumps(report.to_json()).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"token {config.token}"}
        for attempt in (1, 2):
            conn, reused = self._connection(config.report_url)
            try:
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read(MAX_REPLY_BYTES)
                if not response.isclosed():  # a reply this large: do not read on
                    self.close()
            except DROPPED as e:
                self.close()
                if reused and attempt == 1:
                    continue  # closed by the service between two reports: once more, anew
                raise HubLinkError("unreachable", UNREACHABLE, error=e) from None
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise HubLinkError("unreachable", UNREACHABLE, error=e) from None
            break
        if not 200 <= response.status < 300:
            raise HubLinkError(
                f"http-{response.status}",
                N_("the hub service answered {status} {reason}"),
                status=response.status,
                reason=response.reason,
            )
        try:
            return HubReply.from_json(json.loads(data))
        except (ValueError, ProtocolError) as e:
            raise HubLinkError(
                "protocol", N_("the hub service's reply is not valid: {error}"), error=e
            ) from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def post_report(
    config: HubLinkConfig, report: SpendReport, connection: ReportConnection | None = None
) -> HubReply:
    """POST one report on ``connection`` (kept open), or on a connection of its own (closed
    after); the service's reply (blocking: run it in a thread)."""
    if connection is not None:
        return connection.post(config, report)
    own = ReportConnection()
    try:
        return own.post(config, report)
    finally:
        own.close()


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
        send: Callable[[HubLinkConfig, SpendReport], HubReply] | None = None,
    ) -> None:
        self.config = config
        self.report = report
        self.sink = sink
        self.log = log
        # touched by the one worker thread only: it posts on it, and closes it at stop
        self.connection = ReportConnection()
        self.send = self.connection.post if send is None else send
        self.last_reply: HubReply | None = None
        self.failing: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpucost-hub")
        self._stopped = False

    def start(self) -> None:
        if not self.config.token:
            self.log.warning(
                "jupyter-gpucost: %s is set but JUPYTERHUB_API_TOKEN is not: spend is not "
                "reported to the hub service",
                ENV_HUB_URL,
            )
            # shown where the hub's answer would be, so the link does not look connected
            self.sink.apply_hub_reply(
                None, _("no JUPYTERHUB_API_TOKEN: spend is not reported to the hub service")
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
        if not self._stopped:
            self._stopped = True
            # after a report still under way in the worker thread, in that thread
            self._pool.submit(self.connection.close)
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
            # the panel's line, in the server's language (the log above stays English)
            self.sink.apply_hub_reply(None, e.translated())
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
