"""This kernel's own GPU process, made known to the server where NVML's pids are not ours.

Inside a container NVML may list host pids, and nothing inside the container can read its own
host pid (``/proc`` shows the container's namespace). So the kernel lets the server *see*
which process it is (:mod:`jupyter_gpucost.server.gpu_use.gpu_claims`): once this process has a
CUDA context on a GPU (the notebook created it; this module never does), it asks the
server for a probe, waits until the server has read the GPU's processes, allocates exactly
the size the server chose in that context, tells the server it holds it, waits until the
server has read them again, frees it, and the server finds the one process whose memory
rose and fell by that size. The kernel never says which pid
it is: it could not know, and the server would not take its word.

It runs after a cell, in a background thread, at most once per GPU that succeeded (a few
tries per GPU otherwise), and only when the notebook has CUDA up (torch, CuPy or JAX
imported and ``libcuda`` loaded in the process). Without a server nothing happens.
Processes the kernel starts (``torchrun``, DataLoader workers) are not probed: the server
counts them as not from these kernels.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..core.protocol import GPU_PROBES_PATH, gpu_probe_signature
from .auto import Shell
from .cell.cuda import torch_cuda
from .link import LinkError, ServerLink, kernel_id, link

log = logging.getLogger(__name__)

#: tries per GPU before giving up (a probe is ambiguous while the notebook allocates too)
MAX_TRIES = 6
#: of which, one after the other in one run
TRIES_PER_RUN = 2
#: how long to wait for each step of the server's (it reads the GPU once a second or so)
VERDICT_WAIT_S = 15.0
#: a probe's states while it runs
OPEN = ("armed", "held", "released")
#: how often, at most, a kernel looks for a GPU it has not been identified on yet
RECHECK_S = 30.0
#: free GPU memory left beyond twice the probe's block, or no probe (a GPU nearly full)
HEADROOM_BYTES = 1024**3


class CudaContexts(Protocol):
    """The CUDA contexts this process already has, and allocations in them."""

    def active(self) -> list[tuple[int, str]]:
        """(CUDA ordinal, GPU UUID as NVML writes it) of each GPU this process has a
        context on; never creates one."""
        ...

    def allocate(self, ordinal: int, size_bytes: int) -> object: ...

    def free(self, ordinal: int, block: object) -> None: ...


def libcuda_loaded() -> bool:
    """Whether the CUDA driver library is already loaded in this process."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libcuda.so" in line for line in maps)
    except OSError:
        return False


