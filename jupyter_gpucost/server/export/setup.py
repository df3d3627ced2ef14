"""Turn the ``GpuCost`` export traits into a running ``ExportManager``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import TraitError

from ..errors import RequestError
from .jobs import ExportManager, ExportSettings, export_context, software_versions
from .stores import MIB, Tuning
from .targets import TargetError, choose_default, parse_targets


def local_folder(app: Any) -> Path:
    return Path(app.export_folder or Path(jupyter_data_dir()) / "gpucost" / "exports")


def export_settings(app: Any, root_dir: str) -> ExportSettings:
    try:
        targets = parse_targets(dict(app.export_targets), local_default=local_folder(app))
        default = choose_default(targets, app.export_default_target)
    except TargetError as e:
        raise TraitError(f"{e}.") from None
    return ExportSettings(
        targets=targets,
        default_target=default,
        root_dir=root_dir,
        allow_urls=bool(app.export_allow_urls),
        allow_hidden=bool(app.export_allow_hidden),
        tuning=Tuning(
            part_size_bytes=int(app.export_part_size_mb) * MIB,
            concurrency=int(app.export_concurrency),
            retries=int(app.export_retries),
        ),
    )


def start_exports(app: Any, service: Any) -> ExportManager:
    root_dir = str(getattr(app.serverapp, "root_dir", "") or Path.cwd())
    try:
        settings = export_settings(app, root_dir)
    except TraitError as e:
        app._refuse_to_start(str(e))
        raise
    versions = software_versions()
    manager = ExportManager(
        settings, context=lambda: export_context(service, versions), log=app.log
    )
    return manager


def budget_export_hook(app: Any, manager: ExportManager) -> Any:
    """The budget action's export step: export the configured paths, wait for the job."""
    paths = list(app.export_on_budget_paths)
    timeout_s = float(app.export_on_budget_timeout_s)
    if not paths:
        return None

    async def export_before_action() -> str | None:
        loop = asyncio.get_running_loop()
        try:
            job = await loop.run_in_executor(
                None, lambda: manager.start(paths, None, user="budget")
            )
        except RequestError as e:
            app.log.warning("jupyter-gpucost: checkpoint export before the budget action: %s", e)
            return f"checkpoints not exported: {e}"
        ended = await loop.run_in_executor(None, manager.wait, job.id, timeout_s)
        if ended is None:
            manager.cancel(job.id)
            return f"checkpoint export cancelled after {timeout_s:g}s"
        if ended.state == "done":
            where = ", ".join(r["url"] for r in ended.results)
            return f"checkpoints exported to {where}"
        return f"checkpoint export {ended.state}: {ended.error or ''}".rstrip(": ")

    return export_before_action
