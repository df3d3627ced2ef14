"""The export's settings (read once from the ``GpuCost`` traits by the app,
:mod:`..settings`) made into a running ``ExportManager``, and the budget's export step."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from traitlets import TraitError

from ...core.refusal import Refusal
from ...core.wire import StatusDocument
from .jobs import ExportManager, ExportSettings, export_context, software_versions
from .stores import Tuning
from .targets import ExportTargetError, choose_default, parse_targets

#: the budget action's export step: ``async () -> what was exported``
ExportHook = Callable[[], Awaitable[str | None]]


class StatusSource(Protocol):
    """Where a manifest's session facts come from (the cost service)."""

    def status(self) -> StatusDocument: ...


def local_folder(folder: str, data_dir: str) -> Path:
    """The ``local`` target's folder: ``export_folder``, else the data directory's."""
    return Path(folder or Path(data_dir) / "gpucost" / "exports")


def export_settings(
    targets: dict[str, object],
    default_target: str,
    local: Path,
    root_dir: str,
    *,
    allow_urls: bool,
    allow_hidden: bool,
    tuning: Tuning,
) -> ExportSettings:
    """The export settings, the targets checked (raises TraitError naming the setting)."""
    try:
        parsed = parse_targets(targets, local_default=local)
        default = choose_default(parsed, default_target)
    except ExportTargetError as e:
        raise TraitError(f"{e}.") from None
    return ExportSettings(
        targets=parsed,
        default_target=default,
        root_dir=root_dir,
        allow_urls=allow_urls,
        allow_hidden=allow_hidden,
        tuning=tuning,
    )


def start_exports(
    settings: ExportSettings, service: StatusSource, log: logging.Logger
) -> ExportManager:
    versions = software_versions()
    return ExportManager(settings, context=lambda: export_context(service, versions), log=log)


class BudgetExportOptions(Protocol):
    """What the budget's export step is told: the paths, how long to wait, where to log."""

    @property
    def export_on_budget_paths(self) -> Sequence[str]: ...

    @property
    def export_on_budget_timeout_s(self) -> float: ...

    @property
    def log(self) -> logging.Logger: ...


@dataclass(frozen=True)
class ExportOnBudget:
    """``export_on_budget_paths`` and ``export_on_budget_timeout_s``, read once."""

    paths: tuple[str, ...]
    timeout_s: float


@dataclass(frozen=True)
class BudgetExport:
    export_on_budget_paths: Sequence[str]
    export_on_budget_timeout_s: float
    log: logging.Logger


def budget_export_hook(options: BudgetExportOptions, manager: ExportManager) -> ExportHook | None:
    """The budget action's export step: export the configured paths, wait for the job
    (``None``: no paths to export)."""
    paths = list(options.export_on_budget_paths)
    timeout_s = float(options.export_on_budget_timeout_s)
    if not paths:
        return None

    async def export_before_action() -> str | None:
        loop = asyncio.get_running_loop()
        try:
            job = await loop.run_in_executor(
                None, lambda: manager.start(paths, None, user="budget")
            )
        except Refusal as e:
            options.log.warning(
                "jupyter-gpucost: checkpoint export before the budget action: %s", e
            )
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
