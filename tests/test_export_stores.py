"""The stores and the job manager without the server: fsspec stores, the budget's export."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from s3_server import BUCKET

from jupyter_gpucost.server.export.jobs import ExportManager, ExportSettings
from jupyter_gpucost.server.export.setup import budget_export_hook
from jupyter_gpucost.server.export.stores import MIB, Cancelled, FsspecStore, Tuning
from jupyter_gpucost.server.export.targets import ExportTarget, parse_targets


def test_an_fsspec_store_commits_on_close_and_discards_on_cancel(
    s3_endpoint: str,
    tmp_path: Path,
) -> None:
    target = ExportTarget(
        "fs",
        f"s3://{BUCKET}/fsspec",
        {"client_kwargs": {"endpoint_url": s3_endpoint}, "key": "testing", "secret": "testing"},
    )
    store = FsspecStore(target, Tuning(part_size_bytes=5 * MIB))
    source = tmp_path / "model.bin"
    data = os.urandom(11 * MIB)
    source.write_bytes(data)
    progress: list[int] = []
    landed = store.upload(source, "model.bin", progress.append, threading.Event())
    assert sum(progress) == len(data)
    assert landed.sha256 == hashlib.sha256(data).hexdigest()
    assert landed.url == f"s3://{BUCKET}/fsspec/model.bin"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    assert s3.get_object(Bucket=BUCKET, Key="fsspec/model.bin")["Body"].read() == data

    cancel = threading.Event()

    def cancel_after_first_block(n: int) -> None:
        cancel.set()

    with pytest.raises(Cancelled):
        store.upload(source, "cancelled.bin", cancel_after_first_block, cancel)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="fsspec/cancelled")
    assert s3.list_multipart_uploads(Bucket=BUCKET, Prefix="fsspec/").get("Uploads", []) == []


async def test_the_budget_action_exports_the_configured_checkpoints(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    (root / "run" / "last.ckpt").write_bytes(b"weights" * 1000)
    folder = tmp_path / "exports"
    manager = ExportManager(
        ExportSettings(
            targets=parse_targets({}, local_default=folder),
            default_target="local",
            root_dir=str(root),
        ),
        context=lambda: {"session": {"cost_usd": 5.0}},
    )
    app = SimpleNamespace(
        export_on_budget_paths=["run/last.ckpt"],
        export_on_budget_timeout_s=30.0,
        log=logging.getLogger("test"),
    )
    hook = budget_export_hook(app, manager)
    assert hook is not None
    message = await hook()
    assert message == f"checkpoints exported to {(folder / 'last.ckpt').as_uri()}"
    assert (folder / "last.ckpt").read_bytes() == b"weights" * 1000
    manifest: dict[str, Any] = json.loads((folder / "last.ckpt.manifest.json").read_text())
    assert manifest["user"] == "budget"
    assert manifest["session"]["cost_usd"] == 5.0

    # a path that is not there: the action goes on, and says why nothing was exported
    app.export_on_budget_paths = ["run/missing.ckpt"]
    message = await budget_export_hook(app, manager)()
    assert message == "checkpoints not exported: 'run/missing.ckpt' does not exist"
    manager.close()


def test_no_paths_configured_means_no_export_step() -> None:
    app = SimpleNamespace(export_on_budget_paths=[], export_on_budget_timeout_s=1.0)
    assert budget_export_hook(app, None) is None  # type: ignore[arg-type]


def test_the_part_size_keeps_a_file_within_s3s_10000_parts() -> None:
    from jupyter_gpucost.server.export.stores import part_size_for

    assert part_size_for(2 * 1024 * MIB, 8 * MIB) == 8 * MIB
    assert part_size_for(10 * MIB, 1 * MIB) == 5 * MIB  # S3's smallest part
    # 200 GiB in 8 MiB parts would be 25,600 parts: 21 MiB parts make 9,753
    size = 200 * 1024 * MIB
    part = part_size_for(size, 8 * MIB)
    assert part == 21 * MIB
    assert -(-size // part) <= 10_000
