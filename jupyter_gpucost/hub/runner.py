"""The service's event loop: serve the endpoints, poll the Hub, flush the ledger, and on
SIGTERM or SIGINT flush once more before exiting. Takes the checked settings
(:class:`~.settings.HubSettings`), never the app."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import secrets
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse
from zoneinfo import ZoneInfo

from ..alerts.dispatch import AlertDispatcher, DispatchSettings
from ..core.currency import symbol as currency_symbol
from .activity import UserServer
from .alerting import HubAlerts
from .cluster.prometheus import Prometheus
from .cluster.usage import ClusterUsage
from .ledger.placement import PlacementLedger
from .reconcile.schedule import ScheduledBill
from .service import HubService
from .settings import HubSettings
from .web import handlers
from .web.hubapi import HubApi, HubApiError
from .web.ratelimit import RateLimit
from .web.server import listen
from .wiring import Parts, build

log = logging.getLogger("jupyter_gpucost.hub")

#: how long a worker thread keeps the interpreter while the event loop waits for it
REPORT_SWITCH_S = 0.001
#: new objects the garbage collector lets pile up before it runs (Python's default: 700)
GC_YOUNG_THRESHOLD = 20_000


def now_utc() -> datetime:
    return datetime.now(UTC)


def today_in(tz: ZoneInfo) -> Callable[[], date]:
    return lambda: datetime.now(tz).date()


def cookie_secret(data_dir: Path) -> bytes:
    """The pages' cookie secret, kept in the service's directory (mode 600) so a restart
    keeps everyone logged in."""
    path = data_dir / "cookie_secret"
    if path.exists():
        return bytes.fromhex(path.read_text().strip())
    secret = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret.hex())
    return secret


async def every(
    seconds: float, what: str, step: Callable[[], Awaitable[None]], stop: asyncio.Event
) -> None:
    """Run ``step`` every ``seconds`` until ``stop``; an error is logged, not fatal."""
    while not stop.is_set():
        try:
            await step()
        except HubApiError as e:
            log.error("%s: %s", what, e)
        except Exception:
            log.exception("%s failed", what)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)


def hub_alerts(settings: HubSettings, parts: Parts, base_url: str) -> HubAlerts | None:
    """The alerts of ``c.GpuCostHub.notify`` (``None``: no targets at all)."""
    if settings.notify.empty:
        return None
    # the keys sent are in the ledger (a hub without one, in its tests: a file)
    dispatcher = AlertDispatcher(
        DispatchSettings(state_path=parts.data_dir / "alerts.json"),
        log=log,
        memory=parts.alert_keys,
    )
    return HubAlerts(
        settings.notify,
        dispatcher,
        tz=parts.tz,
        currency=parts.currency,
        symbol=currency_symbol(parts.currency),
        link=base_url.rstrip("/") + "/admin",
    )


def alert_after_poll(alerts: HubAlerts, service: HubService, stopped: Sequence[UserServer]) -> None:
    """After a poll (a worker thread): thresholds reached, and the stops just asked."""
    now = now_utc()
    state = service.state
    alerts.after_poll(((s.row, s.budgets) for s in state.values()), service.groups_of, now)
    reclaim = service.reclaim
    if reclaim is not None and reclaim.enabled:
        for weighed in state.values():
            warning = reclaim.warning(weighed.row)
            if warning is not None:
                groups = service.groups_of.get(weighed.row.user, ())
                alerts.idle(weighed.row, warning.since, groups, now)
    rows = service.rows
    for key in stopped:
        row = rows.get(key)
        if row is None:
            continue
        standing = state.get(row.server_id)
        budget = standing is not None and standing.stop_at is not None
        spent = [b for b in standing.budgets if b.exceeded] if standing is not None else []
        groups = service.groups_of.get(row.user, ())
        plan = standing.plan if standing is not None else None
        alerts.stopped(row, "budget" if budget else "idle", spent, groups, now, plan)


#: how often each user's day is compared with their usual one (seconds)
SPIKES_EVERY_S = 600.0


def alert_spikes(alerts: HubAlerts, service: HubService) -> None:
    """Each user's spend today against their usual day (a worker thread: one query)."""
    now = now_utc()
    since = now.astimezone(alerts.tz).date() - timedelta(days=14)
    alerts.spikes(service.ledger.daily(since, None, now), service.groups_of, now)


def web_context(settings: HubSettings, parts: Parts, hub: HubApi) -> handlers.HandlerContext:
    """What the pages and the report route share: the service, the Hub's API and its
    OAuth, who is an admin, the report's limits, the alerts and the templates."""
    web_settings = settings.web
    auth = handlers.hub_auth(
        web_settings.hub_api_url,
        web_settings.hub_api_token,
        web_settings.base_url,
        web_settings.identity_cache_s,
    )
    return handlers.HandlerContext(
        service=parts.service,
        hub=hub,
        hub_auth=auth,
        now=now_utc,
        today=today_in(parts.tz),
        service_token=web_settings.hub_api_token,
        admin_users=web_settings.admin_users,
        admin_groups=web_settings.admin_groups,
        hub_admins_are_admins=web_settings.hub_admins_are_admins,
        max_report_bytes=web_settings.max_report_bytes,
        templates=handlers.templates(currency_symbol(parts.currency)),
        report_limit=RateLimit(web_settings.report_rate_per_s, web_settings.report_burst),
        alerts=hub_alerts(settings, parts, web_settings.base_url),
        requests=parts.requests,
        requests_per_week=settings.allowances.requests_per_week,
    )


