"""Export routes: list targets and jobs, start an export, follow it, cancel it."""

from __future__ import annotations

from anyio import to_thread
from jupyter_server.auth.decorator import authorized
from tornado import web

from ..handlers import API_PREFIX, GpuCostHandler
from .jobs import ExportManager, RequestError


class ExportHandler(GpuCostHandler):
    @property
    def exports(self) -> ExportManager:
        manager = self.settings.get("gpucost_exports")
        if manager is None:
            raise web.HTTPError(503, "checkpoint export is not running on this server")
        return manager  # type: ignore[no-any-return]

    def user_name(self) -> str:
        user = self.current_user
        return str(getattr(user, "username", None) or getattr(user, "name", None) or "")


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
            raise web.HTTPError(
                400, f"unknown field(s) {', '.join(sorted(unknown))}: send paths and target"
            )
        try:
            # resolving paths walks folders: off the event loop
            job = await to_thread.run_sync(
                lambda: self.exports.start(
                    body.get("paths"), body.get("target"), user=self.user_name()
                )
            )
        except RequestError as e:
            raise web.HTTPError(e.status, str(e)) from None
        self.set_status(202)
        self.write_json(job.public())


class ExportJobHandler(ExportHandler):
    @web.authenticated
    @authorized
    def get(self, job_id: str) -> None:
        try:
            job = self.exports.job(job_id)
        except RequestError as e:
            raise web.HTTPError(e.status, str(e)) from None
        self.write_json(job.public())

    @web.authenticated
    @authorized
    def delete(self, job_id: str) -> None:
        """Cancel: the job stops and removes what it wrote."""
        try:
            job = self.exports.cancel(job_id)
        except RequestError as e:
            raise web.HTTPError(e.status, str(e)) from None
        self.write_json(job.public())


def export_handlers() -> list[tuple[str, type[GpuCostHandler]]]:
    return [
        (f"{API_PREFIX}/exports", ExportsHandler),
        # any segment: an id that is not one is answered (404, JSON) by the handler
        (f"{API_PREFIX}/exports/([^/]+)", ExportJobHandler),
    ]
