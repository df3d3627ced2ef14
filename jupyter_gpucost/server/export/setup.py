"""Turn the ``GpuCost`` export traits into a running ``ExportManager``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from jupyter_core.paths import jupyter_data_dir
from traitlets import HasTraits, TraitError

from ...core.refusal import Refusal
from ...core.wire import StatusDocument
from ..traits import trait_bool, trait_dict, trait_int, trait_str
from .jobs import ExportManager, ExportSettings, export_context, software_versions
from .stores import MIB, Tuning
from .targets import ExportTargetError, choose_default, parse_targets

#: the budget action's export step: ``async () -> what was exported``
ExportHook = Callable[[], Awaitable[str | None]]


class StatusSource(Protocol):
    """Where a manifest's session facts come from (the cost service)."""

    def status(self) -> StatusDocument: ...


def local_folder(traits: HasTraits) -> Path:
    folder = trait_str(traits, "export_folder")
    return Path(folder or Path(jupyter_data_dir()) / "gpucost" / "exports")


def export_settings(traits: HasTraits, root_dir: str) -> ExportSettings:
    """The validated export settings of the ``GpuCost`` traits (raises TraitError)."""

    try:
        targets = parse_targets(
            trait_dict(traits, "export_targets"), local_default=local_folder(traits)
        )
        default = choose_default(targets, trait_str(traits, "export_default_target"))
    except ExportTargetError as e:
        raise TraitError(f"{e}.") from None
    return ExportSettings(
        targets=targets,
        default_target=default,
        root_dir=root_dir,
        allow_urls=trait_bool(traits, "export_allow_urls"),
        allow_hidden=trait_bool(traits, "export_allow_hidden"),
        tuning=Tuning(
            part_size_bytes=trait_int(traits, "export_part_size_mb") * MIB,
            concurrency=trait_int(traits, "export_concurrency"),
            retries=trait_int(traits, "export_retries"),
        ),
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
