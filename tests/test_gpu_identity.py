"""The kernel's side of identifying its GPU process: it never creates a CUDA context, never
leaves its probe's block allocated, and a server that refuses costs the notebook nothing."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpucost.core.protocol import GPU_PROBES_PATH
from jupyter_gpucost.kernel.gpu_identity import (
    MAX_TRIES,
    Identifier,
    LibCuda,
    cuda_in_use,
    format_uuid,
    install,
)
from jupyter_gpucost.kernel.link import LinkError, ServerLink

UUID = "GPU-b2e7d1a4-6c39-4f80-a2d5-91e3c07b6d48"


class Cuda:
    def __init__(self) -> None:
        self.live: dict[int, int] = {}
        self.next = 0

    def active(self) -> list[tuple[int, str]]:
        return [(0, UUID)]

    def allocate(self, ordinal: int, size_bytes: int) -> object:
        self.next += 1
        self.live[self.next] = size_bytes
        return self.next

    def free(self, ordinal: int, block: object) -> None:
        assert isinstance(block, int)
        del self.live[block]


class Server(ServerLink):
    """Answers as the server's probe routes do, or refuses at one step."""

    def __init__(
        self, refuse_at: str | None = None, verdict: str = "mapped", start: str = "armed"
    ) -> None:
        super().__init__("http://127.0.0.1:9/", "token")
        self.refuse_at = refuse_at
        self.verdict = verdict
        self.start = start
        self.state = start
        self.calls: list[tuple[str, str, object]] = []

    def request(self, method: str, path: str, body: object = None) -> object:
        self.calls.append((method, path, body))
        step = body.get("step") if isinstance(body, dict) else None
        where = "start" if path == GPU_PROBES_PATH else (step or "read")
        if where == self.refuse_at:
            raise LinkError("the jupyter-gpucost server answered 409: no", "http", http_status=409)
        if where == "start":
            self.state = self.start
        elif where == "held":
            self.state = "held"
        elif where == "released":
            self.state = self.verdict
        mapped = self.state == "mapped"
        return {
            "probe_id": "p1",
            "size_bytes": 16 * 2**20,
            "hold_s": 0.01,
            "state": self.state,
            "host_pid": 3_000_101 if mapped else None,
            "baseline_read": True,
            "held_readings": 1 if self.state != "armed" else 0,
        }


def identifier(server: Server, cuda: Cuda) -> Identifier:
    return Identifier(server, "k1", b"key", cuda, sleep=lambda s: None)


def test_the_server_found_the_process_and_the_block_is_freed() -> None:
    cuda, server = Cuda(), Server()
    ident = identifier(server, cuda)
    ident.run()
    assert ident.identified == {UUID: 3_000_101}
    assert cuda.live == {}
    # the kernel never names a pid
    assert all("pid" not in str(body) for _, _, body in server.calls)
    ident.run()  # identified: nothing more to do
    assert len([c for c in server.calls if c[1] == GPU_PROBES_PATH]) == 1


def test_a_refusal_at_any_step_leaves_nothing_allocated_and_tries_are_bounded() -> None:
    for step in ("start", "held", "released", "read"):
        cuda, server = Cuda(), Server(refuse_at=step)
        ident = identifier(server, cuda)
        for _ in range(MAX_TRIES + 3):
            ident.run()
        assert cuda.live == {}, step
        assert ident.identified == {}
        assert ident.tries[UUID] == MAX_TRIES
        assert ident.last_state[UUID].startswith("error:")


def test_an_ambiguous_probe_is_tried_again_and_a_taken_one_is_not() -> None:
    cuda, server = Cuda(), Server(verdict="ambiguous")
    ident = identifier(server, cuda)
    ident.run()
    assert ident.tries[UUID] == 2
    cuda, server = Cuda(), Server(verdict="taken")
    ident = identifier(server, cuda)
    ident.run()
    assert ident.tries[UUID] == 1
    assert ident.identified == {}


def test_nothing_happens_without_cuda_or_without_a_server() -> None:
    # this test process has not started CUDA: no thread, and no CUDA driver loaded for it
    server = Server()
    ident = Identifier(server, "k1", b"key", None, sleep=lambda s: None)
    assert cuda_in_use() is False
    ident.post_run_cell(None)
    assert ident.cuda is None
    assert server.calls == []

    class Shell:
        kernel = None

    assert install(Shell()) is None


def test_uuids_are_written_as_nvml_writes_them() -> None:
    raw = bytes.fromhex("b2e7d1a46c394f80a2d591e3c07b6d48")
    assert format_uuid(raw) == UUID


def test_where_nvml_lists_the_kernels_own_pid_nothing_is_allocated() -> None:
    cuda, server = Cuda(), Server(start="visible")
    ident = identifier(server, cuda)
    ident.run()
    ident.run()
    assert cuda.next == 0  # never allocated
    assert ident.settled == {UUID}
    assert len(server.calls) == 1


