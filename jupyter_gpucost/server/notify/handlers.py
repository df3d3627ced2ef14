"""The panel's alert routes: where alerts go (masked), add or remove one of the user's own
targets, send a test to one. The admin's targets (``c.GpuCost.notify``) are shown by kind
only and can be neither tested, removed nor replaced from here."""

from __future__ import annotations

from http import HTTPStatus

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from tornado import web

from ...alerts.targets import TargetError
from ...core.i18n import _
from ...core.refusal import Refusal
from ..web import API_PREFIX, GpuCostHandler, Route
from .alerter import ServerAlerts


class AlertsHandler(GpuCostHandler):
    @property
    def alerts(self) -> ServerAlerts:
        alerts: ServerAlerts | None = self.settings.get("gpucost_alerts")
        if alerts is None:
            raise Refusal(
                _("alerts are not running on this server"), HTTPStatus.SERVICE_UNAVAILABLE
            )
        return alerts

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.write_json(self.alerts.listing())


class AlertTargetsHandler(AlertsHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        """``{"url": "mailtos://..."}``: a target for the user's own alerts."""
        alerts = self.alerts
        if not alerts.allow_user_targets:
            raise Refusal(
                _("the administrator does not let users add alert targets"), HTTPStatus.FORBIDDEN
            )
        body = self.body()
        if set(body) != {"url"} or not isinstance(body["url"], str):
            raise Refusal(_("send {field}").format(field='{"url": "..."}'))
        try:
            await to_thread.run_sync(alerts.user.add, body["url"])
        except TargetError:
            raise Refusal(
                _(
                    "this is not a URL alerts can be sent to: use an Apprise URL "
                    "(mailtos://, slack://, ...) or webhook:// or webhooks://"
                )
            ) from None
        self.write_json(alerts.listing())


class AlertTargetHandler(AlertsHandler):
    @web.authenticated
    @authorized
    async def delete(self, target_id: str) -> None:
        alerts = self.alerts
        if not await to_thread.run_sync(alerts.user.remove, target_id):
            raise Refusal(_("no target of yours has this id"), HTTPStatus.NOT_FOUND)
        self.write_json(alerts.listing())


class AlertTestHandler(AlertsHandler):
    @web.authenticated
    @authorized
    def post(self, target_id: str) -> None:
        """Send a test alert to one of the user's own targets (its result is listed later)."""
        if not self.alerts.test(target_id):
            raise Refusal(_("no target of yours has this id"), HTTPStatus.NOT_FOUND)
        self.write_json({"queued": True})


def alert_handlers() -> list[Route]:
    return [
        (f"{API_PREFIX}/alerts", AlertsHandler),
        (f"{API_PREFIX}/alerts/targets", AlertTargetsHandler),
        (rf"{API_PREFIX}/alerts/targets/([0-9a-f]{{6}})", AlertTargetHandler),
        (rf"{API_PREFIX}/alerts/targets/([0-9a-f]{{6}})/test", AlertTestHandler),
    ]