def tune_for_reports() -> None:
    """After start-up, before serving: the interpreter set so that a report does not wait
    behind the poll's work."""
    # what start-up made lives as long as the process: keep it out of the collector's scans
    gc.freeze()
    # each poll makes thousands of objects that live until the next one (the Hub's user
    # models, every server's figures), which at Python's default threshold set off many
    # collections a poll, some of them of every generation; a report's objects die young,
    # before any collection sees them (docs/benchmarks.md: about 0.06 of the CPU ratio)
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    # the poll's sync and the flush run in worker threads, holding the interpreter while
    # they compute; the event loop gets it back at the switch interval (5 ms by default)
    # after each socket call of a report: 1 ms keeps a report's wait behind them short
    sys.setswitchinterval(min(sys.getswitchinterval(), REPORT_SWITCH_S))


def hub_poll(
    service: HubService, hub: HubApi, alerts: HubAlerts | None
) -> Callable[[], Awaitable[None]]:
    """One poll of the Hub: the ledger, budgets and stops, then the alerts it calls for."""

    async def poll() -> None:
        result = await service.poll(hub, now_utc)
        if alerts is not None:
            await asyncio.to_thread(alert_after_poll, alerts, service, result.stopped)
        if result.opened or result.closed or result.stopped:
            log.info(
                "poll: %d opened, %d closed, %d stopped, %d running (%.3f s)",
                result.opened,
                result.closed,
                len(result.stopped),
                len(service.rows),
                result.seconds,
            )

    return poll


def watch_cluster(
    settings: HubSettings, parts: Parts, stop: asyncio.Event
) -> tuple[asyncio.Task[None], Prometheus] | None:
    """GPU use from the cluster's Prometheus (``c.GpuCostHub.prometheus_url``): the
    service's :class:`ClusterUsage` and its task (``None``: not configured)."""
    if parts.cluster is None or parts.usage_ledger is None or not parts.billing:
        return None
    service = parts.service
    cluster = parts.cluster
    prometheus = Prometheus(cluster.url, timeout_s=cluster.timeout_s, auth=cluster.auth)
    usage = ClusterUsage(
        cluster,
        prometheus,
        parts.usage_ledger,
        billing=parts.billing,
        tz=parts.tz,
        max_gpus=settings.billing.max_gpus_per_server,
        placement=PlacementLedger(parts.usage_ledger.engine),
    )
    service.cluster = usage
    if service.reclaim is not None:
        # a DCGM reading holds until the next poll's answer (or its failure)
        service.reclaim.dcgm_stale_s = max(
            service.reclaim.dcgm_stale_s, 2 * cluster.interval_s + cluster.timeout_s
        )

    async def ask_cluster() -> None:
        await usage.poll(service, now_utc())

    log.info("GPU use from %r every %.0f s", cluster, cluster.interval_s)
    task = asyncio.create_task(
        every(cluster.interval_s, "GPU use from Prometheus", ask_cluster, stop)
    )
    return task, prometheus


def read_bills(
    settings: HubSettings, service: HubService, stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """The cloud's FOCUS bill (``c.GpuCostHub.focus_source``) read on its schedule."""
    focus = settings.focus
    if focus is None or service.billed is None:
        return []
    bill = ScheduledBill(focus, service.billed.engine)
    log.info("FOCUS bill from %s every %.0f s", focus.source, focus.interval_s)
    return [asyncio.create_task(every(focus.interval_s, "FOCUS bill", bill.step, stop))]


async def run(settings: HubSettings) -> None:
    parts = build(settings)
    service = parts.service
    web_settings = settings.web
    hub = HubApi(
        web_settings.hub_api_url,
        web_settings.hub_api_token,
        identity_cache_s=web_settings.identity_cache_s,
    )
    ctx = web_context(settings, parts, hub)
    alerts = ctx.alerts
    web = handlers.make_app(ctx, web_settings.base_url, cookie_secret(parts.data_dir))
    bind = urlparse(web_settings.bind_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    poll = hub_poll(service, hub, alerts)

    async def flush() -> None:
        # a thread: writing 1,000 servers takes about 0.1 s, and reports keep coming
        # meanwhile (the ledger takes them under its own lock)
        await asyncio.to_thread(service.flush, now_utc())

    # the first poll before serving: reports find their servers at once
    try:
        await poll()
    except HubApiError as e:
        log.error("first poll of the Hub: %s", e)
    tune_for_reports()
    server = listen(
        web,
        web_settings.base_url,
        bind.port or 80,
        bind.hostname or "127.0.0.1",
        xheaders=True,
        # a body this large is refused before it is read whole (a report is far smaller)
        max_body_size=max(1 << 20, 2 * web_settings.max_report_bytes),
    )
    log.info(
        "gpucost hub service at %s%s (ledger %s, poll %.1f s, flush %.1f s)",
        web_settings.bind_url.rstrip("/"),
        web_settings.base_url,
        parts.ledger_label,
        settings.poll_interval_s,
        settings.flush_interval_s,
    )
    tasks = [
        asyncio.create_task(every(settings.poll_interval_s, "poll of the Hub", poll, stop)),
        asyncio.create_task(every(settings.flush_interval_s, "ledger flush", flush, stop)),
    ]
    if alerts is not None and settings.notify.spike_factor > 0:

        async def spikes() -> None:
            await asyncio.to_thread(alert_spikes, alerts, service)

        tasks.append(asyncio.create_task(every(SPIKES_EVERY_S, "spend spikes", spikes, stop)))
    cluster = watch_cluster(settings, parts, stop)
    if cluster is not None:
        tasks.append(cluster[0])
    tasks.extend(read_bills(settings, service, stop))
    try:
        await stop.wait()
    finally:
        server.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if cluster is not None:
            cluster[1].close()
        service.close(now_utc())
        log.info("gpucost hub service stopped; the ledger is flushed")