def test_an_answer_of_the_wrong_shape_waits_for_the_next_check_like_a_refusal() -> None:
    # a server (or something in its place) that answers the probe's start without the
    # probe's fields: the kernel gives up for now, frees nothing it never took, and the
    # cells after it start no thread and send no request until the next check
    class Odd(Server):
        def request(self, method: str, path: str, body: object = None) -> object:
            self.calls.append((method, path, body))
            return {}

    now = [100.0]
    cuda, server = Cuda(), Odd()
    ident = Identifier(server, "k1", b"key", cuda, sleep=lambda s: None, clock=lambda: now[0])
    ident.post_run_cell(None)
    ident.join(5)
    first = len(server.calls)
    assert first >= 1
    assert cuda.live == {}
    assert ident.last_state[UUID].startswith("error")
    for _ in range(50):
        ident.post_run_cell(None)
        ident.join(5)
    assert len(server.calls) == first
    now[0] += 31
    ident.post_run_cell(None)
    ident.join(5)
    assert len(server.calls) > first


class Driver:
    """The CUDA driver API's calls LibCuda makes, as the CUDA documentation describes them
    (return 0 = CUDA_SUCCESS; out-parameters written through the pointers): one device
    whose primary context the notebook has made active, or not."""

    def __init__(self, active: bool, free_bytes: int = 40 * 2**30) -> None:
        self.active = active
        self.free_bytes = free_bytes
        self.retained = 0
        self.stack: list[object] = []
        self.allocated: dict[int, int] = {}
        self.calls: list[str] = []

    def _out(self, ref: Any, value: Any) -> None:
        ref._obj.value = value

    def cuInit(self, flags: int) -> int:
        self.calls.append("cuInit")
        return 0

    def cuDeviceGetCount(self, count: Any) -> int:
        self._out(count, 1)
        return 0

    def cuDeviceGet(self, dev: Any, ordinal: int) -> int:
        if ordinal != 0:
            return 101  # CUDA_ERROR_INVALID_DEVICE
        self._out(dev, 0)
        return 0

    def cuDevicePrimaryCtxGetState(self, dev: Any, flags: Any, active: Any) -> int:
        self._out(flags, 0)
        self._out(active, 1 if self.active else 0)
        return 0

    def cuDeviceGetUuid_v2(self, raw: Any, dev: Any) -> int:
        for i, byte in enumerate(bytes.fromhex("b2e7d1a46c394f80a2d591e3c07b6d48")):
            raw[i] = byte
        return 0

    def cuDevicePrimaryCtxRetain(self, ctx: Any, dev: Any) -> int:
        # retaining an inactive primary context would create one: LibCuda never may
        assert self.active, "a context was created"
        self.retained += 1
        self._out(ctx, 0xC0)
        return 0

    def cuDevicePrimaryCtxRelease_v2(self, dev: Any) -> int:
        self.retained -= 1
        return 0

    def cuCtxPushCurrent_v2(self, ctx: Any) -> int:
        self.stack.append(ctx)
        return 0

    def cuCtxPopCurrent_v2(self, ctx: Any) -> int:
        self.stack.pop()
        return 0

    def cuMemGetInfo_v2(self, free: Any, total: Any) -> int:
        assert self.stack, "no current context"
        self._out(free, self.free_bytes)
        self._out(total, 80 * 2**30)
        return 0

    def cuMemAlloc_v2(self, ptr: Any, size: Any) -> int:
        assert self.stack, "no current context"
        address = 0x7F00_0000_0000 + len(self.allocated) * 2**30
        self.allocated[address] = size.value
        self._out(ptr, address)
        return 0

    def cuMemFree_v2(self, ptr: Any) -> int:
        assert self.stack, "no current context"
        del self.allocated[ptr.value]
        return 0


def libcuda(driver: Driver) -> LibCuda:
    lib = LibCuda.__new__(LibCuda)
    lib._lib = driver  # type: ignore[assignment]
    return lib


def test_libcuda_uses_only_a_context_the_notebook_made_and_frees_its_block() -> None:
    driver = Driver(active=True)
    cuda = libcuda(driver)
    assert cuda.active() == [(0, UUID)]
    block = cuda.allocate(0, 16 * 2**20)
    assert list(driver.allocated.values()) == [16 * 2**20]
    assert driver.retained == 1
    assert driver.stack == []  # the context is not left current on the probe's thread
    cuda.free(0, block)
    assert driver.allocated == {}
    assert driver.retained == 0
    assert driver.stack == []


def test_libcuda_sees_no_gpu_without_a_context_and_skips_a_full_gpu() -> None:
    assert libcuda(Driver(active=False)).active() == []
    full = Driver(active=True, free_bytes=1024**3)
    cuda = libcuda(full)
    with pytest.raises(OSError, match="no probe allocation"):
        cuda.allocate(0, 16 * 2**20)
    assert full.allocated == {}
    assert full.retained == 0
    assert full.stack == []
