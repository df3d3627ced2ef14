"""Which kernels run, which processes are theirs, and what share of the GPUs they use.

Two halves, so that nothing slow runs on the event loop:

* :meth:`KernelTracker.refresh` runs on the event loop (about once a second): it reads
  the kernel manager and the session manager — in-memory lookups — and publishes a
  :class:`KernelInfo` per kernel (id, name, state, notebook, the provisioner's pid).
* :meth:`KernelTracker.processes` runs in the sampler thread: it walks each kernel's
  process tree with psutil (DataLoader workers, ``!torchrun`` children) and caches it.

Attribution of cost from GPU processes to kernels is in :mod:`.attribution`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psutil


@dataclass(frozen=True)
class KernelInfo:
    id: str
    name: str
    execution_state: str
    notebook_path: str | None
    #: the kernel process as its provisioner started it; ``None`` for remote kernels
    pid: int | None
    started: datetime | None


class KernelTracker:
    def __init__(self, log: logging.Logger | None = None) -> None:
        self.log = log or logging.getLogger("jupyter_gpucost")
        self._lock = threading.Lock()
        self._kernels: dict[str, KernelInfo] = {}
        self._first_seen: dict[str, datetime] = {}
        self._trees: dict[str, frozenset[int]] = {}

    # -- event loop side -------------------------------------------------------

    async def refresh(self, kernel_manager: Any, session_manager: Any) -> None:
        """Read kernels and their notebooks (cheap, in-memory; called on the loop)."""
        paths: dict[str, str] = {}
        if session_manager is not None:
            try:
                for session in await session_manager.list_sessions():
                    kernel = session.get("kernel") or {}
                    if kernel.get("id") and session.get("path"):
                        paths[kernel["id"]] = session["path"]
            except Exception as e:  # a session store problem must not stop the meter
                self.log.debug("jupyter-gpucost: cannot list sessions: %s", e)
        kernels: dict[str, KernelInfo] = {}
        for kernel_id in list(kernel_manager.list_kernel_ids()):
            try:
                km = kernel_manager.get_kernel(kernel_id)
            except KeyError:
                continue
            pid = self._pid_of(km)
            started = self._started(kernel_id, pid)
            kernels[kernel_id] = KernelInfo(
                id=kernel_id,
                name=str(getattr(km, "kernel_name", "") or ""),
                execution_state=str(getattr(km, "execution_state", "unknown") or "unknown"),
                notebook_path=paths.get(kernel_id),
                pid=pid,
                started=started,
            )
        with self._lock:
            self._kernels = kernels
            for gone in set(self._first_seen) - set(kernels):
                self._first_seen.pop(gone, None)
                self._trees.pop(gone, None)

    @staticmethod
    def _pid_of(km: Any) -> int | None:
        provisioner = getattr(km, "provisioner", None)
        for holder in (provisioner, getattr(provisioner, "process", None)):
            pid = getattr(holder, "pid", None)
            if isinstance(pid, int) and pid > 0:
                return pid
        return None

    def _started(self, kernel_id: str, pid: int | None) -> datetime:
        if kernel_id not in self._first_seen:
            started = datetime.now(UTC)
            if pid is not None:
                with contextlib.suppress(psutil.Error, OSError):
                    started = datetime.fromtimestamp(psutil.Process(pid).create_time(), UTC)
            self._first_seen[kernel_id] = started
        return self._first_seen[kernel_id]

    # -- sampler thread side ---------------------------------------------------

    def kernels(self) -> dict[str, KernelInfo]:
        with self._lock:
            return dict(self._kernels)

    def processes(self) -> dict[str, frozenset[int]]:
        """Each local kernel's process tree (pids), walked now with psutil."""
        trees: dict[str, frozenset[int]] = {}
        for kernel_id, info in self.kernels().items():
            if info.pid is None:
                continue
            pids = {info.pid}
            with contextlib.suppress(psutil.Error, OSError):
                pids.update(c.pid for c in psutil.Process(info.pid).children(recursive=True))
            trees[kernel_id] = frozenset(pids)
        with self._lock:
            self._trees = trees
        return trees

    def trees(self) -> dict[str, frozenset[int]]:
        with self._lock:
            return dict(self._trees)


def uptime_s(info: KernelInfo, now: float | None = None) -> float | None:
    if info.started is None:
        return None
    return max((now if now is not None else time.time()) - info.started.timestamp(), 0.0)