def format_uuid(raw: bytes) -> str:
    """NVML's spelling of a GPU's UUID: ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class LibCuda:
    """The CUDA driver API through ctypes: primary contexts only, never a new context."""

    def __init__(self) -> None:
        self._lib = ctypes.CDLL("libcuda.so.1")

    def _device(self, ordinal: int) -> ctypes.c_int:
        dev = ctypes.c_int()
        if self._lib.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            raise OSError(f"cuDeviceGet({ordinal}) failed")
        return dev

    def active(self) -> list[tuple[int, str]]:
        lib = self._lib
        count = ctypes.c_int()
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return []
        get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or lib.cuDeviceGetUuid
        found: list[tuple[int, str]] = []
        for ordinal in range(count.value):
            try:
                dev = self._device(ordinal)
            except OSError:
                continue
            flags, on = ctypes.c_uint(), ctypes.c_int()
            if lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(on)) != 0:
                continue
            if not on.value:
                continue
            raw = (ctypes.c_ubyte * 16)()
            if get_uuid(raw, dev) != 0:
                continue
            found.append((ordinal, format_uuid(bytes(raw))))
        return found

    def allocate(self, ordinal: int, size_bytes: int) -> object:
        lib = self._lib
        dev = self._device(ordinal)
        ctx = ctypes.c_void_p()
        if lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) != 0:
            raise OSError("cuDevicePrimaryCtxRetain failed")
        ptr = ctypes.c_uint64()
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        lib.cuCtxPushCurrent_v2(ctx)
        try:
            rc = lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
            # never take memory the notebook may be about to need: skip a full GPU
            if rc == 0 and free.value >= size_bytes * 2 + HEADROOM_BYTES:
                rc = lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size_bytes))
            elif rc == 0:
                rc = -1
        finally:
            lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        if rc != 0:
            lib.cuDevicePrimaryCtxRelease_v2(dev)
            raise OSError(f"no probe allocation of {size_bytes} bytes ({rc})")
        return (ctx, ptr.value)

    def free(self, ordinal: int, block: object) -> None:
        lib = self._lib
        ctx, ptr = block if isinstance(block, tuple) else (None, 0)
        lib.cuCtxPushCurrent_v2(ctx)
        try:
            lib.cuMemFree_v2(ctypes.c_uint64(ptr))
        finally:
            lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
            lib.cuDevicePrimaryCtxRelease_v2(self._device(ordinal))


def cuda_in_use() -> bool:
    """The notebook has CUDA up (checked cheaply first, then the driver library)."""
    if torch_cuda() is None and not any(m in sys.modules for m in ("cupy", "jax")):
        return False
    return libcuda_loaded()


class Identifier:
    """Identifies this kernel's process on each GPU it has a context on, once."""

    def __init__(
        self,
        server: ServerLink,
        kernel: str,
        key: bytes,
        cuda: CudaContexts | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.kernel = kernel
        self.key = key
        #: the CUDA driver; found when first needed (a stand-in in tests)
        self.cuda = cuda
        self._sleep = sleep
        self._clock = clock
        #: GPU UUID -> the host pid the server found for this process
        self.identified: dict[str, int] = {}
        #: GPUs where no probe is needed (NVML lists this process by its own pid)
        self.settled: set[str] = set()
        self.tries: dict[str, int] = {}
        self.last_state: dict[str, str] = {}
        self._thread: threading.Thread | None = None
        self._next_check = 0.0

    def post_run_cell(self, result: object = None) -> None:
        """After each cell: start identifying in the background when there is work."""
        if self._thread is not None and self._thread.is_alive():
            return
        if self._clock() < self._next_check:
            return
        if self.cuda is None:
            if not cuda_in_use():
                return
            try:
                self.cuda = LibCuda()
            except OSError:
                self._next_check = float("inf")
                return
        self._thread = threading.Thread(target=self.run, name="gpucost-gpu-identity", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run(self) -> None:
        try:
            self._run()
        finally:
            # whatever happened (an answer of the wrong shape included), the next try
            # waits: never a thread and a request on every cell
            self._next_check = self._clock() + RECHECK_S

    def _run(self) -> None:
        cuda = self.cuda
        if cuda is None:
            return
        try:
            contexts = cuda.active()
        except Exception as e:
            log.debug("jupyter-gpucost: cannot list CUDA contexts: %s", e)
            return
        for ordinal, uuid in contexts:
            for _ in range(TRIES_PER_RUN):
                if uuid in self.identified or uuid in self.settled:
                    break
                if self.tries.get(uuid, 0) >= MAX_TRIES:
                    break
                self.tries[uuid] = self.tries.get(uuid, 0) + 1
                try:
                    self.identify(ordinal, uuid)
                except (LinkError, OSError, KeyError, TypeError, ValueError) as e:
                    # a failed request, or an answer without the fields a probe needs
                    self.last_state[uuid] = f"error: {e!r}"
                    log.debug("jupyter-gpucost: identifying the GPU process failed: %r", e)
                if self.last_state.get(uuid) in ("taken", "visible"):
                    break

    def identify(self, ordinal: int, uuid: str) -> None:
        cuda = self.cuda
        assert cuda is not None
        started = self.server.request(
            "POST",
            GPU_PROBES_PATH,
            {
                "kernel_id": self.kernel,
                "gpu_uuid": uuid,
                "signature": gpu_probe_signature(self.key, self.kernel, uuid),
            },
        )
        if not isinstance(started, dict):
            raise LinkError("unexpected answer", "unexpected")
        if started.get("state") == "visible":
            # NVML lists this kernel's own pid: the server needs no probe (no container)
            self.last_state[uuid] = "visible"
            self.settled.add(uuid)
            return
        probe_path = f"{GPU_PROBES_PATH}/{started['probe_id']}"
        poll_s = max(float(started["hold_s"]) / 4, 0.01)
        # the server reads the memory this process starts from before it allocates
        ready = self._wait(probe_path, poll_s, lambda a: bool(a.get("baseline_read")))
        if not ready.get("baseline_read"):
            self.last_state[uuid] = str(ready.get("state"))
            return
        block = cuda.allocate(ordinal, int(started["size_bytes"]))
        try:
            self.server.request("POST", probe_path, {"step": "held"})
            self._wait(probe_path, poll_s, lambda a: int(a.get("held_readings") or 0) >= 1)
            self.server.request("POST", probe_path, {"step": "released"})
        finally:
            cuda.free(ordinal, block)
        verdict = self._wait(probe_path, poll_s, lambda a: False)
        state = verdict.get("state")
        self.last_state[uuid] = str(state)
        if state == "mapped":
            self.identified[uuid] = int(verdict["host_pid"])

    def _wait(
        self, probe_path: str, poll_s: float, done: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """Read the probe until ``done`` says so, it ended, or :data:`VERDICT_WAIT_S`."""
        deadline = self._clock() + VERDICT_WAIT_S
        while True:
            answer = self.server.request("GET", probe_path)
            if not isinstance(answer, dict):
                raise LinkError("unexpected answer", "unexpected")
            if done(answer) or answer.get("state") not in OPEN or self._clock() > deadline:
                return answer
            self._sleep(poll_s)


def install(shell: Shell) -> Identifier | None:
    """Identify this kernel's GPU processes after cells (with a server to tell)."""
    existing: Identifier | None = getattr(shell, "gpucost_identity", None)
    if existing is not None:
        return existing
    server, kernel = link(), kernel_id()
    key = getattr(getattr(getattr(shell, "kernel", None), "session", None), "key", None)
    if server is None or kernel is None or not isinstance(key, bytes) or not key:
        return None
    identity = Identifier(server, kernel, key)
    shell.gpucost_identity = identity
    shell.events.register("post_run_cell", identity.post_run_cell)
    return identity


def uninstall(shell: Shell) -> None:
    identity: Identifier | None = getattr(shell, "gpucost_identity", None)
    if identity is None:
        return
    shell.events.unregister("post_run_cell", identity.post_run_cell)
    shell.gpucost_identity = None
