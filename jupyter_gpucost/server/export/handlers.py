"""Export routes: list targets and jobs, start an export, follow it, cancel it.

What the export manager refuses (a ``Refusal``: 400, 403, 404, 409, 501, 503) reaches
the client as a JSON error from the base handler (:mod:`jupyter_gpucost.server.web`).
"""

from __future__ import annotations

import os
from http import HTTPStatus

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from tornado import web

from ...core.i18n import _
from ...core.refusal import Refusal
from ..web import API_PREFIX, GpuCostHandler, Route
from .jobs import ExportManager, manifest_user


class ExportHandler(GpuCostHandler):
    @property
    def exports(self) -> ExportManager:
        manager: ExportManager | None = self.settings.get("gpucost_exports")
        if manager is None:
            raise Refusal(
                _("checkpoint export is not running on this server"), HTTPStatus.SERVICE_UNAVAILABLE
            )
        return manager

    def user_name(self) -> str:
        return manifest_user(os.environ, getattr(self.current_user, "username", None))


class ExportsHandler(ExportHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.write_json(self.exports.payload())

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Start an export: ``{"paths": ["model.pt"], "target": "s3"}`` (target optional)."""
        body = self.body()
        unknown = set(body) - {"paths", "target"}
        if unknown:
            raise Refusal(
                _("unknown field(s) {names}: send paths and target").format(
                    names=", ".join(sorted(unknown))
                )
            )
        exports, user = self.exports, self.user_name()
        # resolving paths walks folders: off the event loop
        job = await to_thread.run_sync(
            lambda: exports.start(body.get("paths"), body.get("target"), user=user)
        )
        self.set_status(202)
        self.write_json(job.public())


class ExportJobHandler(ExportHandler):
    @web.authenticated
    @authorized
    def get(self, job_id: str) -> None:
        self.write_json(self.exports.job(job_id).public())

    @web.authenticated
    @authorized
    def delete(self, job_id: str) -> None:
        """Cancel: the job stops and removes what it wrote."""
        self.write_json(self.exports.cancel(job_id).public())


def export_handlers() -> list[Route]:
    return [
        (f"{API_PREFIX}/exports", ExportsHandler),
        # any segment: an id that is not one is answered (404, JSON) by the handler
        (f"{API_PREFIX}/exports/([^/]+)", ExportJobHandler),
    ]
