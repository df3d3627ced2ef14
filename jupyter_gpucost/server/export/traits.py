"""The export's settings of ``c.GpuCost`` (docs/export.md): the targets, which paths may
leave, the uploads' tuning and the export before a budget's action. The app reads them once
into :class:`~.jobs.ExportSettings` and :class:`~.setup.ExportOnBudget`
(:mod:`..settings`); their number bounds are the app's ``RANGES`` (:mod:`..traits`).
"""

from __future__ import annotations

from typing import Any

from traitlets import Bool, Dict, Float, HasTraits, Int, List, TraitError, Unicode, validate

from .targets import ExportTargetError, normalise_url


class ExportTraits(HasTraits):
    export_targets = Dict(
        config=True,
        help="Where checkpoints can be exported: name -> URL, or name -> {'url': ..., "
        "'options': {...}, 'label': ...} with fsspec/s3fs-style storage options (e.g. "
        "{'s3': {'url': 's3://bucket/checkpoints', 'options': {'endpoint_url': "
        "'https://minio.example:9000'}}}). Credentials in options stay on the server. A "
        "'local' target (export_folder) is always there unless a target of that name is set.",
    )
    export_default_target = Unicode(
        "",
        config=True,
        help="The target used when none is chosen. Empty: the one configured target, else 'local'.",
    )
    export_folder = Unicode(
        "",
        config=True,
        help="The folder of the 'local' target. Empty: <Jupyter data dir>/gpucost/exports.",
    )
    export_allow_urls = Bool(
        False,
        config=True,
        help="Let users export to any s3://, gs:// or file:// URL, not only configured targets.",
    )
    export_allow_hidden = Bool(
        False, config=True, help="Let users export hidden files and folders (names with '.')."
    )
    export_part_size_mb = Int(
        8,
        config=True,
        help="Size of the parts of a multipart upload, in MiB (5 to 512; larger when a file "
        "would need more than 10,000 parts). Memory used by an upload is about "
        "(export_concurrency + 1) x this.",
    )
    export_concurrency = Int(
        10, config=True, help="Parts of one file uploaded at the same time (1 to 16)."
    )
    export_retries = Int(
        4,
        config=True,
        help="Tries after the first for an upload step that fails with a transient error "
        "(connection lost, 5xx, throttling), with exponential backoff from 0.5 s (0 to 10).",
    )
    export_on_budget_paths = List(
        Unicode(),
        config=True,
        help="Paths (relative to the root dir) exported to the default target when a budget "
        "runs out, after the notebooks are saved and before the budget action.",
    )
    export_on_budget_timeout_s = Float(
        600.0,
        config=True,
        help="How long the budget action waits for that export before cancelling it, 1 to "
        "86400 seconds.",
    )

    @validate("export_folder")
    def _check_export_folder(self, proposal: dict[str, Any]) -> str:
        value = str(proposal["value"]).strip()
        if value:
            try:
                normalise_url(value, what="c.GpuCost.export_folder")
            except ExportTargetError as e:
                raise TraitError(f"{e}.") from None
        return value
