"""Runs the code ``%gpucost on-interrupt`` kept for each kernel (docs/spot.md), at the
notice, after the training guards answered: a kernel still busy is interrupted first;
the code then runs with a deadline; each kernel's outcome is said."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, cast

from jupyter_core.utils import ensure_async

from ...core.interruption_files import CODE_PREFIX, read_json

#: how long an interrupted kernel is given to become idle before the code is sent
SETTLE_S = 2.0


class _Client(Protocol):
    def start_channels(self) -> None: ...

    def stop_channels(self) -> None: ...

    def execute(
        self, code: str, silent: bool = ..., store_history: bool = ..., allow_stdin: bool = ...
    ) -> str: ...

    def get_shell_msg(self, timeout: float | None = ...) -> Awaitable[dict[str, object]]: ...


class _Kernel(Protocol):
    @property
    def execution_state(self) -> str: ...

    def client(self) -> _Client: ...


class CodeKernels(Protocol):
    """What running the code needs of jupyter_server's kernel manager."""

    def list_kernel_ids(self) -> list[str]: ...

    def get_kernel(self, kernel_id: str) -> _Kernel: ...

    def interrupt_kernel(self, kernel_id: str) -> object: ...


@dataclass(frozen=True)
class CodeOutcome:
    kernel_id: str
    #: "done", "late", "failed"
    state: str
    detail: str = ""


def kept_codes(folder: Path) -> dict[str, str]:
    """kernel id -> the code kept for it (blocking: call it off the loop)."""
    codes: dict[str, str] = {}
    for path in folder.glob(f"{CODE_PREFIX}*.json"):
        document = read_json(path)
        code = None if document is None else document.get("code")
        if isinstance(code, str) and code.strip():
            codes[path.name[len(CODE_PREFIX) : -len(".json")]] = code
    return codes


async def run_code(
    manager: CodeKernels,
    kernel_id: str,
    code: str,
    by: datetime,
    clock: Any,
    log: logging.Logger,
) -> CodeOutcome:
    """Run ``code`` in the kernel, done by ``by`` (else ``late``)."""
    kernel = manager.get_kernel(kernel_id)
    if kernel.execution_state == "busy":
        await ensure_async(manager.interrupt_kernel(kernel_id))
        for _ in range(int(SETTLE_S / 0.1)):
            if kernel.execution_state != "busy":
                break
            await asyncio.sleep(0.1)
    client = kernel.client()
    client.start_channels()
    try:
        msg_id = client.execute(code, silent=False, store_history=False, allow_stdin=False)
        while True:
            left = (by - clock()).total_seconds()
            if left <= 0:
                return CodeOutcome(kernel_id, "late")
            try:
                reply = await client.get_shell_msg(timeout=left)
            except Exception:  # queue.Empty on time out
                return CodeOutcome(kernel_id, "late")
            if _field(reply, "parent_header").get("msg_id") != msg_id:
                continue
            content = _field(reply, "content")
            if content.get("status") == "ok":
                return CodeOutcome(kernel_id, "done")
            error = f"{content.get('ename', 'error')}: {content.get('evalue', '')}"
            log.warning("jupyter-gpucost: on-interrupt code failed in %s: %s", kernel_id, error)
            return CodeOutcome(kernel_id, "failed", error)
    finally:
        with contextlib.suppress(Exception):
            client.stop_channels()


def _field(message: dict[str, object], key: str) -> dict[str, object]:
    """A Jupyter message's part (``parent_header``, ``content``) as an object, ``{}`` when
    it is missing or not one."""
    part = message.get(key)
    return cast(dict[str, object], part) if isinstance(part, dict) else {}
