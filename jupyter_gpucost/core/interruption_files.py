"""How the server tells the kernels that the machine is being taken back, and how their
training guards answer: files in one folder, named by ``GPUCOST_INTERRUPTION_DIR`` (the
server publishes it in its environment, which kernels inherit).

* ``notice.json``: written by the server when the notice comes: ``{"provider", "action",
  "deadline", "checkpoint_by"}`` (ISO-8601 UTC);
* ``guard-<pid>-<n>.json``: a running guard (written when it starts, removed when it ends),
  so the server knows whose checkpoint to wait for;
* ``code-<kernel id>.json``: ``{"code"}``, what ``%gpucost on-interrupt`` asks the server
  to run in that kernel at the notice;
* ``ack-<pid>-<n>.json``: the guard's answer once its ``on_interrupt`` returned: ``{"ok",
  "checkpoint", "error", "at"}`` (``checkpoint``: the absolute path it returned, if any).

Files are written whole (a temporary name, then renamed), so a reader never sees half.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

ENV_NAME = "GPUCOST_INTERRUPTION_DIR"
NOTICE = "notice.json"
GUARD_PREFIX = "guard-"
ACK_PREFIX = "ack-"
CODE_PREFIX = "code-"


def write_json(path: Path, document: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(document, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict[str, object] | None:
    """The document, or ``None`` when it is missing or not a JSON object."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def guard_name(pid: int, n: int) -> str:
    return f"{GUARD_PREFIX}{pid}-{n}.json"


def ack_name(guard: str) -> str:
    return ACK_PREFIX + guard.removeprefix(GUARD_PREFIX)


def code_name(kernel_id: str) -> str:
    return f"{CODE_PREFIX}{kernel_id}.json"
